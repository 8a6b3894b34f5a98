package jobs_test

import (
	"testing"

	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestMain removes the `flashline serve` binary the tests built.
func TestMain(m *testing.M) { testserver.Main(m) }
