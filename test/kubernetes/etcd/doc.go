// Package etcd is a separate Go module that pins the etcd release the
// Kubernetes e2e suite runs (go build go.etcd.io/etcd/server/v3 in this
// directory builds it), apart from test/kubernetes, whose dependency graph
// it would otherwise change.
package etcd
