package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// The markers around the reference table in docs/install.md.
const (
	referenceBegin = "<!-- config-keys:begin (generated from config/keys.go by " + regenerate + ") -->\n"
	referenceEnd   = "<!-- config-keys:end -->"
)

// renderReference replaces the table between the markers of
// docs/install.md with one row per key.
func renderReference(old []byte, keys []config.KeyDoc) ([]byte, error) {
	begin := bytes.Index(old, []byte(referenceBegin))
	end := bytes.Index(old, []byte(referenceEnd))
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("no lines %q and %q around the table", strings.TrimSpace(referenceBegin), referenceEnd)
	}
	table, err := referenceTable(keys)
	if err != nil {
		return nil, err
	}
	begin += len(referenceBegin)
	return append(append(bytes.Clone(old[:begin]), table...), old[end:]...), nil
}

// referenceTable is the Markdown table of the keys.
func referenceTable(keys []config.KeyDoc) (string, error) {
	var b strings.Builder
	b.WriteString("| Key | Default | Applies | Flag | In a group | |\n|---|---|---|---|---|---|\n")
	for _, k := range keys {
		def, err := defaultCell(k)
		if err != nil {
			return "", err
		}
		flag := ""
		if k.Flag != "" {
			flag = "`--" + k.Flag + "`"
		}
		group := "yes"
		if k.CommonOnly != "" {
			group = "no"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", k.Name, def, k.Applies, flag, group, cell(k.Doc))
	}
	return b.String(), nil
}

// defaultCell writes a key's default as the file does, a mapping one key
// a line.
func defaultCell(k config.KeyDoc) (string, error) {
	es, err := entries(k)
	if err != nil {
		return "", err
	}
	if es == nil {
		return "`" + scalar(k.Default) + "`", nil
	}
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = "`" + e.name + ": " + scalar(e.value) + "`"
	}
	return strings.Join(lines, "<br>"), nil
}

// cell makes text fit in a table's cell: one line, no bare | and no < or
// > that Markdown would take for HTML.
func cell(text string) string {
	return strings.NewReplacer("\n\n", "<br>", "|", `\|`, "<", "&lt;", ">", "&gt;").Replace(text)
}
