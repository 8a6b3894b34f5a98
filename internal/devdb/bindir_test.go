package devdb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNoBinaries(t *testing.T) {
	t.Setenv(BinDirEnv, t.TempDir())
	_, err := Up(t.Context(), Options{Dir: filepath.Join(t.TempDir(), ".devdb")})
	if err == nil || !strings.Contains(err.Error(), BinDirEnv) {
		t.Fatalf("want an error about %s, got %v", BinDirEnv, err)
	}
}

func TestHighestVersionedBinDir(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "10", "15", "16", "foo"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if v == "16" {
			continue // no binaries: must be skipped
		}
		for _, name := range []string{"initdb", "pg_ctl"} {
			if err := os.WriteFile(filepath.Join(bin, name), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := highestVersionedBinDir(root), filepath.Join(root, "15", "bin"); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
