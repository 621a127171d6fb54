// Package kubeapi is the plugin's optional Kubernetes side: one watch of
// the pods on this node (exact pod-level resize admission), events on pods
// (refusals and resizes) and the NodeResourceTopology export (exclusive
// CPUs per NUMA node, for the scheduler's NodeResourceTopologyMatch). It
// implements the plugin's API interface (cmd wires it in); the plugin
// knows only that interface, and works on NRI alone when the API server is
// away, slow or forbids a request.
//
// Dependencies: cmd → kubeapi → policy: kubeapi sits beside plugin, the
// NRI adapter, not above it. Nothing but cmd imports this package, and
// only this package imports client-go.
package kubeapi
