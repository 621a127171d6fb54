package config

import (
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// textFormat is how the values of a key written as a string are read and
// written: the parser (values.go), its inverse, and the JSON schema that
// checks the text before the plugin reads it.
type textFormat[T any] struct {
	parse  func(string) (T, error)
	print  func(T) string
	schema Schema
}

// The formats of the keys written as strings.
var (
	pathText         = plainText(parsePath, Schema{Type: "string", Pattern: "^/"})
	optionalPathText = plainText(func(s string) (string, error) { return s, nil }, Schema{Type: "string", Pattern: "^$|^/"})
	pluginNameText   = plainText(parsePluginName, Schema{Type: "string", Pattern: "^[a-zA-Z0-9_.+-]+$"})
	pluginIndexText  = plainText(parsePluginIndex, Schema{Type: "string", Pattern: "^[0-9]{2}$"})
	addressText      = plainText(parseMetricsAddress, Schema{Type: "string", Pattern: `^$|^(\[[0-9A-Fa-f:.]+\]|[^:\[\]]*):[0-9]{1,5}$`})

	isolatedCPUsText = textFormat[IsolatedCPUs]{
		parse: parseIsolatedCPUs, print: func(m IsolatedCPUs) string { return string(m) },
		schema: oneOf(isolatedCPUsNames()),
	}
	topologyPolicyText = textFormat[cpuallocator.TopologyPolicy]{
		parse: cpuallocator.ParseTopologyPolicy, print: func(p cpuallocator.TopologyPolicy) string { return string(p) },
		schema: oneOf(cpuallocator.TopologyPolicyNames()),
	}
	topologyScopeText = textFormat[cpuallocator.TopologyScope]{
		parse: cpuallocator.ParseTopologyScope, print: func(s cpuallocator.TopologyScope) string { return string(s) },
		schema: oneOf(cpuallocator.TopologyScopeNames()),
	}
	logLevelText  = textFormat[logrus.Level]{parse: parseLogLevel, print: logLevelName, schema: oneOf(logLevelNames())}
	logFormatText = textFormat[LogFormat]{parse: parseLogFormat, print: func(f LogFormat) string { return string(f) }, schema: oneOf(logFormatNames())}

	durationText       = textFormat[time.Duration]{parse: parseDuration, print: time.Duration.String, schema: durationSchema}
	scaleDownDelayText = textFormat[time.Duration]{parse: parseScaleDownDelay, print: time.Duration.String, schema: durationSchema}
)

// Schemas of texts that are not a key's value on their own.
var (
	// durationSchema is a Go duration ≥ 0 ("90s", "1m30s", "0").
	durationSchema = Schema{Type: "string", Pattern: `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$|^0$`}
	// cpuListSchema is a Linux CPU list such as "0,2-3", or "".
	cpuListSchema = Schema{Type: "string", Pattern: "^$|^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$"}
	// booleanOptionSchema is a kubelet policy option that is on or off.
	booleanOptionSchema = oneOf([]string{"true", "false"})
	// positiveIntegerSchema is a kubelet policy option that counts, ≥ 1.
	positiveIntegerSchema = Schema{Type: "string", Pattern: "^[1-9][0-9]*$"}
)

// plainText is the format of a string kept as it is written, once parse
// accepts it.
func plainText(parse func(string) (string, error), schema Schema) textFormat[string] {
	return textFormat[string]{parse: parse, print: func(s string) string { return s }, schema: schema}
}

// oneOf is the schema of a string that is one of names.
func oneOf(names []string) Schema {
	return Schema{Type: "string", Enum: names}
}
