package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/flashline/flashline/migrations"
)

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("migrate", getenv, stderr)
	var dbURL string
	e.databaseURL(&dbURL)
	e.FS.Usage = func() { fmt.Fprintln(stderr, "usage: flashline migrate up | down N | status"); e.FS.PrintDefaults() }
	if err := e.FS.Parse(args); err != nil {
		return err
	}
	rest := e.FS.Args()
	if len(rest) == 0 {
		e.FS.Usage()
		return fmt.Errorf("migrate: up, down N or status")
	}
	pool, err := openAdmin(ctx, dbURL, getenv, stderr)
	if err != nil {
		return err
	}
	defer pool.Close()
	switch rest[0] {
	case "up":
		if err := migrations.Up(ctx, pool); err != nil {
			return err
		}
	case "down":
		if len(rest) != 2 {
			return fmt.Errorf("migrate down: say how many migrations to roll back, e.g. 'migrate down 1'")
		}
		n, err := strconv.Atoi(rest[1])
		if err != nil || n < 1 {
			return fmt.Errorf("migrate down: N must be a positive number, got %q", rest[1])
		}
		if err := migrations.Down(ctx, pool, n); err != nil {
			return err
		}
	case "status":
	default:
		return fmt.Errorf("migrate: unknown subcommand %q (up, down N, status)", rest[0])
	}
	st, err := migrations.GetStatus(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "flashline schema: version %d of %d%s\nriver schema:     version %d of %d\ncurrent:          %t\n",
		st.Version, st.Latest, map[bool]string{true: " (DIRTY: a migration failed half way)", false: ""}[st.Dirty],
		st.RiverVersion, st.RiverLatest, st.Current())
	return nil
}
