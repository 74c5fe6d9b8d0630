#!/usr/bin/env bash
# MCP round-trip benchmark (not a test): the official MCP Python SDK client calling
# `uexec mcp` and a peer shell MCP server on the same command, next to a plain spawn+wait,
# all in one run. Needs a release build: cargo build --release -p uexec.
# usage: bench/run.sh [--runs N] [--pause-ms MS] [--paused-runs N] [--without-cgroups] [--sandboxed] [--burst N] [--spacing-only]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH_DIR="${UEXEC_BENCH_DIR:-.bench}"
mkdir -p "$BENCH_DIR"
if [ ! -x "$BENCH_DIR/venv/bin/python" ]; then
  python3 -m venv "$BENCH_DIR/venv"
fi
"$BENCH_DIR/venv/bin/python" -m pip install --quiet --disable-pip-version-check mcp==2.3.0 anyio==4.16.0
if [ ! -f "$BENCH_DIR/npm/node_modules/mcp-server-commands/build/index.js" ]; then
  mkdir -p "$BENCH_DIR/npm"
  (cd "$BENCH_DIR/npm" && npm install --silent --no-audit --no-fund mcp-server-commands@0.5.0 >/dev/null)
fi
exec "$BENCH_DIR/venv/bin/python" bench/mcp_roundtrip.py \
  --uexec target/release/uexec \
  --peer "node $(cd "$BENCH_DIR" && pwd)/npm/node_modules/mcp-server-commands/build/index.js" "$@"
