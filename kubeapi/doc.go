// Package kubeapi is the plugin's optional Kubernetes side: one watch of
// the pods on this node (exact pod-level resize admission), events on pods
// (refusals and resizes) and the NodeResourceTopology export (exclusive
// CPUs per NUMA node, for the scheduler's NodeResourceTopologyMatch). It
// implements plugin.API; the plugin knows only that interface, and works
// on NRI alone when the API server is away, slow or forbids a request.
//
// Dependencies: cmd → kubeapi → plugin, policy. Nothing but cmd imports
// this package, and only this package imports client-go.
package kubeapi
