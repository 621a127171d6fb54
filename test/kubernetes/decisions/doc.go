// Package decisions times the plugin's policy decisions against the
// kubelet's static CPU manager policy (k8s.io/kubernetes v1.36.3, used as a
// library) in one process, on the same machines with the same pinned
// containers, for issue 41's ratios.
//
// Each side runs the same request sequence on a node of 64, 512 or 4096
// CPUs (the machines of the policy's BenchmarkDecisionScale) holding 10,
// 100 or 500 containers, a pinned one of 2 CPUs for every 16 CPUs of the
// machine (at most half of them) and the others shared (Burstable, which
// the kubelet's static policy keeps no state for):
//
//   - create: a new Guaranteed container of 2 CPUs. The kubelet:
//     Policy.Allocate on its memory state; the plugin:
//     policy.Policy.CreateContainer.
//   - grow, shrink: a pinned container from 2 to 4 CPUs and back. The
//     kubelet's static policy has no resize of a pinned container (v1.36:
//     the feature gate is alpha and changes nothing), so its side is the
//     delete and re-creation its users do instead: RemoveContainer, then
//     Allocate with the new count. The plugin: UpdateContainer.
//   - release: the end of a pinned pod. The kubelet: RemoveContainer; the
//     plugin: RemovePodSandbox.
//
// Both sides work on the same node state for every call of a block (the
// kubelet's state is put back after each call, outside the timing; the
// plugin's decisions are pure). Blocks of the two sides alternate, several
// repetitions; the ratio of a repetition is the kubelet's median over the
// plugin's, and the table prints the median ratio over the repetitions
// with the plugin's own median and 99th percentile over all its calls.
// The figures are ratios measured in one process, so a busy machine
// changes them less than it changes absolute times; nothing is asserted.
//
// Run it with `make bench-kubelet` (VERSUS_KUBELET=1 go test -run
// TestVersusKubelet -v ./decisions/ in test/kubernetes);
// VERSUS_KUBELET_CPUS=512 restricts it to one machine.
package decisions
