package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// parts is what a serve process has started, in the order it started them.
// stop stops them last first, all within one deadline: orchestrators send
// SIGTERM and then kill, so a part that has not stopped when the deadline
// passes (a pool waiting for a connection a dead database will never give
// back, River waiting for a job) is abandoned — logged by name, with every
// part after it — and the process exits non-zero instead of hanging.
type parts struct {
	logger *slog.Logger
	list   []part

	// The background loops (startLoops): the first to end while serving
	// ends the service, with its error (failed).
	loops     sync.WaitGroup
	loopsCtx  context.Context
	stopLoops context.CancelFunc
	failed    chan error
}

type part struct {
	name string
	stop func(context.Context) error
}

func newParts(logger *slog.Logger) *parts {
	ctx, cancel := context.WithCancel(context.Background())
	return &parts{logger: logger, loopsCtx: ctx, stopLoops: cancel, failed: make(chan error, 1)}
}

// add records a started part and how to stop it.
func (p *parts) add(name string, stop func(context.Context) error) {
	p.list = append(p.list, part{name, stop})
}

// addClose is add for a part whose stop takes no deadline (a pool's Close).
func (p *parts) addClose(name string, close func()) {
	p.add(name, func(context.Context) error { close(); return nil })
}

// startLoops runs the background loops (name: loop) until the service
// stops; they stop together, as one part. A loop must return only when its
// context is done: one that ends before (an error, or a bug) ends the
// service with that error rather than leaving it serving without the loop
// (a sale cache nobody refreshes, a pacer nobody runs).
func (p *parts) startLoops(loops map[string]func(context.Context) error) {
	for name, fn := range loops {
		p.loops.Go(func() {
			err := fn(p.loopsCtx)
			if p.loopsCtx.Err() != nil {
				return
			}
			if err == nil {
				err = errors.New("ended")
			}
			select {
			case p.failed <- fmt.Errorf("%s: %w", name, err):
			default:
			}
		})
	}
	p.add("background loops", func(context.Context) error {
		p.stopLoops()
		p.loops.Wait()
		return nil
	})
}

// stop stops every part, last first, within ctx's deadline.
func (p *parts) stop(ctx context.Context) error {
	var errs []error
	for i := len(p.list) - 1; i >= 0; i-- {
		q := p.list[i]
		done := make(chan error, 1)
		go func() { done <- q.stop(ctx) }()
		select {
		case err := <-done:
			if err != nil {
				errs = append(errs, fmt.Errorf("stop %s: %w", q.name, err))
			}
		case <-ctx.Done():
			var abandoned []string
			for j := i; j >= 0; j-- {
				abandoned = append(abandoned, p.list[j].name)
			}
			p.logger.Warn("flashline: the drain deadline passed; exiting without waiting for the rest",
				"abandoned", strings.Join(abandoned, ", "))
			return errors.Join(append(errs, fmt.Errorf("drain deadline passed: abandoned %s", strings.Join(abandoned, ", ")))...)
		}
	}
	return errors.Join(errs...)
}

// stopWithin stops every part within timeout, counted from now.
func (p *parts) stopWithin(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.stop(ctx)
}
