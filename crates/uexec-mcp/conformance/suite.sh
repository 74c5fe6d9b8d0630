# What official.sh and fixtures.sh share, sourced by both (not run on its own): the pinned
# suite on Node 22, a scratch directory, and a server under test that dies with the script.
# Each function exits the script on failure, with a message naming $SCRIPT.

# Node 22 (the suite needs >= 22; the machine's is 20) and the pinned suite, installed in
# $HERE when node_modules/ does not hold the pinned version; sets PATH, PINNED and SUITE, and
# makes $HERE the working directory.
suite_install() {
  PATH="$(bash "$ROOT/.ci/node22.sh"):$PATH"
  export PATH
  cd "$HERE"
  PINNED="$(node -p 'require("./package.json").dependencies["@modelcontextprotocol/conformance"]')"
  local installed
  installed="$(node -p 'try { require("./node_modules/@modelcontextprotocol/conformance/package.json").version } catch { "" }')"
  if [ "$installed" != "$PINNED" ]; then
    timeout 300 npm ci --silent --no-audit --no-fund >/dev/null
  fi
  SUITE="$HERE/node_modules/.bin/conformance"
}

# scratch PREFIX KEPT: a scratch directory $WORK (with $WORK/results) and the server's log
# $SERVER_LOG in it. At exit the suite run ($SUITE_PID) and the server ($SERVER_PID) are
# stopped, and unless STATUS was set to 0 the server's stderr is shown and $WORK is kept
# (KEPT says what it holds); UEXEC_OFFICIAL_KEEP=1 keeps it on success too.
scratch() {
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")"
  KEPT="$2"
  mkdir -p "$WORK/results"
  SERVER_LOG="$WORK/server.log"
  SERVER_PID=""
  SUITE_PID=""
  STATUS=1
  trap 'suite_finish' EXIT
  trap 'exit 130' INT TERM
}

suite_finish() {
  [ -z "$SUITE_PID" ] || kill -TERM "$SUITE_PID" 2>/dev/null || true
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [ "$STATUS" -ne 0 ]; then
    echo "---- $SERVER_NAME stderr ($SERVER_LOG, last 60 lines) ----" >&2
    tail -n 60 "$SERVER_LOG" >&2 2>/dev/null || true
    echo "---- kept for inspection: $WORK ($KEPT) ----" >&2
  elif [ "${UEXEC_OFFICIAL_KEEP:-}" = 1 ]; then
    echo "kept: $WORK"
  else
    rm -rf "$WORK"
  fi
}

# start_server COMMAND...: runs COMMAND (a server $SERVER_NAME that listens on the port the
# kernel picks and says `serving streamable HTTP at URL` on stderr) with its stderr in
# $SERVER_LOG; sets SERVER_PID and URL once it has said where it listens.
start_server() {
  "$@" </dev/null >/dev/null 2>"$SERVER_LOG" &
  SERVER_PID=$!
  URL=""
  for _ in $(seq $((START_TIMEOUT_S * 10))); do
    URL="$(sed -n 's|.*serving streamable HTTP at \(http://127\.0\.0\.1:[0-9]*/mcp\).*|\1|p' "$SERVER_LOG" | head -n 1)"
    [ -n "$URL" ] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "$SCRIPT: $SERVER_NAME exited at start" >&2; exit 1; }
    sleep 0.1
  done
  echo "$SCRIPT: $SERVER_NAME did not say where it listens in ${START_TIMEOUT_S}s" >&2
  exit 1
}

# run_suite SECONDS LOG ARG...: the suite with ARGs, its output in LOG, bounded by SECONDS;
# in the background, so that a signal to this script ends the run (and the server) now.
# Its exit code (SUITE_RC) is non-zero whenever a check fails, listed or not, so it decides
# nothing but a timeout: then the end of LOG is shown and this fails.
run_suite() {
  local seconds="$1" log="$2"
  shift 2
  timeout --kill-after=10 "$seconds" "$SUITE" "$@" </dev/null >"$log" 2>&1 &
  SUITE_PID=$!
  SUITE_RC=0
  wait "$SUITE_PID" || SUITE_RC=$?
  SUITE_PID=""
  if [ "$SUITE_RC" -eq 124 ] || [ "$SUITE_RC" -eq 137 ]; then
    echo "$SCRIPT: the suite ($*) did not finish in ${seconds}s" >&2
    tail -n 40 "$log" >&2
    return 1
  fi
}
