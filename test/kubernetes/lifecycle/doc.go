// Package lifecycle compares the plugin with the kubelet's own CPU manager
// over whole pod lives. A generator plays random lives — Guaranteed pods
// with whole-CPU and fractional containers, init containers and sidecars,
// Burstable and BestEffort neighbours, container crashes with the dead
// instance removed before or after the re-creation, sandbox re-creation
// with the old sandbox removed later, node reboots, containerd and plugin
// restarts, completed Jobs, deletions, pod overhead and resizes — and each
// action goes through both: the kubelet v1.36.3 static policy in process
// (its Allocate at admission, its removeStaleState at the reconcile), and
// the plugin over NRI, the events in the order containerd delivers them
// for that kubelet action (docs/development.md has the mapping). After
// every action both must agree: the same running containers hold
// exclusive CPUs, with the same counts, the shared pool is as large as the
// kubelet's pod totals say, and no CPU is in two exclusive sets. Where the
// plugin differs on purpose (KEP-5554's resize rules, a completed pod
// without the Kubernetes API), the test checks that rule instead.
//
// A failing life is written to testdata/lives (LIFECYCLE_KEEP=1), where
// it runs on every later test; LIFECYCLE_SEED=n replays a seed.
package lifecycle
