#!/usr/bin/env bash
# This ops repo's CI: promtool from Debian's prometheus package, then the pack's checks and tests
# on the committed output. Fails when someone changed the config without regenerating.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v promtool >/dev/null 2>&1; then
  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
fi
make check test "$@"
