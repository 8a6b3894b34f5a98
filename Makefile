# Flashline — the two commands a new user needs are `make run` and `make test`.
# Both start a local development PostgreSQL (in ./.devdb, from the server
# binaries on this machine) when DATABASE_URL is unset.

GO      ?= go
# -trimpath leaves the checkout's folder out of what is compiled. Without it
# the folder is part of every build-cache key of this module's packages, so a
# fresh clone in a new folder (CI's checkout, say) compiled the
# whole module again, with and without the race detector, although Go's
# build cache held every package already. Panics and race reports then name
# files by module path (github.com/flashline/flashline/...), not by folder.
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
BIN     := bin/flashline
# Development secrets for `make run`; set real ones in production.
FLASHLINE_ADMIN_TOKEN ?= dev-admin-token
FLASHLINE_JWT_SECRET  ?= dev-jwt-secret
# make run listens on loopback only; `flashline serve` alone defaults to :8080.
FLASHLINE_ADDR        ?= 127.0.0.1:8080
export FLASHLINE_ADMIN_TOKEN FLASHLINE_JWT_SECRET FLASHLINE_ADDR

# The database: $DATABASE_URL if set, else the development cluster (started or
# reused). Evaluated by the shell in each recipe that needs it.
DB_URL = $${DATABASE_URL:-$$($(BIN) devdb up)}

# The tests' database, around a command: FLASHLINE_TEST_DATABASE_URL is
# $DATABASE_URL if set, else the development cluster's; a cluster that was not
# running before is stopped again after the command, whose exit status is kept.
#   @$(WITH_TEST_DB) <command>; $(END_TEST_DB)
WITH_TEST_DB = started=; if [ -z "$$DATABASE_URL" ] && ! $(BIN) devdb status >/dev/null 2>&1; then started=1; fi; \
	url="$(DB_URL)" && test -n "$$url" || exit 1; export FLASHLINE_TEST_DATABASE_URL="$$url";
END_TEST_DB = rc=$$?; if [ -n "$$started" ]; then $(BIN) devdb down; fi; exit $$rc

# The browsers the tests in waitroom/waitpage/ drive (the first found on PATH).
CHROMIUM_NAMES := chromium chromium-browser google-chrome google-chrome-stable

.PHONY: run test test-short chaos fuzz bench profile rehearse build devdb-up devdb-down generate check-generated vet chromium pgbouncer locust workerd worker-dev clean

## build: bin/flashline (the service and its tools) and bin/flashline-loadtest
## (the load generator, a command of its own: the service links none of it)
build:
	$(GO) build -o $(BIN) ./cmd/flashline
	$(GO) build -o bin/flashline-loadtest ./cmd/flashline-loadtest

## run: the service with a demo sale on http://localhost:8080
run: build
	@url="$(DB_URL)" && test -n "$$url" && DATABASE_URL="$$url" $(BIN) serve --demo

## test: the whole suite against real PostgreSQL, with the race detector,
## every benchmark once and every fuzz target for a few seconds (FUZZTIME,
## default 3s), in lanes side by side (scripts/test.sh says which), then
## the ten slowest tests. A development cluster that this run had to start
## is stopped at the end. cmd/flashline's test binary, which three lanes
## build, is compiled first, once.
test: build vet check-generated chromium pgbouncer locust workerd
	@$(GO) test -race -c -o /dev/null ./cmd/flashline
	@$(WITH_TEST_DB) scripts/test.sh; $(END_TEST_DB)

## test-short: the inner loop: go test -short, race detector on. The heavy
## tests skip themselves under -short: those that start flashline serve
## processes or PostgreSQL clusters, and the browser tests.
test-short: build
	@$(WITH_TEST_DB) $(GO) test -short -race -count=1 ./...; $(END_TEST_DB)

## chaos: the fault harness's long form (internal/testkit/chaos, TestChaos): three
## serve processes on a PostgreSQL cluster of its own behind toxiproxy (and,
## for the gate-*/redis-* faults, the Redis gate on a redis-server of its own
## behind toxiproxy too, every pause rebuilt and resumed by the harness; for
## the failover-* faults, a primary and a streaming standby of their own,
## reached through a multi-host URL), two minutes of retrying buyers per
## fault with the fault injected every 20 s, every history checked
## (porcupine, accounting, clocks). A random seed, printed; SEED=n replays
## that run's schedule, FAULTS=kill-batch,stall runs some faults only.
## Failing histories land in chaos-out/. `make test` runs the short form
## (every fault once, seed 1, but the long-only failover-async,
## failover-lag and failover-async-lag).
chaos: build
	FLASHLINE_CHAOS=full FLASHLINE_CHAOS_SEED=$(SEED) FLASHLINE_CHAOS_FAULTS=$(FAULTS) \
		$(GO) test -race -count=1 -timeout 120m -run '^TestChaos$$' -v ./internal/testkit/chaos/

## chromium: a browser for the tests in waitroom/waitpage/ (make test needs it);
## pgbouncer: PgBouncer for the pooled deployment's tests (TestNorthlineThroughPgBouncer).
## Each does nothing when the program is on PATH; as root with apt-get, says so
## and installs Debian's package (no other package is upgraded); otherwise says
## how to install it and fails (scripts/need.sh).
chromium:
	@scripts/need.sh "the browser tests in waitroom/waitpage/" chromium $(CHROMIUM_NAMES)

