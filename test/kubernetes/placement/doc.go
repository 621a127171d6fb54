// Package placement compares the plugin's CPU allocator with the kubelet's
// static CPU manager policy (k8s.io/kubernetes v1.36.3, used as a library)
// on the same machines and the same free CPUs.
//
// Both sides are built from one fixture machine: the plugin's topology by
// discovering the fixture's sysfs tree, the kubelet's by the kubelet's own
// topology.Discover over the machine description cadvisor reports for that
// tree. A pick is judged by its Shape (split cores, NUMA nodes, sockets);
// the test in this package asserts that the plugin's pick is never worse
// than the kubelet's on one of them without being better on another.
package placement
