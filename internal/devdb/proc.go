// Recognising the postmaster and its orphaned backends in /proc.

package devdb

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// postmasterAlive reports whether pid is a live (non-zombie) process that is
// the postmaster of this cluster. On Linux it checks /proc/PID: the
// postmaster's working directory is its data directory. That guards
// against PID reuse, where pg_ctl stop would signal an unrelated process.
func (c *cluster) postmasterAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		// No procfs: fall back to kill(pid, 0).
		err := syscall.Kill(pid, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}
	proc := "/proc/" + strconv.Itoa(pid)
	if procState(proc) == "" || procState(proc) == "Z" || procState(proc) == "X" {
		return false // gone, or a zombie nobody has reaped yet
	}
	if cwd, err := os.Readlink(proc + "/cwd"); err == nil {
		return cwd == c.dataDir()
	}
	// Not allowed to look at its cwd (another user): go by its name.
	comm, err := os.ReadFile(proc + "/comm")
	if err != nil {
		return false
	}
	name := strings.TrimSpace(string(comm))
	return strings.Contains(name, "postgres") || strings.Contains(name, "postmaster")
}

// procState returns the state letter of /proc/PID/stat ("R", "S", "Z", ...)
// or "" if the process does not exist.
func procState(proc string) string {
	b, err := os.ReadFile(proc + "/stat")
	if err != nil {
		return ""
	}
	// Format: pid (comm) state ...; comm may contain spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2 : i+3])
}

// waitOrphans waits up to timeout for leftover server processes of this
// data directory (backends of a killed postmaster, recognised by their
// working directory) to exit.
func (c *cluster) waitOrphans(ctx context.Context, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		n := c.countOrphans()
		if n == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *cluster) countOrphans() int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		proc := "/proc/" + e.Name()
		if cwd, err := os.Readlink(proc + "/cwd"); err == nil && cwd == c.dataDir() {
			if s := procState(proc); s != "" && s != "Z" && s != "X" {
				n++
			}
		}
	}
	return n
}
