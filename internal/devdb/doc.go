// Package devdb holds the development PostgreSQL.
//
// It starts and stops a local development PostgreSQL cluster built
// from the PostgreSQL server binaries installed on the machine (initdb,
// pg_ctl, postgres), so that working on flashline needs nothing but Go and
// PostgreSQL's server package: no Docker, no system-wide database setup.
//
// The cluster lives in a single folder (Options.Dir, typically
// "<project>/.devdb"):
//
//	Dir/data          the cluster's data directory (initdb)
//	Dir/postgres.log  the server log
//	Dir/port          the TCP port the cluster listens on (127.0.0.1 only)
//	Dir/lock          flock(2) lock serialising Up and Down across processes
//
// The server listens on the loopback interface only, has no Unix socket and
// trusts every local connection (initdb --auth=trust), so it must never be
// used for anything but development and tests.
//
// PostgreSQL refuses to run as root. When the calling process runs as root,
// the server commands are run as the "postgres" operating-system user, the
// folder is chowned to that user, and every parent folder of Dir must be
// traversable by it.
//
// The postmaster is detached from the calling process: it keeps running after
// the program that called Up exits, and a later Up reuses it. Call Down to
// stop it.
//
// The package is meant for Linux (and other Unix systems with flock and
// setuid credentials); it uses /proc when available to recognise the
// postmaster.
package devdb
