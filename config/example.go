package config

import _ "embed"

//go:embed example.yaml
var example string

// Example returns a fully commented config document holding the defaults,
// for operators to start from (e.g. a ConfigMap, or a subcommand that
// prints it).
func Example() []byte { return []byte(example) }
