#!/usr/bin/env bash
# Smoke test of an installed uexec (the .deb's, in CI): usage: smoke_test.sh /usr/bin/uexec
# A daemon of its own (private runtime dir), stopped at the end; nothing leaves 127.0.0.1.
set -euo pipefail
UEXEC="$1"
fail() { echo "smoke test: $*" >&2; exit 1; }

"$UEXEC" --version | grep -q "^uexec [0-9.]* (build " || fail "--version names no build"
[ -x "$(dirname "$UEXEC")/uexec-engine" ] || fail "no uexec-engine beside $UEXEC"
man -w uexec >/dev/null 2>&1 || [ -e /usr/share/man/man1/uexec.1.gz ] || [ -e /usr/share/man/man1/uexec.1 ] \
  || fail "no man page uexec(1)"
[ -e /usr/share/man/man1/uexec-mcp.1.gz ] || [ -e /usr/share/man/man1/uexec-mcp.1 ] || fail "no uexec-mcp(1)"

RT="$(mktemp -d)"; chmod 700 "$RT"
trap 'XDG_RUNTIME_DIR="$RT" "$UEXEC" daemon --stop >/dev/null 2>&1 || true; rm -rf "$RT"' EXIT
export XDG_RUNTIME_DIR="$RT"

# `uexec run true`: through the daemon it starts, with the command's own exit code.
# (stdin from /dev/null: a run passes its stdin on, and CI may have none open.)
"$UEXEC" run true </dev/null || fail "uexec run true failed"
code=0; "$UEXEC" run -- sh -c 'exit 7' </dev/null || code=$?
[ "$code" = 7 ] || fail "uexec run exited $code, not the command's 7"
"$UEXEC" daemon --status | grep -q "^pid: " || fail "daemon --status shows no daemon"

# `uexec mcp` answers `initialize` on stdin (and exits at stdin's end).
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"smoke","version":"0"}}}'
answer="$(printf '%s\n' "$INIT" | timeout 30 "$UEXEC" mcp)"
printf '%s\n' "$answer" | grep -q '"id":1' || fail "uexec mcp did not answer initialize: $answer"
printf '%s\n' "$answer" | grep -q '"serverInfo"' || fail "uexec mcp's answer has no serverInfo: $answer"
echo "smoke test of $UEXEC: ok"
