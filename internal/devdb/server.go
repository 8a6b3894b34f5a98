// The server: initdb, starting it (retrying what another try can fix),
// stopping an unresponsive one, waiting for it to answer, and creating the
// database.

package devdb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

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
