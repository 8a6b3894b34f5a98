// Package envflag holds flags with defaults from the environment.
//
// It registers command-line flags whose defaults come from
// environment variables, read through an injected getenv: a flag given on
// the command line wins over its variable, which wins over the default. The
// help of each flag names its variable.
package envflag
