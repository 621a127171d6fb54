// Package scenario reads scenario files — a small YAML format an operator
// can read and extend — and runs them against a Driver: the policy alone
// (PolicyDriver, used by the policy tests and `nri-cpumanager simulate`),
// the plugin behind a real NRI connection (the integration suite), or the
// plugin on a real containerd driven over CRI (the e2e suites, on the host
// and in the VM guest; test/e2e/e2etest).
//
// A scenario names a topology, a plugin configuration (the same keys as the
// plugin's configuration file) and steps that create, resize, stop,
// restart (an exit and the kubelet's re-creation under a new id) and
// remove containers, remove and update pods like the kubelet would, each
// with the cpusets or the refusal expected. A pod's sandbox runs at its
// first create; a create may name the container's role in the pod's spec
// (role: init, sidecar or app: a driver that knows the spec, as the plugin
// watching the Kubernetes API does) and the NUMA nodes of the devices it
// is given (devices: [1], as the plugin would find them in sysfs; drivers
// that cannot give devices refuse such a step); a stop is the process
// exiting with exitCode (0 by default: an init container completing):
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
//
// The expectations are written for the topology's machine, whose sysfs
// tree the fixture suites write. Machines lists other machines on which
// every expectation holds as written, each a topology too (with
// distances: the NUMA distances, when the machine's are not the
// default); the fixture suites play the scenario on each of them as well,
// so that the list cannot claim what does not hold:
//
//	topology: {sockets: 1, numaPerSocket: 2, coresPerNUMA: 4, threadsPerCore: 2}
//	machines:
//	- {sockets: 2, coresPerNUMA: 4, threadsPerCore: 2, distances: [[10, 20], [20, 10]]}   # the VM suite's guest
//
// A real machine plays a scenario when the topology the plugin reads from
// its /sys has the shape (Shape: the same CPUs, isolated CPUs, sockets,
// NUMA nodes and distances, dies, uncore caches and cores) of the
// scenario's topology or of one of its machines (File.Match); the suites
// on real machines skip the others, saying how this machine differs. This
// project's host (2 CPUs of one socket, no SMT) is {sockets: 1,
// coresPerNUMA: 2, threadsPerCore: 1}; the VM suite's guest is the
// machine above, with isolated: "12-15" in its isolcpus boot.
package scenario
