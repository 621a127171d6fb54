// Command hello stands in for the plugin in hack/image's test: it prints
// the version and revision stamped with -ldflags.
package main

import "fmt"

var version, revision = "unset", "unset"

func main() { fmt.Printf("%s %s\n", version, revision) }
