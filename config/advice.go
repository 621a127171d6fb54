package config

import (
	"fmt"
	"net"
	"strings"
)

// Warnings returns what an effective configuration (the file with the
// command line's flags applied) should change although the plugin runs
// with it: settings that are valid but defeat their own purpose where the
// plugin usually runs, in a pod. The file's own warnings (a missing
// apiVersion and kind) come from ParseWithWarnings.
func Warnings(c *Config) []string {
	var out []string
	if IsLoopback(c.HealthAddress) {
		out = append(out, fmt.Sprintf("healthAddress %q is a loopback address: only a client in the plugin's own network namespace "+
			"(inside its pod) reaches it, never the kubelet's HTTP probes, which connect to the pod's address; "+
			"listen on the pod's address (\":%s\") for probes over HTTP, or leave healthAddress \"\" and probe over probeSocket "+
			"(nri-cpumanager probe live|ready)", c.HealthAddress, portOf(c.HealthAddress)))
	}
	return out
}

// IsLoopback reports whether a listen address (host:port) names a
// loopback host: localhost, 127.0.0.0/8, ::1 or an IPv4-mapped 127.x. An
// empty host (":9103", every address) and "" (no listener) are not.
func IsLoopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil || host == "" {
		return false
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// portOf is the port of a host:port address ("" when it has none).
func portOf(address string) string {
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		return ""
	}
	return port
}
