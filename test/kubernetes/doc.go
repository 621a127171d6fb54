// Package kubernetes is a separate Go module that pins the Kubernetes
// release the test suites run against (k8s.io/kubernetes cannot be
// installed with `go install`: its go.mod replaces the staging modules with
// local paths, so this module replaces them with their published versions).
// It keeps k8s.io/kubernetes out of the plugin's own module.
package kubernetes
