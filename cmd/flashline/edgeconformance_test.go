package main

import (
	"testing"
	"time"

	"github.com/flashline/flashline/internal/testkit/edgeconformance"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestEdgeConformance runs the edges' one suite (internal/testkit/edgeconformance)
// against `flashline serve --role edge`; waitroom/worker's
// TestWorkerEdgeConformance runs the same against the Worker on workerd.
func TestEdgeConformance(t *testing.T) {
	edgeconformance.Run(t, func(t *testing.T, origins []string, skew time.Duration) string {
		var env []string
		if skew != 0 {
			env = append(env, "FLASHLINE_TEST_CLOCK_SKEW="+skew.String())
		}
		return testserver.StartEdgeEnv(t, origins, env).URL
	})
}
