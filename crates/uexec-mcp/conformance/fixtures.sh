#!/usr/bin/env bash
# The official MCP conformance suite's tasks-* scenarios (the io.modelcontextprotocol/tasks
# extension, SEP-2663) against the fixture server examples/conformance_fixtures.rs, which
# serves the suite's fixture tools through uexec's own task machinery; compared with
# fixtures-expected-failures.txt by fixtures_report.py (see README.md).
#
#   bash crates/uexec-mcp/conformance/fixtures.sh [FIXTURES_BINARY]
#
# Without FIXTURES_BINARY it builds the example (`cargo build -p uexec-mcp --example
# conformance_fixtures`, in the debug profile unless UEXEC_FIXTURES_PROFILE=release) into
# $CARGO_TARGET_DIR (default target/).
# Environment: UEXEC_FIXTURES_TIMEOUT (seconds for each scenario, default 120),
# UEXEC_OFFICIAL_KEEP=1 (keep the results and logs of a passing run too).
# Exit 0 only when every failing check is listed and every listed check fails.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
PROFILE="${UEXEC_FIXTURES_PROFILE:-debug}"
SCENARIO_TIMEOUT_S="${UEXEC_FIXTURES_TIMEOUT:-120}"
START_TIMEOUT_S=20

# 1. The fixture server.
if [ $# -ge 1 ]; then
  FIXTURES="$(realpath -m "$1")"
else
  case "$PROFILE" in
    release) PROFILE_FLAG=(--release) ;;
    debug) PROFILE_FLAG=() ;;
    *) echo "fixtures.sh: UEXEC_FIXTURES_PROFILE is debug or release, not $PROFILE" >&2; exit 2 ;;
  esac
  SECONDS=0
  (cd "$ROOT" && cargo build --quiet "${PROFILE_FLAG[@]}" -p uexec-mcp --example conformance_fixtures)
  echo "built conformance_fixtures ($PROFILE) in ${SECONDS}s"
  FIXTURES="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE/examples/conformance_fixtures"
fi
[ -x "$FIXTURES" ] || { echo "fixtures.sh: no conformance_fixtures binary at $FIXTURES" >&2; exit 2; }

# 2. Node 22 and the pinned suite (suite.sh).
SCRIPT=fixtures.sh
SERVER_NAME=conformance_fixtures
# shellcheck source=suite.sh
. "$HERE/suite.sh"
suite_install
# Every tasks-* server scenario the suite has (an extension: each runs on the 2026-07-28 wire).
mapfile -t SCENARIOS < <("$SUITE" list --server | sed -n 's/^ *- \(tasks-[a-z0-9-]*\).*/\1/p')
[ "${#SCENARIOS[@]}" -gt 0 ] || { echo "fixtures.sh: the suite lists no tasks-* scenario" >&2; exit 1; }
echo "official MCP conformance suite $("$SUITE" --version) (pinned $PINNED): ${#SCENARIOS[@]} tasks-* scenarios"

# 3. A scratch directory for the server's log, each scenario's log and the results. The
#    server dies at exit whatever happens.
scratch uexec-fixtures "logs/*.log, results/*/checks.json"
mkdir -p "$WORK/logs"

# 4. The server on a port the kernel picks, read back from its start-up line.
start_server "$FIXTURES" --http 127.0.0.1:0
echo "conformance_fixtures at $URL ($FIXTURES)"

# 5. Each scenario on its own, bounded (run_suite: its exit code decides nothing but a
#    timeout, which fails the run; fixtures_report.py decides the rest, and names a
#    scenario that left no results).
SECONDS=0
TIMED_OUT=()
for scenario in "${SCENARIOS[@]}"; do
  run_suite "$SCENARIO_TIMEOUT_S" "$WORK/logs/$scenario.log" \
    server --url "$URL" --scenario "$scenario" -o "$WORK/results" || TIMED_OUT+=("$scenario")
  kill -0 "$SERVER_PID" 2>/dev/null || { echo "fixtures.sh: conformance_fixtures died during $scenario" >&2; exit 1; }
done
echo "scenarios ran in ${SECONDS}s"

# 6. The verdict.
TIMED_OUT_LIST="$(IFS=,; echo "${TIMED_OUT[*]}")"
if python3 "$HERE/fixtures_report.py" "$WORK/results" "$HERE/fixtures-expected-failures.txt" \
  "--timed-out=$TIMED_OUT_LIST" "${SCENARIOS[@]}"; then
  STATUS=0
fi
exit "$STATUS"
