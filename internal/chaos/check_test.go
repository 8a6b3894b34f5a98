package chaos

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestCheckRecorded checks a history written by a failing run again:
// FLASHLINE_CHAOS_RECHECK=chaos-out/<fault>-seed<n>.json.
func TestCheckRecorded(t *testing.T) {
	path := os.Getenv("FLASHLINE_CHAOS_RECHECK")
	if path == "" {
		t.Skip("FLASHLINE_CHAOS_RECHECK names no recorded history")
	}
	rec, err := ReadRecorded(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	v := Check(context.Background(), rec.Initial, rec.OpensAt, rec.Customers, rec.Ops, rec.Facts)
	t.Logf("porcupine %s in %s", v.Porcupine, time.Since(start))
	for _, s := range v.Violations {
		t.Errorf("violation: %s", s)
	}
}
