package config

import (
	"reflect"
	"strings"
)

// KeyDoc describes one configuration key as its declaration says, for the
// documents generated from it (go generate ./config runs hack/configdocs)
// and for tools.
type KeyDoc struct {
	// Name is the key as the file writes it.
	Name string
	// Doc says what the key does: paragraphs separated by "\n\n", each on
	// one line.
	Doc string
	// Default is the default value as the file writes it: a string, a
	// bool, an int, a map[string]string of options or a struct.
	Default any
	// Applies says when a running plugin applies a change of the key, in
	// the words of Changes.String: "live", "without exclusive containers"
	// or "at restart".
	Applies string
	// Flag is the command-line flag overriding the key, "" for none.
	Flag string
	// CommonOnly says why only the common file may set the key, not the
	// file of a configuration group; "" when a group's file may.
	CommonOnly string
	// Schema is the JSON schema of the value, its description the doc.
	Schema Schema
}

// Keys returns every key's description, in the order of the file.
func Keys() []KeyDoc {
	defaults := Default()
	docs := make([]KeyDoc, len(keys))
	for i, k := range keys {
		doc := paragraphs(k.doc)
		docs[i] = KeyDoc{
			Name:       k.name,
			Doc:        doc,
			Default:    reflect.Indirect(reflect.ValueOf(k.value.save(defaults))).Interface(),
			Applies:    k.when.String(),
			Schema:     k.value.schema(),
			CommonOnly: k.commonOnly,
		}
		docs[i].Schema.Description = strings.ReplaceAll(doc, "\n\n", " ")
		if k.flag != nil {
			docs[i].Flag = k.flag.name
		}
	}
	return docs
}

// paragraphs collapses the white space of text: its paragraphs (separated
// by blank lines) come out separated by "\n\n", each on one line.
func paragraphs(text string) string {
	var out, words []string
	for _, line := range strings.Split(text, "\n") {
		if fields := strings.Fields(line); len(fields) > 0 {
			words = append(words, fields...)
		} else if len(words) > 0 {
			out, words = append(out, strings.Join(words, " ")), nil
		}
	}
	if len(words) > 0 {
		out = append(out, strings.Join(words, " "))
	}
	return strings.Join(out, "\n\n")
}
