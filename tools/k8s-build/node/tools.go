//go:build tools

// Package tools only anchors the module: scripts/cluster builds containerd, ctr, the shim and runc from here.
package tools
