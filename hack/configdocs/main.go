// Command configdocs writes the documents generated from the declarations
// of the configuration keys (config/keys.go): config/example.yaml, the
// reference table of docs/install.md and the config part of the chart's
// values.schema.json. Run it as go generate ./config; its test fails while
// a document is stale.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// regenerate is the command that rewrites the documents, for messages.
const regenerate = "go generate ./config"

// document is a file generated, in whole or in part, from the keys.
type document struct {
	// path is the file's path from the repository's root.
	path string
	// render returns the file's content for the keys, given its content
	// now (the parts not generated are kept).
	render func(old []byte, keys []config.KeyDoc) ([]byte, error)
}

// documents lists every generated document.
var documents = []document{
	{"config/example.yaml", renderExample},
	{"docs/install.md", renderReference},
	{"deploy/helm/nri-cpumanager/values.schema.json", renderChartSchema},
}

func main() {
	root := flag.String("root", ".", "the repository's root `directory`")
	flag.Parse()
	if err := write(*root, config.Keys()); err != nil {
		fmt.Fprintln(os.Stderr, "configdocs:", err)
		os.Exit(1)
	}
}

// write rewrites, under root, each document that is not what the keys
// make.
func write(root string, keys []config.KeyDoc) error {
	for _, d := range documents {
		path := filepath.Join(root, d.path)
		old, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", d.path, err)
		}
		content, err := d.render(old, keys)
		if err != nil {
			return fmt.Errorf("rendering %s: %w", d.path, err)
		}
		if bytes.Equal(old, content) {
			continue
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", d.path, err)
		}
		fmt.Println("configdocs: wrote", d.path)
	}
	return nil
}
