package devdb

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUntraversableParent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL clusters: not in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("only relevant when running as root")
	}
	if _, err := findBinDir(); err != nil {
		t.Skip(err)
	}
	tmp := t.TempDir() // 0700, not opened up

	t.Run("EmptyFolderMovesToVarTmp", func(t *testing.T) {
		opts := Options{Dir: filepath.Join(tmp, "x", ".devdb")}
		url, err := Up(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		real, err := filepath.EvalSymlinks(opts.Dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = Down(context.Background(), opts)
			_ = os.RemoveAll(real)
		})
		if !strings.HasPrefix(real, "/var/tmp/flashline-devdb-") {
			t.Fatalf("cluster kept in %s, want under /var/tmp", real)
		}
		selectOne(t, url)
		if got, ok := URL(opts.Dir); !ok || got != url {
			t.Fatalf("URL(%s) = %q, %v; want %q", opts.Dir, got, ok, url)
		}
	})
	t.Run("FolderWithFilesIsRefused", func(t *testing.T) {
		dir := filepath.Join(tmp, "y", ".devdb")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "keep"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Up(t.Context(), Options{Dir: dir})
		if err == nil {
			t.Fatal("Up moved a folder that holds files")
		}
		if !strings.Contains(err.Error(), tmp) || !strings.Contains(err.Error(), "cannot enter") {
			t.Fatalf("error does not name the folder %s: %v", tmp, err)
		}
	})
}
