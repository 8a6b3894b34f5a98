// The cluster's folder: its files (data directory, port, postmaster.pid,
// server log), the lock that serialises Up and Down, and the port.

package devdb

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cluster is the resolved state shared by Up and Down.
type cluster struct {
	dir     string // absolute, symlinks resolved
	maxConn int
	log     io.Writer
	cred    *syscall.Credential // nil: run commands as ourselves
	home    string              // HOME of the user running the server commands
	runAs   string              // name of that user, for messages
}

func newCluster(opts Options, create bool) (*cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("devdb: Options.Dir is required")
	}
	c := &cluster{maxConn: opts.MaxConnections, log: opts.Log}
	if c.maxConn == 0 {
		c.maxConn = DefaultMaxConnections
	}
	if c.maxConn < 0 {
		return nil, fmt.Errorf("devdb: invalid MaxConnections %d", opts.MaxConnections)
	}
	if c.log == nil {
		c.log = io.Discard
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("devdb: %w", err)
	}
	if create {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("devdb: creating %s: %w", dir, err)
		}
	}
	// Resolve symlinks: the permission check must look at the real
	// parents, and /proc/PID/cwd of the postmaster is the real path.
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil, fmt.Errorf("devdb: %w", err)
	}
	c.dir = dir

	if os.Geteuid() == 0 {
		if err := c.runAsServerUser(create); err != nil {
			return nil, err
		}
	} else {
		c.runAs = "the current user"
		c.home = os.Getenv("HOME")
	}
	return c, nil
}

func (c *cluster) dataDir() string  { return filepath.Join(c.dir, "data") }
func (c *cluster) pidFile() string  { return filepath.Join(c.dataDir(), "postmaster.pid") }
func (c *cluster) portFile() string { return filepath.Join(c.dir, "port") }
func (c *cluster) logFile() string  { return filepath.Join(c.dir, "postgres.log") }

func (c *cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.log, format+"\n", args...)
}

// lock takes an exclusive flock on Dir/lock, polling so that ctx can cancel
// the wait. The returned function releases it.
func (c *cluster) lock(ctx context.Context) (func(), error) {
	f, err := os.OpenFile(filepath.Join(c.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devdb: %w", err)
	}
	fd := int(f.Fd())
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(fd, syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("devdb: locking %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("devdb: waiting for lock %s: %w", f.Name(), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// choosePort returns the recorded port if it is still free, else a new free
// loopback port chosen by the OS.
func (c *cluster) choosePort() (int, error) {
	if p, err := readPortFile(c.portFile()); err == nil && p != 0 && portFree(p) {
		return p, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("devdb: finding a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port, nil
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func readPortFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || p <= 0 || p > 65535 {
		return 0, fmt.Errorf("devdb: %s does not hold a port number", path)
	}
	return p, nil
}

func writePortFile(path string, port int) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
		return fmt.Errorf("devdb: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("devdb: %w", err)
	}
	return nil
}

// readPidFile reads Dir/data/postmaster.pid: line 1 is the postmaster's
// PID, line 4 its port. exists is false if there is no such file; pid and
// port are 0 when the file is incomplete.
func (c *cluster) readPidFile() (pid, port int, exists bool, err error) {
	b, err := os.ReadFile(c.pidFile())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, 0, false, nil
		}
		return 0, 0, false, fmt.Errorf("devdb: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > 0 {
		pid, _ = strconv.Atoi(strings.TrimSpace(lines[0]))
	}
	if len(lines) > 3 {
		port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
	}
	return pid, port, true, nil
}

// logTail returns the last lines of Dir/postgres.log formatted for an error.
func (c *cluster) logTail() string {
	b, err := os.ReadFile(c.logFile())
	if err != nil {
		return ""
	}
	return tail(c.logFile(), b, 30)
}

// logSince returns what the server log gained after offset.
func (c *cluster) logSince(offset int64) string {
	b, err := os.ReadFile(c.logFile())
	if err != nil || int64(len(b)) < offset {
		return string(b)
	}
	return string(b[offset:])
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// tail formats the last n lines of out as an indented block.
func tail(what string, out []byte, n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "\n--- last lines of " + what + " ---\n    " + strings.Join(lines, "\n    ")
}

func firstLine(err error) string {
	if err == nil {
		return ""
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
