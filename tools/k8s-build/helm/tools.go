//go:build tools

// Package tools only anchors the module: scripts/cluster builds the Helm command from here.
package tools
