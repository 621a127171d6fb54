// Package e2e holds the end-to-end suites that drive a real containerd with
// runc on the local machine through CRI, the way the kubelet does. The tests
// carry the build tag "e2e"; run them from this directory (a Go module of
// its own, test/e2e, which the plugin's module does not depend on) with
//
//	go test -tags e2e -count=1 -v . ./harness/
//
// TestKubernetes (make e2e-kube) runs a real single-node Kubernetes on that
// containerd with the plugin deployed as the DaemonSet of deploy/.
//
// The harness they use lives in the harness sub-package.
package e2e
