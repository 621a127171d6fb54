// Package scenario reads scenario files — a small YAML format an operator
// can read and extend — and runs them against a Driver: the policy alone
// (PolicyDriver, used by the policy tests and `nri-cpumanager simulate`)
// or the plugin behind a real NRI connection (the integration suite).
//
// A scenario names a topology, a plugin configuration (the same keys as the
// plugin's configuration file) and steps that create, resize, stop,
// restart (an exit and the kubelet's re-creation under a new id) and
// remove containers, remove and update pods like the kubelet would, each
// with the cpusets or the refusal expected. A pod's sandbox runs at its
// first create; a create may name the container's role in the pod's spec
// (role: init, sidecar or app: a driver that knows the spec, as the plugin
// watching the Kubernetes API does); a stop is the process exiting with
// exitCode (0 by default: an init container completing):
//
//	name: grow then shrink back
//	topology: {kep: checkpoint}          # or {layout: NAME} or {sockets: 2, coresPerNUMA: 4, ...}; isolated: "2-15" adds isolcpus
//	config:
//	  reservedSystemCPUs: "0"
//	steps:
//	- create: {pod: gu-1, container: c1, cpu: "2"}
//	  expect: {cpus: "1-2", shared: "0,3-15"}
//	- resize: {pod: gu-1, container: c1, cpu: "4"}
//	  expect: {cpus: "1-4", baseline: "1-2"}
//	- resize: {pod: gu-1, container: c1, cpu: "1"}
//	  refused: "Infeasible: prohibitedCPUAllocationError"
package scenario
