package config

import (
	"errors"
	"fmt"
	"path/filepath"

	"k8s.io/utils/cpuset"

	"github.com/nri-cpumanager/nri-cpumanager/cpuallocator"
)

// file is the YAML schema: what an operator writes. Values are raw; build
// validates them into a Config. Every key the schema knows is a field with a
// json tag (sigs.k8s.io/yaml decodes through encoding/json).
type file struct {
	NRISocket    string `json:"nriSocket"`
	PluginName   string `json:"pluginName"`
	PluginIndex  string `json:"pluginIndex"`
	StateDir     string `json:"stateDir"`
	SysfsRoot    string `json:"sysfsRoot"`
	CgroupfsRoot string `json:"cgroupfsRoot"`
	// ReservedSystemCPUs is a pointer to tell "not written" (nil: the
	// default "0" unless reservedCPUCount is set) from "" (no CPUs).
	ReservedSystemCPUs           *string              `json:"reservedSystemCPUs"`
	ReservedCPUCount             int                  `json:"reservedCPUCount"`
	IsolatedCPUs                 string               `json:"isolatedCPUs"`
	CPUManagerPolicyOptions      map[string]string    `json:"cpuManagerPolicyOptions"`
	TopologyManagerPolicy        string               `json:"topologyManagerPolicy"`
	TopologyManagerScope         string               `json:"topologyManagerScope"`
	TopologyManagerPolicyOptions map[string]string    `json:"topologyManagerPolicyOptions"`
	InPlaceResize                bool                 `json:"inPlaceResize"`
	ScaleDownDelay               string               `json:"scaleDownDelay"`
	AlignMemory                  bool                 `json:"alignMemory"`
	MetricsAddress               string               `json:"metricsAddress"`
	HealthAddress                string               `json:"healthAddress"`
	DebugAddress                 string               `json:"debugAddress"`
	LogLevel                     string               `json:"logLevel"`
	KubeletCheckpoint            string               `json:"kubeletCheckpoint"`
	DisconnectedTimeout          string               `json:"disconnectedTimeout"`
	NRIConfigureTimeout          string               `json:"nriConfigureTimeout"`
	KubernetesAPI                bool                 `json:"kubernetesAPI"`
	NodeResourceTopology         NodeResourceTopology `json:"nodeResourceTopology"`
}

// defaultFile is the schema holding every default, ready to be decoded
// over: keys the document does not write keep these values.
func defaultFile() *file {
	f := toFile(Default())
	f.ReservedSystemCPUs = nil
	f.CPUManagerPolicyOptions = nil
	f.TopologyManagerPolicyOptions = nil
	return f
}

// toFile writes every value of c in the schema's notation.
func toFile(c *Config) *file {
	reserved := c.ReservedSystemCPUs.String()
	return &file{
		NRISocket:                    c.NRISocket,
		PluginName:                   c.PluginName,
		PluginIndex:                  c.PluginIndex,
		StateDir:                     c.StateDir,
		SysfsRoot:                    c.SysfsRoot,
		CgroupfsRoot:                 c.CgroupfsRoot,
		ReservedSystemCPUs:           &reserved,
		ReservedCPUCount:             c.ReservedCPUCount,
		IsolatedCPUs:                 string(c.IsolatedCPUs),
		CPUManagerPolicyOptions:      c.CPUManagerPolicyOptions.Map(),
		TopologyManagerPolicy:        string(c.TopologyManagerPolicy),
		TopologyManagerScope:         string(c.TopologyManagerScope),
		TopologyManagerPolicyOptions: c.TopologyManagerPolicyOptions.Map(),
		InPlaceResize:                c.InPlaceResize,
		ScaleDownDelay:               c.ScaleDownDelay.String(),
		AlignMemory:                  c.AlignMemory,
		MetricsAddress:               c.MetricsAddress,
		HealthAddress:                c.HealthAddress,
		DebugAddress:                 c.DebugAddress,
		LogLevel:                     logLevelName(c.LogLevel),
		KubeletCheckpoint:            c.KubeletCheckpoint,
		DisconnectedTimeout:          c.DisconnectedTimeout.String(),
		NRIConfigureTimeout:          c.NRIConfigureTimeout.String(),
		KubernetesAPI:                c.KubernetesAPI,
		NodeResourceTopology:         c.NodeResourceTopology,
	}
}

