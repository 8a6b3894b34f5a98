# Flashline — the two commands a new user needs are `make run` and `make test`.
# Both start a local development PostgreSQL (in ./.devdb, from the server
# binaries on this machine) when DATABASE_URL is unset.

GO      ?= go
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

.PHONY: run test fuzz bench build devdb-up devdb-down generate check-generated vet clean

build:
	$(GO) build -o $(BIN) ./cmd/flashline

## run: the service with a demo sale on http://localhost:8080
run: build
	@url="$(DB_URL)" && test -n "$$url" && DATABASE_URL="$$url" $(BIN) serve --demo

## test: the whole suite against real PostgreSQL, with the race detector,
## then every fuzz target for a few seconds (FUZZTIME, default 3s).
## A development cluster that this run had to start is stopped at the end.
test: build vet check-generated
	@started=; if [ -z "$$DATABASE_URL" ] && ! $(BIN) devdb status >/dev/null 2>&1; then started=1; fi; \
	url="$(DB_URL)" && test -n "$$url" || exit 1; \
	FLASHLINE_TEST_DATABASE_URL="$$url" $(GO) test -race -count=1 -timeout 30m ./...; rc=$$?; \
	if [ -n "$$started" ]; then $(BIN) devdb down; fi; \
	if [ $$rc -eq 0 ]; then scripts/fuzz.sh; rc=$$?; fi; exit $$rc

## fuzz: every fuzz target for FUZZTIME (default 3s) each
fuzz:
	@scripts/fuzz.sh

## bench: pgbench's per-request ceiling on one hot row vs flashline's hot scenario
bench:
	@scripts/bench.sh

devdb-up: build
	@$(BIN) devdb up

devdb-down: build
	@$(BIN) devdb down

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

## generate: regenerate sql/dbsqlc from sql/queries and migrations (sqlc)
generate:
	cd sql && $(GO) tool -modfile=../scripts/tools/go.mod sqlc generate

## check-generated: fail when the committed generated code is stale
check-generated:
	cd sql && $(GO) tool -modfile=../scripts/tools/go.mod sqlc diff

clean:
	rm -rf bin
