package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashline/flashline/internal/devdb"
	"github.com/flashline/flashline/internal/envflag"
	"github.com/flashline/flashline/postgres"
)

const usage = `flashline — flash sales on one PostgreSQL primary

Usage:
  flashline serve   [flags]          run the HTTP service (and its River workers)
  flashline migrate up|down N|status apply, roll back or show schema migrations
  flashline sale    create|open|pause|resume|close|show|repair|verify-draw|report ...
                                     administer sales from the shell
  flashline gate    show|rebuild SALE_ID
                                     the Redis gate of a peak sale
  flashline check                    check every sale's invariant; exit 1 on a mismatch
  flashline incident list|show ...   what the invariant job found, and who changed the stock
  flashline pay     --reservation ID send a signed payment event, as the payment provider would
  flashline payments late [--all]    payments that came too late: to refund
  flashline token   --customer ID    mint a customer JWT (demo and testing)
  flashline solve   --nonce N --bits B  solve a waiting-room challenge (prints the solution)
  flashline devdb   up|down|status|url  the local development PostgreSQL
  flashline page    export --sale ID --out DIR --edge URL
                                     the waiting-room page as static files for a CDN

Every flag also reads an environment variable (shown in each command's -h);
the flag wins. DATABASE_URL is a libpq URL; when it is unset, flashline uses
the development database in ./.devdb (started by 'make run' or 'flashline devdb up').

The load generator is a command of its own, flashline-loadtest ('make build'
puts it in bin/): flashline-loadtest --scenario northline|storm|hot|overload|crowd|no|edge
--target URL[,URL...] runs a scenario and verifies nothing was oversold.
`

// errMismatch makes `flashline check` exit 1 without printing an error.
var errMismatch = errors.New("invariant mismatch")

// exitCode is the process exit code for err.
func exitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 1
}

// run is the whole program, with its environment injected so that tests can
// call it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("a command is required")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, rest, getenv, stdout, stderr)
	case "sale":
		return runSale(ctx, rest, getenv, stdout, stderr)
	case "gate":
		return runGate(ctx, rest, getenv, stdout, stderr)
	case "check":
		return runCheck(ctx, rest, getenv, stdout, stderr)
	case "incident":
		return runIncident(ctx, rest, getenv, stdout, stderr)
	case "pay":
		return runPay(ctx, rest, getenv, stdout, stderr)
	case "payments":
		return runPayments(ctx, rest, getenv, stdout, stderr)
	case "token":
		return runToken(rest, getenv, stdout, stderr)
	case "solve":
		return runSolve(ctx, rest, getenv, stdout, stderr)
	case "devdb":
		return runDevDB(ctx, rest, getenv, stdout, stderr)
	case "loadtest":
		return errors.New("the load generator is a command of its own: flashline-loadtest (make build puts it in bin/)")
	case "page":
		return runPage(ctx, rest, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// env reads configuration: a flag's default comes from its environment
// variable, so a flag given on the command line wins (envflag.Set: String,
// Int, Duration, Bool).
type env struct{ envflag.Set }

func newFlags(name string, getenv func(string) string, stderr io.Writer) env {
	return env{envflag.New("flashline "+name, getenv, stderr)}
}

// databaseURL registers a command-line tool's --database-url: the server
// itself, FLASHLINE_DATABASE_DIRECT_URL when that is set (the tools take
// session locks and prepare statements, which a pooler in transaction mode
// does not keep), else DATABASE_URL.
func (e env) databaseURL(p *string) {
	envVar := "DATABASE_URL"
	if e.Getenv(directURLEnv) != "" {
		envVar = directURLEnv
	}
	e.String(p, "database-url", envVar, "", "PostgreSQL URL (libpq form)")
}

// directURLEnv names serve's --database-direct-url.
const directURLEnv = "FLASHLINE_DATABASE_DIRECT_URL"

// devDBDir is where the development database lives.
func devDBDir(getenv func(string) string) string {
	if d := getenv("FLASHLINE_DEVDB_DIR"); d != "" {
		return d
	}
	return ".devdb"
}

// resolveDatabaseURL returns url, or the development database's when url is
// empty (saying so on stderr).
func resolveDatabaseURL(url string, getenv func(string) string, stderr io.Writer) (string, error) {
	if url != "" {
		return url, nil
	}
	dir := devDBDir(getenv)
	if dev, ok := devdb.URL(dir); ok {
		fmt.Fprintf(stderr, "flashline: DATABASE_URL is unset; using the development database %s (in %s)\n", dev, dir)
		return dev, nil
	}
	return "", fmt.Errorf("DATABASE_URL is unset and there is no development database in %s: set DATABASE_URL, or run 'make run' (or 'flashline devdb up') to start one", dir)
}

// openAdmin opens a small pool for command-line tools (application_name
// flashline-cli).
func openAdmin(ctx context.Context, url string, getenv func(string) string, stderr io.Writer) (*pgxpool.Pool, error) {
	return openPool(ctx, url, "cli", getenv, stderr)
}

// openPool opens a small pool for a command-line tool that names itself
// flashline-<name> (pg_stat_activity, stock_audit).
func openPool(ctx context.Context, url, name string, getenv func(string) string, stderr io.Writer) (*pgxpool.Pool, error) {
	url, err := resolveDatabaseURL(url, getenv, stderr)
	if err != nil {
		return nil, err
	}
	return postgres.NewPool(ctx, url, name, postgres.PoolOptions{MaxConns: 4})
}
