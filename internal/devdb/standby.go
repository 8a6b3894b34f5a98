// A streaming standby of another cluster (pg_basebackup -R), and its
// promotion (pg_ctl promote).

package devdb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Standby makes the cluster in opts.Dir a streaming standby of the cluster
// that answers on 127.0.0.1:primaryPort and starts it, on the port recorded
// in opts.Dir/port when that is still free (a new free loopback port
// otherwise). Whatever opts.Dir held is replaced: a server running there is
// stopped (immediate), its data directory removed, and pg_basebackup copies
// the primary (a fast checkpoint, the WAL streamed alongside, -R: the
// standby.signal file and a primary_conninfo naming the primary) as the
// server's OS user. The copy takes the primary's settings with it,
// postgresql.auto.conf included (what ALTER SYSTEM set there). It returns the
// URL of the standby's "flashline" database, read-only until Promote; the
// primary must have that database (an Up of it made one).
func Standby(ctx context.Context, opts Options, primaryPort int) (string, error) {
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

	if pid, _, exists, err := c.readPidFile(); err != nil {
		return "", err
	} else if exists && c.postmasterAlive(pid) {
		if err := c.stopImmediate(ctx, bin, pid); err != nil {
			return "", err
		}
		c.waitOrphans(ctx, 10*time.Second)
	}
	if err := os.RemoveAll(c.dataDir()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("devdb: removing %s: %w", c.dataDir(), err)
	}
	if err := c.chownToServer(c.dir); err != nil {
		return "", err
	}
	c.logf("devdb: copying the cluster on 127.0.0.1:%d into %s (pg_basebackup)", primaryPort, c.dataDir())
	out, err := c.run(ctx, filepath.Join(bin, "pg_basebackup"),
		"-h", "127.0.0.1", "-p", strconv.Itoa(primaryPort), "-U", superuser, "--no-password",
		"-D", c.dataDir(), "--write-recovery-conf", "--wal-method=stream", "--checkpoint=fast")
	if err != nil {
		return "", fmt.Errorf("devdb: pg_basebackup from 127.0.0.1:%d into %s failed: %w%s", primaryPort, c.dataDir(), err, tail("pg_basebackup output", out, 20))
	}
	port, err := c.start(ctx, bin)
	if err != nil {
		return "", err
	}
	return databaseURL(port, DatabaseName), nil
}

// Promote ends the recovery of the standby in opts.Dir (pg_ctl promote) and
// waits until it accepts writes.
func Promote(ctx context.Context, opts Options) error {
	bin, err := findBinDir()
	if err != nil {
		return err
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
	c.logf("devdb: promoting the standby in %s", c.dir)
	if out, err := c.run(ctx, filepath.Join(bin, "pg_ctl"), "-D", c.dataDir(), "-w", "-t", "60", "promote"); err != nil {
		return fmt.Errorf("devdb: promoting the standby in %s: %w%s%s", c.dir, err, tail("pg_ctl output", out, 20), c.logTail())
	}
	c.logf("devdb: promoted")
	return nil
}
