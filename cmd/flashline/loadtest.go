package main

import (
	"context"
	"io"
	"strings"

	"github.com/flashline/flashline/loadtest"
)

// runLoadtest is `flashline loadtest`.
func runLoadtest(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("loadtest", getenv, stderr)
	var cfg loadtest.Config
	var targets string
	var quiet bool
	e.string(&targets, "target", "FLASHLINE_LOADTEST_TARGETS", "http://127.0.0.1:8080", "comma-separated base URLs of flashline instances")
	e.string(&cfg.AdminToken, "admin-token", "FLASHLINE_ADMIN_TOKEN", "", "the service's admin token (creates the sale)")
	e.string(&cfg.JWTSecret, "jwt-secret", "FLASHLINE_JWT_SECRET", "", "the service's JWT secret (mints customers)")
	e.fs.StringVar(&cfg.Scenario, "scenario", "hot", "northline, hot or overload")
	e.fs.IntVar(&cfg.Clients, "clients", 128, "hot: concurrent buyers; northline: retry-storm clients")
	e.fs.IntVar(&cfg.Rate, "rate", 2000, "overload: reservations per second, open loop")
	e.fs.DurationVar(&cfg.Duration, "duration", 0, "hot, overload: how long (default 10s)")
	e.fs.IntVar(&cfg.Checkouts, "checkouts", 9000, "northline: checkouts in the retry storm")
	e.fs.IntVar(&cfg.Stock, "stock", 10_000_000, "hot, overload: units on sale")
	e.fs.IntVar(&cfg.Buckets, "buckets", 1, "rows the sale's stock is spread over")
	e.fs.BoolVar(&quiet, "quiet", false, "no progress bar")
	if err := e.fs.Parse(args); err != nil {
		return err
	}
	cfg.Targets = strings.Split(targets, ",")
	cfg.Progress = !quiet
	cfg.Out, cfg.Err = stdout, stderr
	_, err := loadtest.Run(ctx, cfg)
	return err
}
