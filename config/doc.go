// Package config is the plugin's configuration: the YAML schema an operator
// mounts from a ConfigMap, its defaults and validation, command-line flags
// that override single keys, a watcher that reloads the file when it
// changes, and Diff, which says which changes may be applied to a running
// plugin.
//
// Every key is declared once, in the table of keys.go: its name, doc,
// default, validation, JSON schema, flag and when a running plugin applies
// it. The parser, Diff, the flags and the documents generated from the
// table (config/example.yaml, the reference table of docs/install.md and
// the chart's values.schema.json; go generate rewrites them, and the test
// of hack/configdocs fails while they are stale) all read it.
//
// Keys are named as the kubelet names them where one exists
// (reservedSystemCPUs, cpuManagerPolicyOptions, topologyManagerPolicy, ...).
// Decoding is strict: an unknown key, a key spelled with the wrong case or a
// duplicate key is an error. Validation reports every problem at once, one
// line per problem, each naming the key, the bad value and what is allowed.
//
// The package does no logging and holds no global state but the table and
// what is built from it; the caller decides what to do with a reloaded
// config (see Diff).
package config

//go:generate go run ../hack/configdocs -root ..