pgbouncer:
	@scripts/need.sh "the tests of the pooled deployment (TestNorthlineThroughPgBouncer)" pgbouncer pgbouncer /usr/sbin/pgbouncer

## locust: Locust for the rehearsal (make rehearse, TestRehearsal): Debian's
## python3-locust, which runs under /usr/bin/python3 whatever python3 is
## first on PATH (scripts/need.sh, as chromium and pgbouncer)
locust:
	@scripts/need.sh "the rehearsal (make rehearse) and its test (TestRehearsal)" python3-locust /usr/bin/locust

## workerd: Cloudflare's Worker runtime, the version waitroom/worker/package.json
## pins, installed from npm into waitroom/worker/node_modules (announced; nothing
## to do when it is there), for the Worker's test and worker-dev (scripts/workerd.sh)
workerd:
	@scripts/workerd.sh

## worker-dev: the waiting room's Worker (waitroom/worker) on workerd at
## 127.0.0.1:PORT (8787) in front of ORIGIN=url[,url...], with this shell's
## FLASHLINE_WAITROOM_KEYS (or the key derived from FLASHLINE_JWT_SECRET) and
## FLASHLINE_JWT_SECRET, as the origins have them
PORT ?= 8787
worker-dev: workerd
	@test -n "$(ORIGIN)" || { echo "worker-dev: say which origin: make worker-dev ORIGIN=http://127.0.0.1:8080 [PORT=8787]" >&2; exit 1; }
	cd waitroom/worker && ORIGINS="$(ORIGIN)" FLASHLINE_WAITROOM_KEYS="$$FLASHLINE_WAITROOM_KEYS" EDGE_ID="$$EDGE_ID" \
		node_modules/.bin/workerd serve config.capnp --socket-addr http=127.0.0.1:$(PORT)

## rehearse: a flash sale rehearsed on Locust (docs/rehearsal.md): USERS
## shoppers (3000) for UNITS units (300) through a waiting room, played by a
## Locust master and WORKERS workers (2) on this machine; at the end the sale
## is checked against what the shoppers saw and the figures printed. Against
## TARGET=url[,url...] (ADMIN_TARGET for the admin API, and the instances'
## secrets in the environment), else an instance and an edge it starts and
## stops: EDGE=worker makes that edge the Worker on workerd (waitroom/worker,
## installed by make workerd); ORIGINS=n (1) starts n instances on the one
## database with that edge in front of them all. VARIANTS=n rehearses a sale of n variants (the
## units split evenly; each shopper reserves one at random and switches when
## it is gone). Locust's CSV and HTML report in OUT (/tmp/flashline-rehearsal).
rehearse: locust
	@USERS=$(USERS) UNITS=$(UNITS) VARIANTS=$(VARIANTS) WORKERS=$(WORKERS) ORIGINS=$(ORIGINS) TARGET=$(TARGET) ADMIN_TARGET=$(ADMIN_TARGET) OUT=$(OUT) EDGE=$(EDGE) scripts/rehearse.sh

## fuzz: every fuzz target for FUZZTIME (default 3s) each
fuzz:
	@scripts/fuzz.sh

## bench: pgbench's per-request ceilings (one hot row at 1/8/32/128 clients,
## 10,000 cold SKUs at 32) vs flashline's hot scenario at the same client
## counts, and the sold-out and waiting-room status answers/s against
## /healthz on the same instance, each as a ratio, in one run; PostgreSQL and
## serve on CPU 0, the generators on CPU 1 (PIN=0: unpinned)
bench:
	@PIN=$(PIN) scripts/bench.sh

## profile: CPU and allocation profiles of serve under the hot and the "no"
## (sold-out, status poll) scenarios, top entries printed; files in
## /tmp/flashline-profile (OUT=...), never in the repository
profile:
	@scripts/profile.sh

devdb-up: build
	@$(BIN) devdb up

devdb-down: build
	@$(BIN) devdb down

## vet: gofmt, go vet, then staticcheck (pinned in scripts/tools/go.mod).
## -modfile makes go tool build staticcheck from the tool module's own
## requirements, which differ from the main module's; staticcheck then loads
## ./... through go list with the main go.mod, as go vet does (-modfile is not
## passed on to it).
vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) tool -modfile=scripts/tools/go.mod staticcheck ./...

## generate: regenerate internal/dbsqlc from sql/queries and migrations (sqlc),
## and internal/apiclient from the OpenAPI document api/openapi.json
## (oapi-codegen)
generate:
	cd sql && $(GO) tool -modfile=../scripts/tools/go.mod sqlc generate
	cd internal/apiclient && $(GO) generate .

## check-generated: fail when the committed generated code is stale (and so
## when the OpenAPI document no longer generates a client that compiles:
## make test builds it)
check-generated:
	cd sql && $(GO) tool -modfile=../scripts/tools/go.mod sqlc diff
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cd internal/apiclient && \
	sed "s|^output: .*|output: $$tmp/client.gen.go|" oapi-codegen.yaml >"$$tmp/config.yaml" && \
	$(GO) tool -modfile=../../scripts/tools/go.mod oapi-codegen -config "$$tmp/config.yaml" ../../api/openapi.json && \
	cmp -s "$$tmp/client.gen.go" client.gen.go || { echo "internal/apiclient/client.gen.go is stale: run make generate" >&2; exit 1; }

clean:
	rm -rf bin
