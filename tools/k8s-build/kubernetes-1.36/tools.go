//go:build tools

// Package tools only anchors the module: scripts/cluster builds commands of k8s.io/kubernetes from here.
package tools
