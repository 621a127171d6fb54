// Package e2etest holds what the suites on a real containerd share on top
// of the harness: the host's e2e suite (package e2e, build tag e2e) and
// the VM suite's guest tests (test/e2e/vm/guest, build tag vmguest). It
// has the plugin under test (CPUManager), the checks of what a container
// runs on (its cgroup files and the CPUs its processes may use), of the
// checkpoint and of the plugin's refusals, the Kubernetes helpers of both
// suites' clusters (Kube), and the scenario driver over CRI
// (PlayScenarios), which plays test/scenarios/*.yaml on this machine's
// containerd.
//
// What differs between the machines is a setting, not a copy: Wait, how
// long the plugin's asynchronous updates may take (a few seconds on the
// host, a minute in the emulated guest), and Kube's waits for pods. What only the VM has (its boot's
// topology, cgroup v2, the driver's paths) stays in the guest package.
package e2etest
