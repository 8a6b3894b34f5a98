package testpgbouncer

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bouncer is a running pgbouncer.
type Bouncer struct {
	// Port is where it listens on 127.0.0.1.
	Port int
	dir  string
	cmd  *exec.Cmd
}

// binary finds pgbouncer: FLASHLINE_PGBOUNCER, else on PATH, else where
// Debian puts it.
func binary() (string, bool) {
	if b := os.Getenv("FLASHLINE_PGBOUNCER"); b != "" {
		return b, true
	}
	if b, err := exec.LookPath("pgbouncer"); err == nil {
		return b, true
	}
	for _, b := range []string{"/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer"} {
		if _, err := os.Stat(b); err == nil {
			return b, true
		}
	}
	return "", false
}

// Start runs a pgbouncer in transaction pooling mode in front of the server
// of serverURL (every database on it, any user; trust authentication, as
// the test servers have), holding at most serverConns connections to it in
// all (default_pool_size and max_db_connections).
func Start(t testing.TB, serverURL string, serverConns int) *Bouncer {
	t.Helper()
	bin, ok := binary()
	if !ok {
		msg := "testpgbouncer: no pgbouncer binary (install PgBouncer, e.g. Debian's pgbouncer package: make test does as root)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	su, err := url.Parse(serverURL)
	if err != nil {
		t.Fatalf("testpgbouncer: %v", err)
	}
	user := su.User.Username()
	if user == "" {
		user = "postgres"
	}
	// PgBouncer refuses to run as root: as root it runs as the postgres OS
	// user, in a folder that user owns (a test's TempDir is root's).
	dir, err := os.MkdirTemp("/var/tmp", "flashline-pgbouncer-")
	if err != nil {
		t.Fatalf("testpgbouncer: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cred, err := serverUser(dir)
	if err != nil {
		t.Fatalf("testpgbouncer: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_db_connections = %d
max_client_conn = 2000
server_lifetime = 3600
logfile = %s
pidfile = %s
`, su.Hostname(), su.Port(), port, filepath.Join(dir, "users.txt"), serverConns, serverConns,
		filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	files := map[string]string{"pgbouncer.ini": ini, "users.txt": fmt.Sprintf("%q \"\"\n", user)}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatalf("testpgbouncer: %v", err)
		}
		if cred != nil {
			if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatalf("testpgbouncer: %v", err)
			}
		}
	}
	b := &Bouncer{Port: port, dir: dir}
	b.cmd = exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	if cred != nil {
		b.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("testpgbouncer: start %s: %v", bin, err)
	}
	t.Cleanup(b.stop)
	b.waitAnswer(t, su)
	return b
}

// serverUser returns the credentials to run pgbouncer with (nil: ours, we
// are not root) and gives them dir.
func serverUser(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and pgbouncer refuses to, but there is no postgres OS user to run it as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user postgres has uid/gid %q/%q", u.Uid, u.Gid)
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (b *Bouncer) waitAnswer(t testing.TB, server *url.URL) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, b.URL(server.String()))
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
			t.Fatalf("testpgbouncer: pgbouncer on port %d does not answer: %v\n%s", b.Port, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL is databaseURL (a URL of the server behind the bouncer) through the
// bouncer: the same database and user, the bouncer's address.
func (b *Bouncer) URL(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil {
		panic(fmt.Sprintf("testpgbouncer: %v", err))
	}
	u.Host = "127.0.0.1:" + strconv.Itoa(b.Port)
	return u.String()
}

// Log is pgbouncer's log so far.
func (b *Bouncer) Log() string {
	log, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
	return strings.TrimSpace(string(log))
}

func (b *Bouncer) stop() {
	if b.cmd.Process == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM) // pgbouncer: an immediate shutdown
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}
