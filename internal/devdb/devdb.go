// Package devdb starts and stops a local development PostgreSQL cluster built
// from the PostgreSQL server binaries installed on the machine (initdb,
// pg_ctl, postgres), so that working on flashline needs nothing but Go and
// PostgreSQL's server package: no Docker, no system-wide database setup.
//
// The cluster lives in a single folder (Options.Dir, typically
// "<project>/.devdb"):
//
//	Dir/data          the cluster's data directory (initdb)
//	Dir/postgres.log  the server log
//	Dir/port          the TCP port the cluster listens on (127.0.0.1 only)
//	Dir/lock          flock(2) lock serialising Up and Down across processes
//
// The server listens on the loopback interface only, has no Unix socket and
// trusts every local connection (initdb --auth=trust), so it must never be
// used for anything but development and tests.
//
// PostgreSQL refuses to run as root. When the calling process runs as root,
// the server commands are run as the "postgres" operating-system user, the
// folder is chowned to that user, and every parent folder of Dir must be
// traversable by it.
//
// The postmaster is detached from the calling process: it keeps running after
// the program that called Up exits, and a later Up reuses it. Call Down to
// stop it.
//
// The package is meant for Linux (and other Unix systems with flock and
// setuid credentials); it uses /proc when available to recognise the
// postmaster.
package devdb

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DatabaseName is the database Up creates and whose URL it returns.
const DatabaseName = "flashline"

// DefaultMaxConnections is the max_connections used when
// Options.MaxConnections is 0: six flashline processes with 20+5+5
// connections each (180), the test servers of a second test package running
// beside them (go test runs packages in parallel), plus headroom for psql and
// migrations. Each idle connection costs the server a few MB at most.
const DefaultMaxConnections = 500

// BinDirEnv names the environment variable that, when set, points at the
// folder holding initdb and pg_ctl. It is checked before anything else.
const BinDirEnv = "FLASHLINE_PG_BINDIR"

const (
	superuser     = "postgres" // database superuser created by initdb
	osUser        = "postgres" // OS user the server runs as when we are root
	answerTimeout = 5 * time.Second
	verifyTimeout = 15 * time.Second
	startAttempts = 3
)

// Options configures Up and Down.
type Options struct {
	// Dir is the cluster's root folder, e.g. "<project>/.devdb". The data
	// directory is Dir/data, the server log Dir/postgres.log and the chosen
	// port is recorded in Dir/port. Dir is created if missing. Required.
	Dir string
	// MaxConnections is the server's max_connections. 0 means
	// DefaultMaxConnections (500). It applies when Up starts the server; a
	// running cluster that Up reuses keeps the value it was started with.
	MaxConnections int
	// Log receives progress lines such as
	// "devdb: initialising cluster in ..." and
	// "devdb: started on 127.0.0.1:PORT". nil means io.Discard.
	Log io.Writer
}

// Up makes sure the cluster in opts.Dir is initialised, running and
// answering, creates database "flashline" if missing, and returns its URL:
//
//	postgres://postgres@127.0.0.1:PORT/flashline?sslmode=disable
//
// Up is idempotent: a healthy running cluster is reused as is. A stale
// postmaster.pid (left by a crashed or killed server) is removed, and a
// server that is alive but does not answer is stopped (pg_ctl stop -m
// immediate) and started again. Concurrent calls on the same Dir, from any
// number of processes, are serialised with a lock on Dir/lock.
func Up(ctx context.Context, opts Options) (string, error) {
	// Say what to install before complaining about anything else.
	bin, err := findBinDir()
	if err != nil {
		return "", err
	}
	c, err := newCluster(opts, true)
	if err != nil {
		return "", err
	}
	unlock, err := c.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()

	port, err := c.up(ctx, bin)
	if err != nil {
		return "", err
	}
	if err := c.ensureDatabase(ctx, port); err != nil {
		return "", err
	}
	return databaseURL(port, DatabaseName), nil
}

