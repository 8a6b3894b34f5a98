package loadtest

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// Config is one load test.
type Config struct {
	// Targets are base URLs of flashline instances; requests are spread over
	// them round-robin.
	Targets []string
	// Admin is the base URL the admin's requests (the sale's creation, the
	// final check) go to; default Targets[0]. Edges serve no admin route:
	// with edges as targets, name an origin here.
	Admin      string
	AdminToken string
	JWTSecret  string
	Scenario   string
	Clients    int // hot: concurrent buyers
	Rate       int // overload: requests per second
	// SLO is the overload scenario's deadline of a useful answer: its
	// goodput counts the 201s answered within it (default 1 s).
	SLO       time.Duration
	Duration  time.Duration // hot, overload
	Checkouts int           // northline, storm: checkouts in the retry storm
	// Variants: the retry storm's sale has this many variants (0: none),
	// its checkouts spread over them (northline, storm).
	Variants int
	Stock    int // hot, overload: units on sale
	Buckets  int
	Gate     string // the sale's gate: none (default) or redis
	// crowd: when the sale opens, its fairness policy and challenge.
	OpenIn        time.Duration
	Fairness      string
	ChallengeBits int
	Progress      bool // draw a progress bar on Err
	Out, Err      io.Writer
	// Transport, when set, wraps the transport of the load test's client
	// (internal/client): the tests check every exchange against the OpenAPI
	// document with it. The overload scenario's open loop (vegeta) is not
	// wrapped.
	Transport func(http.RoundTripper) http.RoundTripper
}

func (c *Config) setDefaults() error {
	if len(c.Targets) == 0 {
		return errors.New("loadtest: at least one target URL is required")
	}
	for i, t := range c.Targets {
		c.Targets[i] = strings.TrimRight(t, "/")
	}
	if c.AdminToken == "" || c.JWTSecret == "" {
		return errors.New("loadtest: the admin token and the JWT secret are required (to create the sale and mint customers)")
	}
	if c.Clients == 0 {
		c.Clients = 128
		switch c.Scenario {
		case "crowd":
			c.Clients = 2000
		case "no", "edge":
			c.Clients = 64
		}
	}
	if c.SLO == 0 {
		c.SLO = time.Second
	}
	if c.Rate == 0 {
		c.Rate = 2000
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
		if c.Scenario == "crowd" {
			c.Duration = time.Minute
		}
	}
	if c.OpenIn <= 0 {
		c.OpenIn = 3 * time.Second
	}
	if c.Fairness == "" {
		c.Fairness = "randomized_at_open"
	}
	if c.Checkouts == 0 {
		c.Checkouts = 9000
	}
	if c.Stock == 0 {
		c.Stock = 10_000_000
		if c.Scenario == "crowd" {
			c.Stock = 200
		}
	}
	if c.Buckets == 0 {
		c.Buckets = 1
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Err == nil {
		c.Err = io.Discard
	}
	// More variants than the service takes: its answer to the sale's
	// creation says so.
	if c.Variants < 0 || c.Variants > c.Checkouts {
		return errors.New("loadtest: variants must be 0 or more and at most the checkouts")
	}
	if c.Clients < 1 || c.Rate < 1 || c.Duration <= 0 || c.Checkouts < 1 || c.Stock < 1 {
		return errors.New("loadtest: clients, rate, duration, checkouts and stock must be positive")
	}
	return nil
}
