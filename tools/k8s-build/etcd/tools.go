//go:build tools

// Package tools only anchors the module: scripts/cluster builds etcd from here.
package tools
