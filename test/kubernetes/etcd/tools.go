//go:build tools

// Package tools pins the etcd release the Kubernetes e2e suite runs: the
// version Kubernetes v1.36.3's etcd client is built against. etcd's main
// package is the root of its server module.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
