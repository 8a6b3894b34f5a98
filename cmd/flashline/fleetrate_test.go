package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/loadtest"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// TestFleetRateAgainstTheLoadGenerator measures what the console's live
// page says of the fleet's reservation rate, with three instances serving,
// against what the load generator measured: the hot scenario spread over
// three serve processes, the first instance's live page read every second.
// Both figures are the steady part of the run (its first and last three
// seconds left out). A measurement, not a check: FLASHLINE_MEASURE=1.
func TestFleetRateAgainstTheLoadGenerator(t *testing.T) {
	if os.Getenv("FLASHLINE_MEASURE") != "1" {
		t.Skip("a measurement: FLASHLINE_MEASURE=1 go test -count=1 -v -run TestFleetRateAgainstTheLoadGenerator ./cmd/flashline/")
	}
	servers := testserver.StartN(t, 3, testdb.New(t))
	targets := []string{servers[0].URL, servers[1].URL, servers[2].URL}
	const seconds, trim = 20, 3
	c := testserver.NewClient()

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	type sample struct {
		at   time.Time
		rate float64
		n    int
	}
	var samples []sample
	var wg sync.WaitGroup
	wg.Go(func() {
		saleID := ""
		for ctx.Err() == nil {
			time.Sleep(time.Second)
			if saleID == "" {
				r, err := c.To(servers[0].URL).Sales(ctx, testserver.AdminToken, client.SalePage{Limit: 1})
				if err == nil && r.Status == http.StatusOK && len(r.Value.Sales) > 0 {
					saleID = r.Value.Sales[0].SaleID
				}
				continue
			}
			r, err := c.To(servers[0].URL).Live(ctx, testserver.AdminToken, saleID)
			if err == nil && r.Status == http.StatusOK {
				samples = append(samples, sample{time.Now(), r.Value.Rates.Reserved, len(r.Value.Instances)})
			}
		}
	})
	start := time.Now()
	res, err := loadtest.Run(ctx, loadtest.Config{
		Targets: targets, AdminToken: testserver.AdminToken, JWTSecret: testserver.JWTSecret,
		Scenario: "hot", Clients: 48, Duration: seconds * time.Second, Stock: 200_000,
		Out: io.Discard, Err: io.Discard,
	})
	end := time.Now()
	stop()
	wg.Wait()
	require.NoError(t, err)

	// The load generator's rate over its timeline's steady part.
	var reserved, width float64
	for _, b := range res.Timeline {
		if b.Start >= trim*time.Second && b.Start+b.Width <= res.Elapsed-trim*time.Second {
			reserved += b.ReservedRate() * b.Width.Seconds()
			width += b.Width.Seconds()
		}
	}
	measured := reserved / width
	// The console's, over the same part of the run (the generator's run
	// began after the sale was made, within start and end).
	var sum float64
	var n, instances int
	for _, s := range samples {
		if s.at.After(end.Add(-res.Elapsed).Add(trim*time.Second)) && s.at.Before(end.Add(-trim*time.Second)) {
			sum += s.rate
			n++
			instances = max(instances, s.n)
		}
	}
	require.Positive(t, n, "no live snapshot in the steady part")
	console := sum / float64(n)
	fmt.Printf("three instances, hot scenario, %d clients, %d s (steady part: the first and last %d s left out; started %s)\n", 48, seconds, trim, start.UTC().Format(time.RFC3339))
	fmt.Printf("load generator: %.0f reservations/s (whole run: %.0f/s, %d reserved)\n", measured, res.Goodput(), res.Reserved)
	fmt.Printf("console (instance 1's live page, %d snapshots, %d instances in its breakdown): %.0f reservations/s\n", n, instances, console)
	fmt.Printf("console / load generator: %.3f\n", console/measured)
}
