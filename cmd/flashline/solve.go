package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// maxNonceLen bounds --nonce: the service's nonces are 22 characters.
const maxNonceLen = 256

// runSolve is `flashline solve`: the waiting room's proof of work from the
// shell, as the page solves it (the smallest decimal solution).
func runSolve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := newFlags("solve", getenv, stderr)
	var nonce string
	var bits int
	var quiet bool
	e.FS.StringVar(&nonce, "nonce", "", "the challenge's nonce, from a status answer's challenge (required)")
	e.FS.IntVar(&bits, "bits", 0, fmt.Sprintf("the challenge's bits, 0-%d (required)", flashline.MaxChallengeBits))
	e.FS.BoolVar(&quiet, "quiet", false, "no progress on stderr")
	if err := e.FS.Parse(args); err != nil {
		return err
	}
	switch {
	case nonce == "" || len(nonce) > maxNonceLen:
		return fmt.Errorf("solve: --nonce is required, at most %d bytes", maxNonceLen)
	case bits < 0 || bits > flashline.MaxChallengeBits:
		return fmt.Errorf("solve: --bits must be between 0 and %d", flashline.MaxChallengeBits)
	}
	// About 2^bits hashes are expected; the bar counts them (it may run
	// past: the expectation is not a bound).
	bar := progressbar.DefaultSilent(1 << bits)
	if !quiet && bits >= 20 {
		bar = progressbar.NewOptions64(1<<bits, progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("hashes"), progressbar.OptionShowCount(),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	solution, err := roomtoken.SolveContext(ctx, nonce, bits, func(tried uint64) { _ = bar.Set64(int64(tried)) })
	_ = bar.Finish()
	if errors.Is(err, context.Canceled) {
		return errors.New("solve: interrupted")
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, solution)
	return nil
}
