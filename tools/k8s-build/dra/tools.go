//go:build tools

// Package tools only anchors the module: scripts/cluster builds the DRA driver's kubelet plugin from here.
package tools
