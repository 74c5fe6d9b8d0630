#!/usr/bin/env bash
# uexec mcp through the real clients (Claude Code headless and interactive on a pseudo-
# terminal, over stdio and HTTP; Codex 0.171.0; the MCP Inspector CLI), the agents against a
# scripted mock model on 127.0.0.1: see README.md beside this file. Installs what it needs
# (Node 22, the harness's npm packages, Codex), then runs harness.py in a network namespace
# where only loopback is up, when the machine allows one. Exit 0 only if every check passed.
#   bash crates/uexec-mcp/agents/run.sh [--server "PATH/uexec mcp ..."]
#        [--agent claude|codex|claude-interactive|inspector|ts-sdk|all] [--transport stdio|http] [--variant FLAG]...
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"

# The checks themselves first, on recorded texts (a check that cannot fail shows here).
(cd "$HERE" && python3 -B -m unittest -q test_scenarios test_terminal)

# Node 22 first in PATH: Claude Code's package wants it, tokens.mjs runs on it.
PATH="$(bash "$REPO/.ci/node22.sh"):$PATH"
export PATH

# The harness's own npm packages (Claude Code, the MCP Inspector, the two tokenizers), as locked.
if [ ! -f "$HERE/node_modules/.package-lock.json" ] || [ "$HERE/package-lock.json" -nt "$HERE/node_modules/.package-lock.json" ]; then
  (cd "$HERE" && npm ci --silent --no-audit --no-fund >/dev/null)
fi

want_codex=1 want_claude=1
prev=""
for arg in "$@"; do
  case "$prev=$arg" in
    --agent=claude | *=--agent=claude | --agent=claude-interactive | *=--agent=claude-interactive) want_codex=0 ;;
    --agent=codex | *=--agent=codex) want_claude=0 ;;
    --agent=inspector | *=--agent=inspector | --agent=ts-sdk | *=--agent=ts-sdk) want_codex=0 want_claude=0 ;;
  esac
  prev="$arg"
done
# Codex 0.171.0: the one CI installed (UEXEC_CODEX_BIN), else the same install as .ci/run's.
if [ "$want_codex" = 1 ] && [ -z "${UEXEC_CODEX_BIN:-}" ]; then
  CODEX_DIR="${UEXEC_CODEX_DIR:-$REPO/.codex-peer}"
  UEXEC_CODEX_BIN="$CODEX_DIR/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
  if [ ! -x "$UEXEC_CODEX_BIN" ]; then
    mkdir -p "$CODEX_DIR"
    (cd "$CODEX_DIR" && npm install --silent --no-audit --no-fund @openai/codex@0.171.0 >/dev/null)
  fi
fi
export UEXEC_CODEX_BIN="${UEXEC_CODEX_BIN:-}"
# Say which agents run (and fail here if npm left Claude Code's placeholder instead of its binary).
[ "$want_claude" = 0 ] || echo "claude $("$HERE/node_modules/.bin/claude" --version)" >&2
[ "$want_codex" = 0 ] || "$UEXEC_CODEX_BIN" --version >&2

run=(python3 "$HERE/harness.py" "$@")
if command -v unshare >/dev/null && command -v ip >/dev/null; then
  for flags in -n -rn; do
    if unshare $flags true 2>/dev/null; then
      exec unshare $flags -- sh -c 'ip link set lo up && exec "$@"' sh "${run[@]}"
    fi
  done
fi
echo "warning: no network namespace here: the agents are kept to 127.0.0.1 by their configuration and a dead proxy only" >&2
exec "${run[@]}"
