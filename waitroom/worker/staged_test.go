package worker

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testserver"
)

// stageWorker writes, in a directory of the test's, the Worker's modules
// (src/*.js), more modules of the test's (name → text; a name of testdata/
// is read from there when its text is ""), and config.capnp with main,
// one of them, as its first module (workerd's main module) ahead of the
// Worker's: a Worker of the test's, made of the Worker's own modules.
// It returns the directory.
func stageWorker(t *testing.T, main string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "src"), 0o755))
	sources, err := filepath.Glob(filepath.Join("src", "*.js"))
	require.NoError(t, err)
	for _, src := range sources {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, src), b, 0o644))
	}
	config, err := os.ReadFile("config.capnp")
	require.NoError(t, err)
	const first = `(name = "worker.js", esModule = embed "src/worker.js"),`
	require.Contains(t, string(config), first, "config.capnp's first module")
	var modules strings.Builder
	add := func(name string) {
		modules.WriteString(`(name = "` + name + `", esModule = embed "src/` + name + `"),` + "\n    ")
	}
	add(main)
	for name, text := range extra {
		if text == "" {
			b, err := os.ReadFile(filepath.Join("testdata", name))
			require.NoError(t, err)
			text = string(b)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "src", name), []byte(text), 0o644))
		if name != main {
			add(name)
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.capnp"),
		[]byte(strings.Replace(string(config), first, modules.String()+first, 1)), 0o644))
	return dir
}

// serveStaged runs the Worker in dir (the package's own, ".", or one
// stageWorker wrote) on workerd, and returns its base URL once it answers
// /healthz; it is stopped when the test ends.
func serveStaged(t *testing.T, dir string, origins ...string) string {
	t.Helper()
	bin := workerdBinary(t)
	addr := testserver.FreeAddr(t)
	cmd := exec.Command(bin, "serve", "config.capnp", "--socket-addr", "http="+addr)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ORIGINS="+strings.Join(origins, ","), "FLASHLINE_WAITROOM_KEYS="+testserver.WaitroomKeys,
		"FLASHLINE_JWT_SECRET="+testserver.JWTSecret, "EDGE_ID=")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("workerd's output:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, settle, 50*time.Millisecond, "workerd answers")
	return base
}
