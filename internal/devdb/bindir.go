// Finding the PostgreSQL server binaries (initdb, pg_ctl) on the machine.

package devdb

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

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