// Down stops the cluster in opts.Dir (pg_ctl stop -m fast) if it is running.
// It returns nil if there is no cluster there or it is not running.
func Down(ctx context.Context, opts Options) error {
	if opts.Dir == "" {
		return errors.New("devdb: Options.Dir is required")
	}
	if _, err := os.Stat(filepath.Join(opts.Dir, "data", "PG_VERSION")); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("devdb: %w", err)
	}
	c, err := newCluster(opts, false)
	if err != nil {
		return err
	}
	unlock, err := c.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()

	pid, _, exists, err := c.readPidFile()
	if err != nil {
		return err
	}
	if !exists {
		return nil
	}
	if !c.postmasterAlive(pid) {
		// Nothing is running; tidy up the stale lock file so that the
		// next Up starts without questions.
		_ = os.Remove(c.pidFile())
		return nil
	}
	bin, err := findBinDir()
	if err != nil {
		return err
	}
	c.logf("devdb: stopping cluster in %s (pid %d)", c.dir, pid)
	if out, err := c.run(ctx, filepath.Join(bin, "pg_ctl"), "-D", c.dataDir(), "-w", "-t", "60", "stop", "-m", "fast"); err != nil {
		if !c.postmasterAlive(pid) {
			return nil // it went away on its own or pg_ctl raced with it
		}
		return fmt.Errorf("devdb: stopping cluster in %s: %w%s%s", c.dir, err, tail("pg_ctl output", out, 20), c.logTail())
	}
	c.logf("devdb: stopped")
	return nil
}

// Running reports whether a server is running for the cluster in dir (its
// postmaster is alive; it may still be starting).
func Running(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		return false
	}
	c, err := newCluster(Options{Dir: dir}, false)
	if err != nil {
		return false
	}
	pid, _, exists, err := c.readPidFile()
	return err == nil && exists && c.postmasterAlive(pid)
}

// URL returns the URL of database "flashline" in the cluster in dir if one
// was initialised there, reading the port recorded in dir/port. It starts
// nothing and does not check that the server is running; ok is false if no
// cluster was initialised in dir or no port was recorded.
func URL(dir string) (url string, ok bool) {
	if dir == "" {
		return "", false
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		return "", false
	}
	port, err := readPortFile(filepath.Join(dir, "port"))
	if err != nil || port == 0 {
		return "", false
	}
	return databaseURL(port, DatabaseName), true
}

