package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Recorded is a run's history with what the checker needs, as written to
// a file (JSON) so that a check can be run again on it (ReadRecorded).
type Recorded struct {
	Initial   int
	OpensAt   time.Time
	Customers []string
	Ops       []*Op
	Facts     Facts
}

// ReadRecorded reads a history written by a failing run.
func ReadRecorded(path string) (Recorded, error) {
	var rec Recorded
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	return rec, err
}

// write saves a failing history: porcupine's visualisation (an HTML page)
// and the operations as text, and returns their paths.
func (r *Run) write(cfg Config, v Verdict, rec Recorded) []string {
	ops := rec.Ops
	dir := cfg.OutDir
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Errorf("chaos: %v", err)
		return nil
	}
	base := filepath.Join(dir, fmt.Sprintf("%s-seed%d", cfg.Fault.Name, cfg.Seed))
	var files []string
	if v.Visualize != nil {
		if err := v.Visualize(base + ".html"); err != nil {
			r.t.Errorf("chaos: visualisation: %v", err)
		} else {
			files = append(files, base+".html")
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "fault %s, seed %d\nviolations:\n", cfg.Fault.Name, cfg.Seed)
	for _, s := range v.Violations {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	fmt.Fprintf(&b, "porcupine: %s\nnotes:\n", v.Porcupine)
	for _, s := range r.notes {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	b.WriteString("operations (call, return, client, what, attempts):\n")
	for _, op := range ops {
		fmt.Fprintf(&b, "%s %s %3d %s\n", op.Call.Format("15:04:05.000"), op.Return.Format("15:04:05.000"), op.Client, describe(op))
		for _, a := range op.Attempts {
			fmt.Fprintf(&b, "      %s-%s instance %d: %s\n", a.Start.Format("15:04:05.000"), a.End.Format("15:04:05.000"), a.Instance, a.Label())
		}
	}
	if js, err := json.MarshalIndent(rec, "", " "); err != nil {
		r.t.Errorf("chaos: %v", err)
	} else if err := os.WriteFile(base+".json", js, 0o644); err != nil {
		r.t.Errorf("chaos: %v", err)
	} else {
		files = append(files, base+".json")
	}
	if err := os.WriteFile(base+".txt", []byte(b.String()), 0o644); err != nil {
		r.t.Errorf("chaos: %v", err)
	} else {
		files = append(files, base+".txt")
	}
	return files
}
