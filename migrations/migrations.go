package migrations

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/flashline/flashline/internal/dbsqlc"
)

//go:embed *.sql
var files embed.FS

// Status is where a database's schema stands.
type Status struct {
	Version      uint // Flashline's applied migration (0: none)
	Latest       uint // the newest migration this binary carries
	Dirty        bool // a migration failed half-way; a DBA must look
	RiverVersion int  // River's applied migration (0: none)
	RiverLatest  int  // the newest River migration this binary carries
}

// Current reports whether the schema is exactly what this binary expects.
func (s Status) Current() bool {
	return !s.Dirty && s.Version == s.Latest && s.RiverVersion == s.RiverLatest
}

// Fingerprint identifies the schema this binary migrates to: a hash of the
// embedded migration files and River's newest migration. Tests use it to name
// a migrated template database.
func Fingerprint() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	rm, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return "", err
	}
	all := rm.AllVersions()
	fmt.Fprintf(h, "river\x00%d", all[len(all)-1].Version)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Latest returns the number of the newest embedded migration.
func Latest() (uint, error) {
	src, err := iofs.New(files, ".")
	if err != nil {
		return 0, err
	}
	defer src.Close()
	v, err := src.First()
	if err != nil {
		return 0, err
	}
	for {
		next, err := src.Next(v)
		if err != nil {
			return v, nil // fs.ErrNotExist: v is the last one
		}
		v = next
	}
}

func newMigrate(pool *pgxpool.Pool) (*migrate.Migrate, error) {
	src, err := iofs.New(files, ".")
	if err != nil {
		return nil, err
	}
	// The *sql.DB is a view of the pool; closing it does not close the pool.
	drv, err := migratepgx.WithInstance(stdlib.OpenDBFromPool(pool), &migratepgx.Config{})
	if err != nil {
		return nil, fmt.Errorf("migrate driver: %w", err)
	}
	return migrate.NewWithInstance("iofs", src, "pgx5", drv)
}

func newRiverMigrator(pool *pgxpool.Pool) (*rivermigrate.Migrator[pgx.Tx], error) {
	return rivermigrate.New(riverpgxv5.New(pool), nil)
}

// Up applies every pending migration: Flashline's, then River's. Several
// processes may call it at once; an advisory lock serialises them, and the ones
// that wait find nothing left to do.
func Up(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	q := dbsqlc.New(conn)
	if err := q.MigrationLock(ctx); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer q.MigrationUnlock(context.WithoutCancel(ctx)) //nolint:errcheck // the session ends with the connection anyway

	m, err := newMigrate(pool)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate flashline schema: %w", err)
	}
	rm, err := newRiverMigrator(pool)
	if err != nil {
		return err
	}
	if _, err := rm.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate river schema: %w", err)
	}
	return nil
}

// Down rolls back the last n of Flashline's migrations. River's tables are left
// alone: they belong to the job queue, not to the sale schema.
func Down(ctx context.Context, pool *pgxpool.Pool, n int) error {
	if n < 1 {
		return fmt.Errorf("migrate down: N must be at least 1, got %d", n)
	}
	m, err := newMigrate(pool)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Steps(-n); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate down %d: %w", n, err)
	}
	return nil
}

// GetStatus reads where the schema stands without changing anything.
func GetStatus(ctx context.Context, pool *pgxpool.Pool) (Status, error) {
	var st Status
	latest, err := Latest()
	if err != nil {
		return st, err
	}
	st.Latest = latest
	m, err := newMigrate(pool)
	if err != nil {
		return st, err
	}
	defer m.Close()
	v, dirty, err := m.Version()
	if err != nil && !errors.Is(err, migrate.ErrNilVersion) {
		return st, fmt.Errorf("migration version: %w", err)
	}
	st.Version, st.Dirty = v, dirty

	rm, err := newRiverMigrator(pool)
	if err != nil {
		return st, err
	}
	all := rm.AllVersions()
	if len(all) > 0 {
		st.RiverLatest = all[len(all)-1].Version
	}
	existing, err := rm.ExistingVersions(ctx)
	if err != nil {
		// No river_migration table yet: nothing applied.
		return st, nil //nolint:nilerr // absence of River's table is version 0
	}
	if len(existing) > 0 {
		st.RiverVersion = existing[len(existing)-1].Version
	}
	return st, nil
}