// build validates f into a Config, reporting every problem (one error per
// problem, each starting with the key) joined into one error.
func (f *file) build() (*Config, error) {
	var errs []error
	check := func(key string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	c := &Config{
		InPlaceResize:        f.InPlaceResize,
		AlignMemory:          f.AlignMemory,
		KubeletCheckpoint:    f.KubeletCheckpoint,
		KubernetesAPI:        f.KubernetesAPI,
		NodeResourceTopology: f.NodeResourceTopology,
	}
	var err error
	c.NRISocket, err = parsePath(f.NRISocket)
	check("nriSocket", err)
	c.PluginName, err = parsePluginName(f.PluginName)
	check("pluginName", err)
	c.PluginIndex, err = parsePluginIndex(f.PluginIndex)
	check("pluginIndex", err)
	c.StateDir, err = parsePath(f.StateDir)
	check("stateDir", err)
	c.SysfsRoot, err = parsePath(f.SysfsRoot)
	check("sysfsRoot", err)
	c.CgroupfsRoot = f.CgroupfsRoot // "" turns the verification of cpusets off
	c.ReservedSystemCPUs, err = f.reservedCPUs()
	check("reservedSystemCPUs", err)
	c.ReservedCPUCount, err = parseCPUCount(f.ReservedCPUCount)
	check("reservedCPUCount", err)
	c.IsolatedCPUs, err = parseIsolatedCPUs(f.IsolatedCPUs)
	check("isolatedCPUs", err)
	c.TopologyManagerPolicy, err = cpuallocator.ParseTopologyPolicy(f.TopologyManagerPolicy)
	check("topologyManagerPolicy", err)
	c.TopologyManagerScope, err = cpuallocator.ParseTopologyScope(f.TopologyManagerScope)
	check("topologyManagerScope", err)
	c.MetricsAddress, err = parseMetricsAddress(f.MetricsAddress)
	check("metricsAddress", err)
	c.HealthAddress, err = parseMetricsAddress(f.HealthAddress)
	check("healthAddress", err)
	c.DebugAddress, err = parseMetricsAddress(f.DebugAddress)
	check("debugAddress", err)
	c.LogLevel, err = parseLogLevel(f.LogLevel)
	check("logLevel", err)
	c.DisconnectedTimeout, err = parseDuration(f.DisconnectedTimeout)
	check("disconnectedTimeout", err)
	c.NRIConfigureTimeout, err = parseDuration(f.NRIConfigureTimeout)
	check("nriConfigureTimeout", err)
	c.ScaleDownDelay, err = parseScaleDownDelay(f.ScaleDownDelay)
	check("scaleDownDelay", err)

	var optErrs []error
	c.CPUManagerPolicyOptions, optErrs = cpuallocator.ParseStaticPolicyOptions(f.CPUManagerPolicyOptions)
	errs = append(errs, optionErrors("cpuManagerPolicyOptions", optErrs)...)
	c.TopologyManagerPolicyOptions, optErrs = cpuallocator.ParseTopologyOptions(f.TopologyManagerPolicyOptions)
	errs = append(errs, optionErrors("topologyManagerPolicyOptions", optErrs)...)

	if c.HealthAddress != "" && c.HealthAddress == c.MetricsAddress {
		errs = append(errs, fmt.Errorf("healthAddress and metricsAddress are both %q: the probes need a listener of their own, "+
			"or healthAddress \"\" to serve them with the metrics", c.HealthAddress))
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
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// optionErrors names key in the errors of an option map: key.option for a
// bad value, key for an unknown option.
func optionErrors(key string, errs []error) []error {
	named := make([]error, len(errs))
	for i, err := range errs {
		var bad *cpuallocator.OptionError
		if errors.As(err, &bad) {
			named[i] = fmt.Errorf("%s.%s: %w", key, bad.Option, bad.Err)
		} else {
			named[i] = fmt.Errorf("%s: %w", key, err)
		}
	}
	return named
}

// reservedCPUs resolves reservedSystemCPUs: when the document does not
// write it, the default list applies unless reservedCPUCount asks for a
// count, which then replaces the default list.
func (f *file) reservedCPUs() (cpuset.CPUSet, error) {
	if f.ReservedSystemCPUs == nil {
		if f.ReservedCPUCount > 0 {
			return parseCPUList("")
		}
		return Default().ReservedSystemCPUs, nil
	}
	return parseCPUList(*f.ReservedSystemCPUs)
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
