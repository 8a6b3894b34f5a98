// Command flashline-loadtest is Flashline's load generator: it creates a
// sale on the service it is pointed at, drives a scenario (northline, hot,
// overload, crowd, no, edge) against it and verifies that nothing was
// oversold. It is a command of its own so that the service binary links
// neither it, nor vegeta, nor the generated API client. See run.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "flashline-loadtest:", err)
		os.Exit(1)
	}
}
