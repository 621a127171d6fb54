package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nri-cpumanager/nri-cpumanager/cpumask"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"
)

// This file holds the parsers of single values. Each returns an error that
// names the bad value and what is allowed, without the key: the caller
// (file validation or a flag) says which key or flag it came from.

// parsePath accepts any non-empty path.
func parsePath(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf(`"" is not a path`)
	}
	return s, nil
}

// parsePluginName accepts the names NRI accepts: [a-zA-Z0-9_.+-]+.
func parsePluginName(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf(`"" is not a plugin name; use letters, digits and _.+-`)
	}
	for _, r := range s {
		if !isPluginNameRune(r) {
			return "", fmt.Errorf("%q has the character %q; a plugin name has only letters, digits and _.+-", s, r)
		}
	}
	return s, nil
}

func isPluginNameRune(r rune) bool {
	return ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') ||
		strings.ContainsRune("_.+-", r)
}

// parsePluginIndex accepts two decimal digits, 00 to 99.
func parsePluginIndex(s string) (string, error) {
	if len(s) != 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' {
		return "", fmt.Errorf(`%q is not two digits 00-99; write it quoted, e.g. "09"`, s)
	}
	return s, nil
}

// parseCPUList accepts a Linux CPU list such as "0,2-3" or "" (no CPUs),
// with ids up to cpumask.MaxID.
func parseCPUList(s string) (cpuset.CPUSet, error) {
	cpus, err := cpumask.Parse(s, cpumask.MaxID)
	if err != nil {
		return cpuset.New(), fmt.Errorf("%q is not a CPU list such as \"0,2-3\": %w", s, err)
	}
	return cpus, nil
}

// parseCPUCount accepts a count of CPUs, 0 meaning none.
func parseCPUCount(n int) (int, error) {
	if n < 0 {
		return 0, fmt.Errorf("%d is not a CPU count ≥ 0", n)
	}
	return n, nil
}

// parseIsolatedCPUs accepts shared or exclusive.
func parseIsolatedCPUs(s string) (IsolatedCPUs, error) {
	switch m := IsolatedCPUs(s); m {
	case IsolatedCPUsShared, IsolatedCPUsExclusive:
		return m, nil
	}
	return "", notOneOf(s, isolatedCPUsNames())
}

// isolatedCPUsNames are the values parseIsolatedCPUs accepts.
func isolatedCPUsNames() []string {
	return []string{string(IsolatedCPUsShared), string(IsolatedCPUsExclusive)}
}

// parseLogFormat checks a logFormat value.
func parseLogFormat(s string) (LogFormat, error) {
	switch f := LogFormat(s); f {
	case LogFormatText, LogFormatJSON:
		return f, nil
	}
	return "", notOneOf(s, logFormatNames())
}

// logFormatNames are the values parseLogFormat accepts.
func logFormatNames() []string {
	return []string{string(LogFormatText), string(LogFormatJSON)}
}

// logLevels are the accepted logLevel values. logrus's own names are not
// used for printing because it calls WarnLevel "warning".
var logLevels = []struct {
	name  string
	level logrus.Level
}{
	{"trace", logrus.TraceLevel},
	{"debug", logrus.DebugLevel},
	{"info", logrus.InfoLevel},
	{"warn", logrus.WarnLevel},
	{"error", logrus.ErrorLevel},
}

// parseLogLevel accepts trace, debug, info, warn and error.
func parseLogLevel(s string) (logrus.Level, error) {
	for _, l := range logLevels {
		if l.name == s {
			return l.level, nil
		}
	}
	return logrus.InfoLevel, notOneOf(s, logLevelNames())
}

// logLevelNames are the values parseLogLevel accepts.
func logLevelNames() []string {
	names := make([]string, len(logLevels))
	for i, l := range logLevels {
		names[i] = l.name
	}
	return names
}

// logLevelName is the inverse of parseLogLevel; levels it does not accept
// (panic, fatal) keep logrus's name.
func logLevelName(level logrus.Level) string {
	for _, l := range logLevels {
		if l.level == level {
			return l.name
		}
	}
	return level.String()
}

// parseMetricsAddress accepts host:port with a numeric port, or "" to
// disable the endpoint (metricsAddress, debugAddress).
func parseMetricsAddress(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return "", fmt.Errorf(`%q is not host:port such as ":9101" or "127.0.0.1:9101", or "" to disable the endpoint`, s)
	}
	return s, nil
}

// parseDuration accepts a Go duration such as "60s" or "1m30s", ≥ 0.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf(`%q is not a duration ≥ 0 such as "60s" or "2m"`, s)
	}
	return d, nil
}

// maxScaleDownDelay bounds scaleDownDelay: CPUs a decrease released stay
// out of every other container's reach that long.
const maxScaleDownDelay = 10 * time.Minute

// parseScaleDownDelay reads scaleDownDelay: a duration from 0 to
// maxScaleDownDelay.
func parseScaleDownDelay(s string) (time.Duration, error) {
	d, err := parseDuration(s)
	if err != nil {
		return 0, err
	}
	if d > maxScaleDownDelay {
		return 0, fmt.Errorf("%s is longer than %s: the CPUs a decrease releases would stay out of every other container's reach that long", d, maxScaleDownDelay)
	}
	return d, nil
}

func notOneOf(value string, allowed []string) error {
	return fmt.Errorf("%q is not one of %s", value, strings.Join(allowed, ", "))
}
