//go:build !flashline_testhooks

package main

// testHooks says whether serve honours its test hooks (clockSkewEnv). Off in
// every binary but those internal/testkit/testserver builds, with the build tag
// flashline_testhooks: a variable left in a production environment must not
// change what the service does.
const testHooks = false
