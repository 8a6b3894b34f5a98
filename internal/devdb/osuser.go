// Running as root: the server commands run as the "postgres" OS user, the
// folders it needs are given to it, and a cluster folder it cannot reach is
// kept under /var/tmp instead.

package devdb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runAsServerUser makes the server commands run as the "postgres" OS user,
// as they must when we are root (PostgreSQL refuses to run as root). With
// create, a cluster folder that user cannot reach is moved (relocate).
func (c *cluster) runAsServerUser(create bool) error {
	u, err := user.Lookup(osUser)
	if err != nil {
		return fmt.Errorf("devdb: running as root, and PostgreSQL refuses to run as root, but the %q OS user to run it as was not found (%v); create it (e.g. `useradd --system --home-dir /var/lib/postgresql postgres`, normally done by the PostgreSQL server package) or run as an ordinary user", osUser, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("devdb: user %q has non-numeric uid/gid %q/%q", osUser, u.Uid, u.Gid)
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
				return err
			}
		}
	}
	return nil
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
