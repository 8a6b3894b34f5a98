package devdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
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
func Down(ctx context.Context, opts Options) error { return Stop(ctx, opts, "fast") }

// Stop stops the cluster in opts.Dir with pg_ctl's shutdown mode ("smart",
// "fast" or "immediate": an immediate stop is a crash, and the next Up
// recovers from the WAL) if it is running. It returns nil if there is no
// cluster there or it is not running. A later Up starts it again on the same
// port when that port is still free.
func Stop(ctx context.Context, opts Options, mode string) error {
	switch mode {
	case "smart", "fast", "immediate":
	default:
		return fmt.Errorf("devdb: unknown shutdown mode %q (smart, fast or immediate)", mode)
	}
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
	c.logf("devdb: stopping cluster in %s (pid %d, %s)", c.dir, pid, mode)
	if out, err := c.run(ctx, filepath.Join(bin, "pg_ctl"), "-D", c.dataDir(), "-w", "-t", "60", "stop", "-m", mode); err != nil {
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