func databaseURL(port int, db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", superuser, port, db)
}

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
		u, err := user.Lookup(osUser)
		if err != nil {
			return nil, fmt.Errorf("devdb: running as root, and PostgreSQL refuses to run as root, but the %q OS user to run it as was not found (%v); create it (e.g. `useradd --system --home-dir /var/lib/postgresql postgres`, normally done by the PostgreSQL server package) or run as an ordinary user", osUser, err)
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("devdb: user %q has non-numeric uid/gid %q/%q", osUser, u.Uid, u.Gid)
		}
		cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if gids, err := u.GroupIds(); err == nil {
			for _, g := range gids {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil {
					cred.Groups = append(cred.Groups, uint32(n))
				}
			}
		}
		c.cred, c.home, c.runAs = cred, u.HomeDir, u.Username
		if create {
			if err := c.checkTraversable(); err != nil {
				// A checkout under a folder the server's user cannot
				// enter (a home folder of mode 0700, say): keep the
				// cluster under /var/tmp instead, linked from Dir, so
				// that everything else still finds it in Dir.
				if c.dir, err = c.relocate(err); err != nil {
					return nil, err
				}
			}
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

// relocate moves an empty cluster folder that the server's user cannot reach
// to /var/tmp/flashline-devdb-<hash of its path>, leaves a symbolic link in
// its place, and returns the new real folder. unreachable is the reason, and
// the error returned when the folder is not empty or the move fails.
func (c *cluster) relocate(unreachable error) (string, error) {
	entries, err := os.ReadDir(c.dir)
	if err != nil || len(entries) > 0 {
		return "", unreachable
	}
	sum := sha256.Sum256([]byte(c.dir))
	alt := filepath.Join("/var/tmp", "flashline-devdb-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(alt, 0o755); err != nil {
		return "", errors.Join(unreachable, err)
	}
	if err := os.Chmod(alt, 0o755); err != nil {
		return "", errors.Join(unreachable, err)
	}
	if err := os.Remove(c.dir); err != nil {
		return "", errors.Join(unreachable, err)
	}
	if err := os.Symlink(alt, c.dir); err != nil {
		return "", errors.Join(unreachable, err)
	}
	c.logf("devdb: the %s user cannot reach %s; keeping the cluster in %s (linked from there)", c.runAs, c.dir, alt)
	moved := &cluster{dir: alt, cred: c.cred}
	if err := moved.checkTraversable(); err != nil {
		return "", err
	}
	return alt, nil
}

// checkTraversable verifies that the server's OS user can reach c.dir, i.e.
// has search (x) permission on every parent folder, using the ordinary Unix
// owner/group/other rule (ACLs are not considered).
func (c *cluster) checkTraversable() error {
	groups := map[uint32]bool{c.cred.Gid: true}
	for _, g := range c.cred.Groups {
		groups[g] = true
	}
	for p := filepath.Dir(c.dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("devdb: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			break
		}
		mode := fi.Mode().Perm()
		var can bool
		switch {
		case st.Uid == c.cred.Uid:
			can = mode&0o100 != 0
		case groups[st.Gid]:
			can = mode&0o010 != 0
		default:
			can = mode&0o001 != 0
		}
		if !can {
			return fmt.Errorf("devdb: the PostgreSQL server runs as OS user %q (PostgreSQL refuses to run as root), which cannot enter directory %s (mode %v, owner %d:%d) on the way to %s; run `chmod o+x %s` or put the dev database folder elsewhere",
				c.runAs, p, mode, st.Uid, st.Gid, c.dir, p)
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return nil
}

// chownToServer gives path to the server's OS user when we run as root.
func (c *cluster) chownToServer(path string) error {
	if c.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
		return fmt.Errorf("devdb: giving %s to user %q: %w", path, c.runAs, err)
	}
	return nil
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

// up does the work of Up under the lock and returns the port the cluster
// answers on.
func (c *cluster) up(ctx context.Context, bin string) (int, error) {
	if err := c.chownToServer(c.dir); err != nil {
		return 0, err
	}
	if err := c.initdb(ctx, bin); err != nil {
		return 0, err
	}

	pid, pidPort, exists, err := c.readPidFile()
	if err != nil {
		return 0, err
	}
	if exists {
		if c.postmasterAlive(pid) {
			port := pidPort
			if port == 0 {
				port, _ = readPortFile(c.portFile())
			}
			if port != 0 {
				if err := c.waitAnswer(ctx, port, answerTimeout); err == nil {
					if rec, _ := readPortFile(c.portFile()); rec != port {
						if err := writePortFile(c.portFile(), port); err != nil {
							return 0, err
						}
					}
					c.logf("devdb: reusing running cluster (pid %d) on 127.0.0.1:%d", pid, port)
					return port, nil
				} else if ctx.Err() != nil {
					return 0, fmt.Errorf("devdb: %w", ctx.Err())
				}
			}
			c.logf("devdb: cluster in %s (pid %d) is running but not answering on port %d; stopping it", c.dir, pid, port)
			if err := c.stopImmediate(ctx, bin, pid); err != nil {
				return 0, err
			}
		} else {
			c.logf("devdb: removing stale %s (pid %d is not running)", c.pidFile(), pid)
		}
		if err := os.Remove(c.pidFile()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("devdb: removing stale postmaster.pid: %w", err)
		}
		// Backends of a killed postmaster notice its death and exit on
		// their own, but until they do they hold its shared memory and a
		// new postmaster refuses to start.
		c.waitOrphans(ctx, 10*time.Second)
	}
	return c.start(ctx, bin)
}

// initdb initialises Dir/data unless Dir/data/PG_VERSION exists.
func (c *cluster) initdb(ctx context.Context, bin string) error {
	data := c.dataDir()
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
		return c.chownToServer(data)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("devdb: %w", err)
	}
	if entries, err := os.ReadDir(data); err == nil && len(entries) > 0 {
		return fmt.Errorf("devdb: %s is not empty but holds no PostgreSQL cluster (no PG_VERSION); delete it to let devdb initialise a new one", data)
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return fmt.Errorf("devdb: %w", err)
	}
	if err := c.chownToServer(data); err != nil {
		return err
	}
	c.logf("devdb: initialising cluster in %s", data)
	out, err := c.run(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "--auth=trust", "--username="+superuser, "--encoding=UTF8", "--locale=C")
	if err != nil {
		return fmt.Errorf("devdb: initdb in %s failed: %w%s", data, err, tail("initdb output", out, 20))
	}
	return nil
}

// start picks a port, starts the server with pg_ctl and checks that it
// answers. The caller has made sure no postmaster is running.
func (c *cluster) start(ctx context.Context, bin string) (int, error) {
	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if attempt > 1 {
			c.logf("devdb: start failed (%v); retrying", firstLine(lastErr))
			select {
			case <-ctx.Done():
				return 0, fmt.Errorf("devdb: %w (after: %v)", ctx.Err(), lastErr)
			case <-time.After(time.Second):
			}
		}
		port, err := c.choosePort()
		if err != nil {
			return 0, err
		}
		if err := writePortFile(c.portFile(), port); err != nil {
			return 0, err
		}
		logStart := fileSize(c.logFile())
		c.logf("devdb: starting on 127.0.0.1:%d", port)
		opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=%d", port, c.maxConn)
		out, err := c.run(ctx, filepath.Join(bin, "pg_ctl"),
			"-D", c.dataDir(), "-l", c.logFile(), "-w", "-t", "60", "start", "-o", opts)
		if err != nil {
			lastErr = fmt.Errorf("devdb: pg_ctl start in %s failed: %w%s%s", c.dataDir(), err, tail("pg_ctl output", out, 20), c.logTail())
			if ctx.Err() != nil {
				return 0, lastErr
			}
			// If a postmaster is up after all (e.g. pg_ctl timed out
			// during a long recovery), starting another one cannot help.
			if pid, _, ok, _ := c.readPidFile(); ok && c.postmasterAlive(pid) {
				return 0, lastErr
			}
			// Retry only what another try can fix: the port taken
			// meanwhile, or leftovers of a killed server.
			if !transientStartFailure(c.logSince(logStart)) {
				return 0, lastErr
			}
			continue
		}
		if err := c.waitAnswer(ctx, port, verifyTimeout); err != nil {
			return 0, fmt.Errorf("devdb: cluster started on 127.0.0.1:%d but does not answer: %w%s", port, err, c.logTail())
		}
		c.logf("devdb: started on 127.0.0.1:%d", port)
		return port, nil
	}
	return 0, lastErr
}

// stopImmediate stops an unresponsive postmaster with pg_ctl stop -m
// immediate, falling back to SIGKILL.
func (c *cluster) stopImmediate(ctx context.Context, bin string, pid int) error {
	out, err := c.run(ctx, filepath.Join(bin, "pg_ctl"), "-D", c.dataDir(), "-w", "-t", "15", "stop", "-m", "immediate")
	if err == nil || !c.postmasterAlive(pid) {
		return nil
	}
	c.logf("devdb: pg_ctl stop -m immediate failed (%v); killing pid %d", err, pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for c.postmasterAlive(pid) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("devdb: cannot stop unresponsive postmaster (pid %d) of %s: %w%s", pid, c.dataDir(), err, tail("pg_ctl output", out, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
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

// waitAnswer connects to the postgres database on port until it answers and
// reports this cluster's data directory, or timeout passes.
func (c *cluster) waitAnswer(ctx context.Context, port int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		lastErr = c.ping(ctx, port)
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return lastErr
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *cluster) ping(ctx context.Context, port int) error {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, databaseURL(port, "postgres")+"&connect_timeout=3")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var dataDir string
	if err := conn.QueryRow(cctx, "SHOW data_directory").Scan(&dataDir); err != nil {
		return err
	}
	if filepath.Clean(dataDir) != c.dataDir() {
		return fmt.Errorf("port %d is served by the cluster in %s, not %s", port, dataDir, c.dataDir())
	}
	return nil
}

// ensureDatabase creates database "flashline" if it does not exist.
func (c *cluster) ensureDatabase(ctx context.Context, port int) error {
	conn, err := pgx.Connect(ctx, databaseURL(port, "postgres")+"&connect_timeout=10")
	if err != nil {
		return fmt.Errorf("devdb: connecting to 127.0.0.1:%d: %w", port, err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", DatabaseName).Scan(&exists); err != nil {
		return fmt.Errorf("devdb: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{DatabaseName}.Sanitize()); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database
			return nil
		}
		return fmt.Errorf("devdb: creating database %s: %w", DatabaseName, err)
	}
	c.logf("devdb: created database %s", DatabaseName)
	return nil
}

// run runs a PostgreSQL command as the server's OS user, in Dir, and
// returns its combined output.
func (c *cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.dir
	cmd.Env = c.env()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// pg_ctl start leaves the postmaster running; it redirects the
	// postmaster's output to the log file, but never wait forever for a
	// pipe held open by a descendant.
	cmd.WaitDelay = 10 * time.Second
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	err := cmd.Run()
	return out.Bytes(), err
}

// env is our environment minus libpq/server variables (PGDATA, PGPORT, ...)
// that could redirect the commands, with HOME/USER/LOGNAME of the user the
// commands run as.
func (c *cluster) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") {
			continue
		}
		if c.cred != nil && (k == "HOME" || k == "USER" || k == "LOGNAME") {
			continue
		}
		env = append(env, kv)
	}
	if c.cred != nil {
		env = append(env, "HOME="+c.home, "USER="+c.runAs, "LOGNAME="+c.runAs)
	}
	return env
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

// transientStartFailure reports whether the server log of a failed start
// shows a cause that may be gone on the next try.
func transientStartFailure(log string) bool {
	for _, s := range []string{
		"could not bind", // port taken between choosing and binding
		"Address already in use",
		"shared memory block", // backends of a killed postmaster still exiting
		"lock file",           // postmaster.pid of a server still shutting down
	} {
		if strings.Contains(log, s) {
			return true
		}
	}
	return false
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

// findBinDir returns the folder holding initdb and pg_ctl: $FLASHLINE_PG_BINDIR
// if set, else `pg_config --bindir`, else the highest-versioned
// /usr/lib/postgresql/*/bin, else the folder of initdb found on PATH.
func findBinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		if !hasServerBinaries(d) {
			return "", fmt.Errorf("devdb: %s=%s does not contain the PostgreSQL server binaries initdb and pg_ctl", BinDirEnv, d)
		}
		return d, nil
	}
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(pgConfig, "--bindir").Output(); err == nil {
			if d := strings.TrimSpace(string(out)); d != "" && hasServerBinaries(d) {
				return d, nil
			}
		}
	}
	if d := highestVersionedBinDir("/usr/lib/postgresql"); d != "" {
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if d := filepath.Dir(p); hasServerBinaries(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("devdb: PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: looked at $%s, `pg_config --bindir`, /usr/lib/postgresql/*/bin and PATH. "+
		"Install the PostgreSQL server (e.g. `apt install postgresql` on Debian/Ubuntu, `dnf install postgresql-server` on Fedora, `brew install postgresql` on macOS) "+
		"or set %s to the folder holding initdb and pg_ctl; "+
		"alternatively run PostgreSQL with `docker compose up` and set DATABASE_URL", BinDirEnv, BinDirEnv)
}

func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// highestVersionedBinDir returns root/<version>/bin with the highest
// version ("9.6" < "10" < "15") that holds the server binaries, or "".
func highestVersionedBinDir(root string) string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	type cand struct {
		ver []int
		dir string
	}
	var cands []cand
	for _, e := range entries {
		var ver []int
		for _, part := range strings.Split(e.Name(), ".") {
			n, err := strconv.Atoi(part)
			if err != nil {
				ver = nil
				break
			}
			ver = append(ver, n)
		}
		dir := filepath.Join(root, e.Name(), "bin")
		if ver != nil && hasServerBinaries(dir) {
			cands = append(cands, cand{ver, dir})
		}
	}
	sort.Slice(cands, func(i, j int) bool { return versionLess(cands[j].ver, cands[i].ver) })
	if len(cands) == 0 {
		return ""
	}
	return cands[0].dir
}

func versionLess(a, b []int) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}
