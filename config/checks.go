package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
)

// This file holds the rules that involve several keys; the rules of one
// key are its declaration in keys.

// countReplacesDefaultList resolves reservedSystemCPUs when the document
// does not write it: the default list applies unless reservedCPUCount asks
// for a count, which then replaces the default list.
func countReplacesDefaultList(d document) {
	list, count := d.value("reservedSystemCPUs"), d.value("reservedCPUCount")
	if list.IsNil() && count.Int() > 0 {
		list.Set(reflect.ValueOf(new(string)))
	}
}

// checkTogether returns the problems of keys that are valid on their own
// but not together, in a fixed order.
func checkTogether(c *Config) []error {
	var errs []error
	if c.HealthAddress != "" && c.HealthAddress == c.MetricsAddress {
		errs = append(errs, fmt.Errorf("healthAddress and metricsAddress are both %q: the probes need a listener of their own "+
			"(or none: healthAddress \"\", the probes ask probeSocket)", c.HealthAddress))
	}
	if c.ReservedSystemCPUs.Size() > 0 && c.ReservedCPUCount > 0 {
		errs = append(errs, fmt.Errorf("reservedSystemCPUs and reservedCPUCount are both set (%q and %d): "+
			"remove reservedCPUCount to reserve exactly CPUs %s, or remove reservedSystemCPUs to reserve %d CPUs placed by topology",
			c.ReservedSystemCPUs.String(), c.ReservedCPUCount, c.ReservedSystemCPUs.String(), c.ReservedCPUCount))
	}
	if c.NodeResourceTopology.Enabled && !c.KubernetesAPI {
		errs = append(errs, errors.New("nodeResourceTopology.enabled: the export needs the Kubernetes API: set kubernetesAPI: true as well"))
	}
	if err := checkCheckpointsApart(c.StateDir, c.KubeletCheckpoint); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkCheckpointsApart refuses a kubeletCheckpoint inside stateDir: the
// plugin owns that directory (it writes its own cpu_manager_state there and
// moves untrusted files aside) and would overwrite what it means to import.
func checkCheckpointsApart(stateDir, kubeletCheckpoint string) error {
	if stateDir == "" || kubeletCheckpoint == "" {
		return nil
	}
	if filepath.Dir(filepath.Clean(kubeletCheckpoint)) != filepath.Clean(stateDir) {
		return nil
	}
	return fmt.Errorf("stateDir: %q holds kubeletCheckpoint %q; the plugin would write its own checkpoint over it: "+
		"give the plugin a directory of its own", stateDir, kubeletCheckpoint)
}
