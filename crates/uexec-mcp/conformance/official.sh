#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
# package.json / package-lock.json) against `uexec mcp --http`, at the 2026-07-28
# requirements, compared with expected-failures.txt by compare.py (see README.md).
#
#   bash crates/uexec-mcp/conformance/official.sh [UEXEC_BINARY]   (default target/release/uexec)
#
# Environment: UEXEC_OFFICIAL_TIMEOUT (seconds for the whole suite run, default 300),
# UEXEC_OFFICIAL_KEEP=1 (keep the results, logs and HOME of a passing run too).
# Exit 0 only when every failing check is listed and every listed check fails.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
UEXEC="$(realpath -m "${1:-$ROOT/target/release/uexec}")"
REQUIREMENTS=2026-07-28
SUITE_TIMEOUT_S="${UEXEC_OFFICIAL_TIMEOUT:-300}"
START_TIMEOUT_S=20

[ -x "$UEXEC" ] || { echo "official.sh: no uexec binary at $UEXEC" >&2; exit 2; }

# 1. Node 22 (the suite needs >= 22; the machine's is 20) and the pinned suite.
PATH="$(bash "$ROOT/.ci/node22.sh"):$PATH"
export PATH
cd "$HERE"
PINNED="$(node -p 'require("./package.json").dependencies["@modelcontextprotocol/conformance"]')"
INSTALLED="$(node -p 'try { require("./node_modules/@modelcontextprotocol/conformance/package.json").version } catch { "" }')"
if [ "$INSTALLED" != "$PINNED" ]; then
  timeout 300 npm ci --silent --no-audit --no-fund >/dev/null
fi
SUITE="$HERE/node_modules/.bin/conformance"
echo "official MCP conformance suite $("$SUITE" --version) (pinned $PINNED), requirements $REQUIREMENTS"

# 2. A scratch directory: the server's HOME (no profile, no transcripts of this user), its
#    log, the suite's log and results. The server dies at exit whatever happens.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/uexec-official.XXXXXX")"
mkdir -p "$WORK/home" "$WORK/results"
SERVER_LOG="$WORK/server.log"
SUITE_LOG="$WORK/suite.log"
SERVER_PID=""
SUITE_PID=""
STATUS=1
finish() {
  [ -z "$SUITE_PID" ] || kill -TERM "$SUITE_PID" 2>/dev/null || true
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [ "$STATUS" -ne 0 ]; then
    echo "---- uexec mcp --http stderr ($SERVER_LOG, last 60 lines) ----" >&2
    tail -n 60 "$SERVER_LOG" >&2 2>/dev/null || true
    echo "---- kept for inspection: $WORK (suite.log, results/*/checks.json) ----" >&2
  elif [ "${UEXEC_OFFICIAL_KEEP:-}" = 1 ]; then
    echo "kept: $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap 'finish' EXIT
trap 'exit 130' INT TERM

# 3. The server on a port the kernel picks (no race with another listener), read back from
#    its start-up line. (The dns-rebinding scenario sends `Origin: http://127.0.0.1:PORT`,
#    the server's own origin, which uexec admits, and a foreign one, which it refuses.)
NO_COLOR=1 HOME="$WORK/home" XDG_STATE_HOME="$WORK/home/.local/state" \
  "$UEXEC" mcp --http 127.0.0.1:0 \
  </dev/null >/dev/null 2>"$SERVER_LOG" &
SERVER_PID=$!
URL=""
for _ in $(seq $((START_TIMEOUT_S * 10))); do
  URL="$(sed -n 's|.*serving streamable HTTP at \(http://127\.0\.0\.1:[0-9]*/mcp\).*|\1|p' "$SERVER_LOG" | head -n 1)"
  [ -n "$URL" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "official.sh: uexec mcp --http exited at start" >&2; exit 1; }
  sleep 0.1
done
[ -n "$URL" ] || { echo "official.sh: uexec mcp --http did not say where it listens in ${START_TIMEOUT_S}s" >&2; exit 1; }
echo "uexec mcp --http at $URL ($UEXEC)"

# 4. One live session, so that resources/list is not empty and the caching scenario reads a
#    resource (uexec's resources are its sessions) instead of skipping that check. Bounded by
#    its own sleep should the server ever leave it behind; the server ends it at exit.
python3 - "$URL" "$((SUITE_TIMEOUT_S + 60))" <<'SEED'
import json, sys, urllib.request
url, seconds = sys.argv[1], sys.argv[2]
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "exec_command", "_meta": meta,
                   "arguments": {"cmd": f"echo seeded; exec sleep {seconds}", "yield_time_ms": 250}}}
request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={
    "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "exec_command"})
with urllib.request.urlopen(request, timeout=30) as response:
    text = response.read().decode()
if "Process running with session ID" not in text:
    sys.exit(f"official.sh: the seed session did not start: {text[:500]}")
SEED

# 5. The suite, bounded as a whole. Its own exit code is non-zero whenever a scored check
#    fails, expected or not, so it decides nothing here but a timeout; compare.py decides.
#    In the background, so that a signal to this script ends the run (and the server) now.
SECONDS=0
timeout --kill-after=10 "$SUITE_TIMEOUT_S" \
  "$SUITE" server --url "$URL" --requirements "$REQUIREMENTS" -o "$WORK/results" \
  </dev/null >"$SUITE_LOG" 2>&1 &
SUITE_PID=$!
SUITE_RC=0
wait "$SUITE_PID" || SUITE_RC=$?
SUITE_PID=""
if [ "$SUITE_RC" -eq 124 ] || [ "$SUITE_RC" -eq 137 ]; then
  echo "official.sh: the suite did not finish in ${SUITE_TIMEOUT_S}s" >&2
  tail -n 40 "$SUITE_LOG" >&2
  exit 1
fi
echo "suite ran in ${SECONDS}s (its exit code $SUITE_RC counts the listed failures too: see below)"
if ! kill -0 "$SERVER_PID" 2>/dev/null; then
  echo "official.sh: uexec mcp --http died during the run" >&2
  exit 1
fi
if ! grep -q "^Running requirements $REQUIREMENTS (" "$SUITE_LOG"; then
  echo "official.sh: the suite did not start its scenarios:" >&2
  tail -n 40 "$SUITE_LOG" >&2
  exit 1
fi

# 6. The verdict.
if python3 "$HERE/compare.py" "$WORK/results" "$HERE/expected-failures.txt" "$SUITE_LOG"; then
  STATUS=0
else
  echo "---- the suite's own report ($SUITE_LOG, from its totals) ----" >&2
  sed -n '/^Total:/,$p' "$SUITE_LOG" >&2
fi
exit "$STATUS"
