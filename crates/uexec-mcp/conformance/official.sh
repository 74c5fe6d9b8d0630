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

# 1. Node 22 and the pinned suite (suite.sh).
SCRIPT=official.sh
SERVER_NAME="uexec mcp --http"
# shellcheck source=suite.sh
. "$HERE/suite.sh"
suite_install
echo "official MCP conformance suite $("$SUITE" --version) (pinned $PINNED), requirements $REQUIREMENTS"

# 2. A scratch directory: the server's HOME (no profile, no transcripts of this user), its
#    log, the suite's log and results. The server dies at exit whatever happens.
scratch uexec-official "suite.log, results/*/checks.json"
mkdir -p "$WORK/home"
SUITE_LOG="$WORK/suite.log"

# 3. The server on a port the kernel picks (no race with another listener), read back from
#    its start-up line. (The dns-rebinding scenario sends `Origin: http://127.0.0.1:PORT`,
#    the server's own origin, which uexec admits, and a foreign one, which it refuses.)
start_server env NO_COLOR=1 HOME="$WORK/home" XDG_STATE_HOME="$WORK/home/.local/state" \
  "$UEXEC" mcp --http 127.0.0.1:0
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

# 5. The suite, bounded as a whole (run_suite: its exit code decides nothing but a timeout;
#    compare.py decides).
SECONDS=0
run_suite "$SUITE_TIMEOUT_S" "$SUITE_LOG" server --url "$URL" --requirements "$REQUIREMENTS" \
  -o "$WORK/results" || exit 1
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
