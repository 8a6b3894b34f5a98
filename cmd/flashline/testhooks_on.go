//go:build flashline_testhooks

package main

// testHooks: this binary was built for the tests (internal/testkit/testserver builds
// with the tag flashline_testhooks), and serve honours its test hooks.
const testHooks = true
