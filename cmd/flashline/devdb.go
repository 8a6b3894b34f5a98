package main

import (
	"context"
	"fmt"
	"io"

	"github.com/flashline/flashline/internal/devdb"
)

// runDevDB is `flashline devdb up|down|status|url`: the local development PostgreSQL
// that `make run` and `make test` use when DATABASE_URL is unset.
func runDevDB(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: flashline devdb up|down|status|url")
	}
	opts := devdb.Options{Dir: devDBDir(getenv), Log: stderr}
	switch args[0] {
	case "up":
		url, err := devdb.Up(ctx, opts)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, url)
	case "down":
		return devdb.Down(ctx, opts)
	case "status":
		// Exit status 0 when running, 1 when not: for scripts.
		if !devdb.Running(opts.Dir) {
			return fmt.Errorf("no development database running in %s", opts.Dir)
		}
		fmt.Fprintln(stdout, "running")
	case "url":
		url, ok := devdb.URL(opts.Dir)
		if !ok {
			return fmt.Errorf("no development database in %s", opts.Dir)
		}
		fmt.Fprintln(stdout, url)
	default:
		return fmt.Errorf("usage: flashline devdb up|down|status|url")
	}
	return nil
}
