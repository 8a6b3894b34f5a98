package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/flashline/flashline/internal/envflag"
	"github.com/flashline/flashline/internal/loadtest"
)

// run is the whole command, with its environment injected (as flashline's
// run): the flags, then the run or the curve.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := envflag.New("flashline-loadtest", getenv, stderr)
	var cfg loadtest.Config
	var targets string
	var quiet bool
	var report, curve, floor, jsonOut string
	e.String(&targets, "target", "FLASHLINE_LOADTEST_TARGETS", "http://127.0.0.1:8080", "comma-separated base URLs of flashline instances")
	e.String(&cfg.Admin, "admin-target", "FLASHLINE_LOADTEST_ADMIN", "", "base URL of the instance the admin's requests go to (default: the first target; with edges as targets, an origin)")
	e.String(&cfg.AdminToken, "admin-token", "FLASHLINE_ADMIN_TOKEN", "", "the service's admin token (creates the sale)")
	e.String(&cfg.JWTSecret, "jwt-secret", "FLASHLINE_JWT_SECRET", "", "the service's JWT secret (mints customers)")
	e.FS.StringVar(&cfg.Scenario, "scenario", "hot", "northline, storm (northline's retry storm alone), hot, overload, crowd, no (the sold-out and status answers against /healthz) or edge (an edge's tickets and status answers against its /healthz; --target ORIGIN,EDGE)")
	e.FS.IntVar(&cfg.Clients, "clients", 0, "hot: concurrent buyers (default 128); northline, storm: retry-storm clients (128); crowd: customers (2000); no, edge: keep-alive connections (64)")
	e.FS.IntVar(&cfg.Rate, "rate", 2000, "overload: reservations per second, open loop")
	e.FS.DurationVar(&cfg.SLO, "slo", time.Second, "overload: a reservation answered 201 within this counts as goodput")
	e.FS.DurationVar(&cfg.Duration, "duration", 0, "hot, overload: how long (default 10s); no, edge: each phase (10s); crowd: the most to wait after the open (60s)")
	e.FS.IntVar(&cfg.Checkouts, "checkouts", 9000, "northline, storm: checkouts in the retry storm")
	e.FS.IntVar(&cfg.Variants, "variants", 0, "northline, storm: the retry storm's sale has this many variants (v1, v2, ...), its checkouts spread over them, each checked sold exactly")
	e.FS.IntVar(&cfg.Stock, "stock", 0, "units on sale (hot, overload: 10000000; crowd: 200)")
	e.FS.DurationVar(&cfg.OpenIn, "open-in", 3*time.Second, "crowd: the sale opens this long after the start; half the crowd comes before")
	e.FS.StringVar(&cfg.Fairness, "fairness", "randomized_at_open", "crowd: the waiting room's policy (randomized_at_open or arrival_order)")
	e.FS.IntVar(&cfg.ChallengeBits, "challenge-bits", 8, "crowd: proof-of-work difficulty")
	e.FS.IntVar(&cfg.Buckets, "buckets", 1, "rows the sale's stock is spread over")
	e.FS.StringVar(&cfg.Gate, "gate", "none", "the sale's gate: none, or redis (the service needs --redis-url)")
	e.FS.BoolVar(&quiet, "quiet", false, "no progress bar")
	e.FS.StringVar(&report, "report", "", "also write an HTML report (the summary, throughput and latency over time) to this file")
	e.FS.StringVar(&jsonOut, "json", "", "also write the result (outcomes, latencies, what the final check found) as JSON to this file")
	e.FS.StringVar(&curve, "curve", "", "run nothing: draw the overload curve recorded in this file by scripts/overload-curve.sh as an SVG image to --report")
	e.FS.StringVar(&floor, "floor", "", "run nothing: serve the floor (http: net/http with one handler; tcp: no net/http) on --target's host:port, answering every reservation as sold out, until stopped (scripts/overload-curve.sh measures it beside the service)")
	if err := e.FS.Parse(args); err != nil {
		return err
	}
	if floor != "" {
		return loadtest.Floor(ctx, strings.TrimPrefix(targets, "http://"), floor)
	}
	if curve != "" {
		return plotCurve(curve, report, stdout)
	}
	cfg.Targets = strings.Split(targets, ",")
	cfg.Progress = !quiet
	cfg.Out, cfg.Err = stdout, stderr
	var f, j *os.File
	// Created before the run, so that a bad path fails now, not after it.
	if report != "" {
		var err error
		if f, err = os.Create(report); err != nil {
			return fmt.Errorf("loadtest: report: %w", err)
		}
	}
	if jsonOut != "" {
		var err error
		if j, err = os.Create(jsonOut); err != nil {
			return errors.Join(fmt.Errorf("loadtest: json: %w", err), closeAndRemove(f, report))
		}
	}
	res, err := loadtest.Run(ctx, cfg)
	if res == nil { // nothing ran: no report, no result
		return errors.Join(err, closeAndRemove(f, report), closeAndRemove(j, jsonOut))
	}
	if j != nil {
		// Written even for a run that failed its checks, as the report is.
		if jerr := errors.Join(json.NewEncoder(j).Encode(res), j.Close()); jerr != nil {
			err = errors.Join(err, fmt.Errorf("loadtest: json: %w", jerr))
		}
	}
	if f == nil {
		return err
	}
	// A run that failed its checks is reported too: that is when the
	// charts matter most.
	if werr := errors.Join(res.WriteReport(f), f.Close()); werr != nil {
		return errors.Join(err, fmt.Errorf("loadtest: report: %w", werr))
	}
	fmt.Fprintf(stdout, "report: %s\n", report)
	return err
}

// closeAndRemove closes and removes a file created for an output the run
// did not produce (nil: none was asked for).
func closeAndRemove(f *os.File, path string) error {
	if f == nil {
		return nil
	}
	return errors.Join(f.Close(), os.Remove(path))
}

// plotCurve is `flashline-loadtest --curve in.tsv --report out.svg`.
func plotCurve(in, out string, stdout io.Writer) error {
	if out == "" {
		return errors.New("loadtest: --curve needs --report, the SVG file to write")
	}
	f, err := os.Open(in)
	if err != nil {
		return fmt.Errorf("loadtest: curve: %w", err)
	}
	defer f.Close()
	points, err := loadtest.ReadCurve(f)
	if err != nil {
		return err
	}
	var svg bytes.Buffer
	if err := loadtest.WriteCurveSVG(&svg, points); err != nil {
		return err
	}
	if err := os.WriteFile(out, svg.Bytes(), 0o644); err != nil {
		return fmt.Errorf("loadtest: curve: %w", err)
	}
	fmt.Fprintf(stdout, "curve: %s\n", out)
	return nil
}
