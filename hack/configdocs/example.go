package main

import (
	"strings"

	"github.com/nri-cpumanager/nri-cpumanager/config"
)

// exampleWidth is the width of example.yaml's comments.
const exampleWidth = 76

// exampleIntro opens config/example.yaml; the keys applied at once and
// those applied without pinned containers follow.
const exampleIntro = `# nri-cpumanager configuration.
#
# Mount this file from a ConfigMap (the plugin follows the ConfigMap's
# symlink swap and reloads it). Every key is optional; the values below are
# the defaults. Keys are named as the kubelet names them where one exists.
# Unknown keys, keys in the wrong case and duplicate keys are errors.
#
# Generated from config/keys.go by ` + regenerate + `: edit the keys there.
#
# When a changed file is picked up:
`

// exampleOutro closes the list of when keys apply.
const exampleOutro = `#   - every other key applies when the plugin restarts
#     (nri_cpumanager_config_restart_pending says one waits for it).
# A file the plugin could not start with is rejected with a message and the
# running config kept (nri_cpumanager_config_rejected).
#
`

// exampleGroups ends the header: configuration groups, and the keys only
// the common file sets.
const exampleGroups = `A node in a configuration group (the node label ` + config.GroupLabel +
	`=<name>) reads ` + config.GroupFilePrefix + `<name>` + config.GroupFileSuffix + ` beside this file over it: the keys that file writes ` +
	`replace these (a mapping is merged key by key, null resets a key to its default; docs/install.md, ` +
	`"Configuration groups"). Only this file sets `

// exampleType names the file's type.
const exampleType = `
# The file's format (a file without them is read as this one, with a
# warning).
apiVersion: ` + config.APIVersion + `
kind: ` + config.Kind + `
`

// renderExample writes config/example.yaml: a header, then every key with
// its doc as a comment and its default.
func renderExample(_ []byte, keys []config.KeyDoc) ([]byte, error) {
	var b strings.Builder
	b.WriteString(exampleIntro)
	writeLines(&b, wrap(strings.Join(namesApplied(keys, "live"), ", ")+" apply at once;",
		exampleWidth, "#   - ", "#     "))
	writeLines(&b, wrap(strings.Join(namesApplied(keys, "without exclusive containers"), ", ")+
		" apply at once, unless pinned containers hold CPUs the new values reserve: "+
		"then they wait until those containers are gone (at a restart too; nri_cpumanager_config_pending);",
		exampleWidth, "#   - ", "#     "))
	b.WriteString(exampleOutro)
	var common []string
	for _, k := range keys {
		if k.CommonOnly != "" {
			common = append(common, k.Name)
		}
	}
	writeLines(&b, wrap(exampleGroups+strings.Join(common, ", ")+".", exampleWidth, "# ", "# "))
	b.WriteString(exampleType)
	for _, k := range keys {
		b.WriteString("\n")
		for i, p := range strings.Split(k.Doc, "\n\n") {
			if i > 0 {
				b.WriteString("#\n")
			}
			writeLines(&b, wrap(p, exampleWidth, "# ", "# "))
		}
		es, err := entries(k)
		if err != nil {
			return nil, err
		}
		if es == nil {
			b.WriteString(k.Name + ": " + scalar(k.Default) + "\n")
			continue
		}
		b.WriteString(k.Name + ":\n")
		for _, e := range es {
			b.WriteString("  " + e.name + ": " + scalar(e.value) + "\n")
		}
	}
	return []byte(b.String()), nil
}

// namesApplied returns the names of the keys applied when says.
func namesApplied(keys []config.KeyDoc, when string) []string {
	var names []string
	for _, k := range keys {
		if k.Applies == when {
			names = append(names, k.Name)
		}
	}
	return names
}

func writeLines(b *strings.Builder, lines []string) {
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
}
