package envflag

import (
	"errors"
	"flag"
	"io"
	"strconv"
	"time"
)

// Set is a flag set whose String, Int, Duration and Bool read their
// defaults from the environment.
type Set struct {
	Getenv func(string) string
	FS     *flag.FlagSet
}

// New returns a Set named name (as -h shows it) that reports errors to
// stderr.
func New(name string, getenv func(string) string, stderr io.Writer) Set {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return Set{Getenv: getenv, FS: fs}
}

// String registers a string flag; an empty variable leaves def.
func (s Set) String(p *string, name, envVar, def, help string) {
	define(s, p, name, envVar, def, help, nonEmpty, s.FS.StringVar)
}

// Int registers an int flag; a variable that is not an integer leaves def.
func (s Set) Int(p *int, name, envVar string, def int, help string) {
	define(s, p, name, envVar, def, help, strconv.Atoi, s.FS.IntVar)
}

// Duration registers a duration flag ("90s", "2m"); a variable that is not
// a duration leaves def.
func (s Set) Duration(p *time.Duration, name, envVar string, def time.Duration, help string) {
	define(s, p, name, envVar, def, help, time.ParseDuration, s.FS.DurationVar)
}

// Bool registers a bool flag, false unless its variable says true
// (strconv.ParseBool).
func (s Set) Bool(p *bool, name, envVar, help string) {
	define(s, p, name, envVar, false, help, strconv.ParseBool, s.FS.BoolVar)
}

// define is the one shape of them all: the variable, parsed, replaces def
// when it parses; the flag is registered with its help naming the variable.
func define[T any](s Set, p *T, name, envVar string, def T, help string, parse func(string) (T, error), register func(*T, string, T, string)) {
	if v, err := parse(s.Getenv(envVar)); err == nil {
		def = v
	}
	register(p, name, def, help+" ($"+envVar+")")
}

var errEmpty = errors.New("empty")

// nonEmpty parses a string variable: set unless empty.
func nonEmpty(v string) (string, error) {
	if v == "" {
		return "", errEmpty
	}
	return v, nil
}
