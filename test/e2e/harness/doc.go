// Package harness drives a throwaway containerd on the local machine the way
// the kubelet would, for end-to-end tests and demos of the plugin.
//
// It installs what it needs (runc and busybox-static from apt, containerd
// from the Go module proxy into the build cache outside the checkout, see
// CacheDir and CacheEntry), builds two
// tiny images from the host's static busybox without any registry, runs a
// containerd with NRI enabled in a private temporary directory, starts
// external plugin processes against its NRI socket, and talks CRI to it with
// kubelet-like helpers: pods with the kubelet's cgroup parents, containers
// whose resources are converted exactly as the kubelet converts them,
// in-place resizes, and readers of the resulting cgroup files and CPU
// affinity.
//
// For the Kubernetes suite it also builds Kubernetes and etcd from the
// modules in test/kubernetes into that cache (InstallKubernetes) and runs a throwaway
// single-node cluster on that containerd (StartCluster); CRI.Attach reads
// the containers the kubelet made. Its ocilayout sub-package writes OCI
// image layouts, for the test images and the plugin's release image.
//
// The core API takes a Logf instead of *testing.T so that a plain program
// can use it too; testing.go adds thin helpers for tests.
package harness

// Logf receives the harness's progress messages. A nil Logf discards them.
type Logf func(format string, args ...any)

// orDiscard returns l, or a Logf that discards everything when l is nil.
func (l Logf) orDiscard() Logf {
	if l == nil {
		return func(string, ...any) {}
	}
	return l
}
