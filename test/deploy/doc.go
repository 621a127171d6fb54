// Package deploy tests the packaging an operator installs: the kustomize
// manifests in deploy/, their components, the Helm chart in
// deploy/helm/nri-cpumanager, the alerts and the Grafana dashboard.
//
// It is a module of its own so that the plugin's module does not depend on
// Helm and kustomize. The tests render the manifests with the kustomize and
// Helm Go libraries, decode every object strictly into Kubernetes (and
// Prometheus Operator) types, check the safety settings one by one, and read
// the embedded configuration with the plugin's own parser.
//
// Run it with -count=1, as make deploy-test does: what it tests lies
// outside this module, and Go's test cache does not look at files outside
// the module, so a cached result can hide a changed manifest.
package deploy
