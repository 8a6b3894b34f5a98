#!/usr/bin/env bash
# need.sh WHAT PACKAGE BINARY...: makes sure one of the BINARYs is on PATH,
# for WHAT (a sentence: what the tests need it for). Nothing to do when one
# is; as root with apt-get, says so and installs Debian's PACKAGE (no other
# package upgraded); otherwise says how to install one and fails.
set -euo pipefail
what=$1 pkg=$2
shift 2
found() {
  for b in "$@"; do command -v "$b" >/dev/null 2>&1 && return 0; done
  return 1
}
found "$@" && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "$pkg: none of $* on PATH; installing Debian's $pkg for $what (apt-get update && apt-get install -y --no-install-recommends $pkg)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update && apt-get install -y --no-install-recommends "$pkg"
  found "$@" && exit 0
  echo "$pkg: apt-get installed $pkg, but none of $* is on PATH" >&2
  exit 1
fi
echo "$pkg: $what need one of $* on PATH." >&2
echo "$pkg: install it (Debian/Ubuntu: sudo apt-get install --no-install-recommends $pkg), then run make test again." >&2
exit 1
