//go:build tools

// Package tools only anchors the module: bench/scale builds the kwok controller from here.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
