#!/usr/bin/env bash
# workerd.sh: makes sure waitroom/worker/node_modules holds workerd, the
# version waitroom/worker/package.json pins (Cloudflare's Worker runtime,
# for the Worker's test and make worker-dev). Nothing to do when it does;
# otherwise says so and installs it from npm (npm ci, from the lock file);
# without npm, says how to get it and fails.
set -euo pipefail
dir=waitroom/worker
want=$(sed -n 's/.*"workerd": "\([^"]*\)".*/\1/p' "$dir/package.json")
have=$(sed -n 's/^  "version": "\([^"]*\)".*/\1/p' "$dir/node_modules/workerd/package.json" 2>/dev/null || true)
if [ -n "$want" ] && [ "$have" = "$want" ] && [ -x "$dir/node_modules/.bin/workerd" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "workerd: the Worker's test (waitroom/worker) needs workerd $want from npm, and npm is not on PATH." >&2
  echo "workerd: install Node.js and npm (Debian/Ubuntu: sudo apt-get install --no-install-recommends npm), then run make test again." >&2
  exit 1
fi
echo "workerd: installing workerd $want from npm into $dir/node_modules for the Worker's test (waitroom/worker) and make worker-dev (npm ci)"
npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
