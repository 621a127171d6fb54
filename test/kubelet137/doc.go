// Package kubelet137 is a separate Go module that pins the kubelet v1.37,
// the first release whose CPU manager writes its checkpoint in format V4
// (KEP-5554's baselines in a "data" string with a checksum of its own), so
// that the plugin's export for the kubelet and its import of the kubelet's
// checkpoint are tested against that release's own checkpoint code.
// test/kubernetes pins v1.36, the release the e2e suites run; only the
// checkpoint package and what it imports are built from this one.
package kubelet137
