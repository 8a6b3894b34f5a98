# workerd's configuration for running the Worker here (make worker-dev, and
# the conformance test in worker_test.go): the Worker's modules, its
# variables and secrets read from the environment, and an outbound network
# that may reach an origin on this machine. On Cloudflare, wrangler.toml
# says the same.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .waitroom),
    (name = "origins", network = (allow = ["public", "private", "local"])),
  ],
  # The address is given on the command line: --socket-addr http=127.0.0.1:PORT.
  sockets = [ (name = "http", address = "127.0.0.1:8787", http = (), service = "main") ],
);

const waitroom :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "src/worker.js"),
    (name = "tokens.js", esModule = embed "src/tokens.js"),
    (name = "watermarks.js", esModule = embed "src/watermarks.js"),
    (name = "room.js", esModule = embed "src/room.js"),
    (name = "stream.js", esModule = embed "src/stream.js"),
    (name = "reports.js", esModule = embed "src/reports.js"),
  ],
  compatibilityDate = "2025-09-01",
  bindings = [
    (name = "ORIGINS", fromEnvironment = "ORIGINS"),
    (name = "FLASHLINE_WAITROOM_KEYS", fromEnvironment = "FLASHLINE_WAITROOM_KEYS"),
    (name = "FLASHLINE_JWT_SECRET", fromEnvironment = "FLASHLINE_JWT_SECRET"),
    (name = "EDGE_ID", fromEnvironment = "EDGE_ID"),
  ],
  globalOutbound = "origins",
);
