#!/usr/bin/env python3
"""Run the Codex oracle on Codex's exec server and on `uexec serve`, and compare what Codex saw.

The oracle (shared/oracle/run_codex.py) drives the real Codex CLI through scripted
exec_command / write_stdin calls. With --exec-server-cmd every command runs on the given exec
server, so running it twice -- once on `codex exec-server`, once on `uexec serve` -- and
comparing the results shows whether uexec's server is a drop-in replacement for Codex's.

Compared, per scenario and call (step):
  * snapshot or error; exit code; running or not (a session id, whatever its value);
  * the output, with run-specific values masked (ports, UUIDs, mkdtemp suffixes); output that
    differs only in line order is reported but is not a difference (stdout and stderr are read
    concurrently by both servers: their interleaving is a race), unless --strict-order;
  * the original token count, when the raw outputs are equal;
  * errors by kind (unknown process, stdin closed, spawn: not found / permission denied /
    other, ...); differing texts of the same kind are reported as notes;
  * per command item Codex reported: command, exit code, status, aggregated output;
  * processes left behind (besides the exec server itself);
  * whether the scenario's own expectations held.
Not compared: chunk ids, session id values, wall times (timing).

Differences uexec makes on purpose (SPEC's [beyond] items) are listed in INTENDED with the
reason; they are reported, but are not differences.

Exit status: 0 same, 1 different, 2 the oracle could not run.

  python3 crates/uexec-server/interop/oracle_compare.py                 # run both, compare
  python3 crates/uexec-server/interop/oracle_compare.py --results A B   # compare two result dirs

Environment: CODEX_BIN (or UEXEC_CODEX_BIN) the codex binary; UEXEC_BIN the uexec binary
(default target/release/uexec); UEXEC_ORACLE_DIR the oracle (default ../shared/oracle).
Python 3.9+, standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[2]
DEFAULT_CODEX = Path("/tmp/codexpeer/node_modules/@openai/codex-linux-x64/vendor/"
                     "x86_64-unknown-linux-musl/bin/codex")
SIDES = ("codex", "uexec")

# Values that differ from run to run, whichever server runs the command.
MASKS = [
    (re.compile(r"ws://127\.0\.0\.1:\d+"), "ws://127.0.0.1:PORT"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "UUID"),
    # tempfile.mkdtemp: prefix + 8 characters of [a-z0-9_].
    (re.compile(r"(/tmp/[\w.-]*?[-_])[a-z0-9_]{8}(?![\w.-])"), r"\1XXXXXXXX"),
]
NUMBER = re.compile(r"\d+")

# (scenario, fact, codex value, uexec value, why): differences uexec makes on purpose.
INTENDED = [
    ("x_signal_exit_codes", "step 1 exec_command exit_code", 1, 137,
     "SPEC 2 [beyond]: killed by signal N is 128 + N on a PTY too; Codex's PTY path reports 1"),
    ("x_signal_exit_codes", "item 1 exit_code", 1, 137, "the same exit, as Codex's item reports it"),
]

# Error kinds, first match wins (texts are Codex's or the exec server's words).
ERROR_KINDS = [
    ("unknown_process", re.compile(r"Unknown process id")),
    ("stdin_closed", re.compile(r"stdin is closed")),
    ("spawn_not_found", re.compile(r"(?s)(Failed to create|CreateProcess).*No such file or directory")),
    ("spawn_permission_denied", re.compile(r"(?s)(Failed to create|CreateProcess).*Permission denied")),
    ("spawn_failed", re.compile(r"Failed to create|CreateProcess")),
    ("shell_refused", re.compile(r"only supports")),
    ("invalid_arguments", re.compile(r"invalid arguments|invalid params", re.I)),
]


def error_kind(text: str | None) -> str | None:
    if text is None:
        return None
    for kind, pattern in ERROR_KINDS:
        if pattern.search(text):
            return kind
    return "other"


def mask(text: str | None) -> str | None:
    if text is None:
        return None
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


# --------------------------------------------------------------------------
# Facts


def call_facts(call: dict[str, Any]) -> dict[str, Any]:
    parsed = call.get("parsed") or {}
    if call.get("format") == "exec":
        return {
            "tool": call.get("name"),
            "kind": "snapshot",
            "exit_code": parsed.get("exit_code"),
            "running": parsed.get("session_id") is not None,
            "output": mask(parsed.get("output")),
            "raw_output": parsed.get("output"),
            "original_token_count": parsed.get("original_token_count"),
        }
    text = call.get("error_text") or call.get("output_text") or call.get("harness_error") or ""
    text = NUMBER.sub("N", mask(text) or "")
    return {"tool": call.get("name"), "kind": "error", "error": error_kind(text), "error_text": text}


def scenario_facts(result: dict[str, Any]) -> dict[str, Any]:
    items = []
    for entry in result.get("exec_json_events") or []:
        event = entry.get("event") or {}
        item = event.get("item") or {}
        if event.get("type") == "item.completed" and item.get("type") == "command_execution":
            items.append({
                "command": mask(item.get("command")),
                "exit_code": item.get("exit_code"),
                "status": item.get("status"),
                "aggregated_output": mask(item.get("aggregated_output")),
            })
    leftovers = sorted(
        mask(p.get("cmdline")) or ""
        for p in result.get("codex", {}).get("leftover_processes") or []
        if " exec-server " not in f" {p.get('cmdline', '')} " and "uexec serve" not in p.get("cmdline", "")
    )
    return {
        "calls": {c["step"]: call_facts(c) for c in result.get("calls") or []},
        "items": items,
        "leftover_processes": leftovers,
        "expectations_met": result.get("all_expectations_met"),
        "codex_exit": result.get("codex", {}).get("exit_code"),
    }


# --------------------------------------------------------------------------
# Comparison


def same_lines(a: str, b: str) -> bool:
    return sorted(a.splitlines()) == sorted(b.splitlines())


def compare_text(what: str, a: str | None, b: str | None, strict: bool,
                 diffs: list[str], notes: list[str]) -> None:
    if a == b:
        return
    if a is not None and b is not None and not strict and same_lines(a, b):
        notes.append(f"{what}: same lines in another order (stdout/stderr interleaving)")
        return
    diffs.append(f"{what}:\n{text_diff(a, b)}")


def text_diff(a: str | None, b: str | None) -> str:
    import difflib
    if a is None or b is None:
        return f"      codex: {a!r}\n      uexec: {b!r}"
    lines = difflib.unified_diff(a.splitlines(), b.splitlines(), "codex", "uexec", lineterm="", n=1)
    return "\n".join("      " + line for line in list(lines)[:40])


def compare_scenario(facts: dict[str, dict[str, Any]], strict: bool) -> tuple[list[str], list[str]]:
    a, b = facts["codex"], facts["uexec"]
    diffs: list[str] = []
    notes: list[str] = []
    facts_of_steps(a, b, strict, diffs, notes)
    return diffs, notes


def facts_of_steps(a: dict[str, Any], b: dict[str, Any], strict: bool,
                   diffs: list[str], notes: list[str]) -> None:
    for key in ("codex_exit", "expectations_met", "leftover_processes"):
        if a[key] != b[key]:
            diffs.append(f"{key}: codex {a[key]!r} | uexec {b[key]!r}")
    for step in sorted(set(a["calls"]) | set(b["calls"])):
        ca, cb = a["calls"].get(step), b["calls"].get(step)
        if ca is None or cb is None:
            diffs.append(f"step {step}: codex {ca!r} | uexec {cb!r}")
            continue
        label = f"step {step} {ca.get('tool')}"
        for key in ("kind", "exit_code", "running", "error"):
            if ca.get(key) != cb.get(key):
                diffs.append(f"{label} {key}: codex {ca.get(key)!r} | uexec {cb.get(key)!r}")
        if ca["kind"] == cb["kind"] == "error" and ca["error_text"] != cb["error_text"]:
            notes.append(f"{label}: same error kind, other words:\n{text_diff(ca['error_text'], cb['error_text'])}")
        if ca["kind"] == cb["kind"] == "snapshot":
            compare_text(f"{label} output", ca["output"], cb["output"], strict, diffs, notes)
            if ca["raw_output"] == cb["raw_output"] and \
                    ca["original_token_count"] != cb["original_token_count"]:
                diffs.append(f"{label} original_token_count: codex {ca['original_token_count']} "
                             f"| uexec {cb['original_token_count']}")
    if len(a["items"]) != len(b["items"]):
        diffs.append(f"command items: codex {len(a['items'])} | uexec {len(b['items'])}")
    for i, (ia, ib) in enumerate(zip(a["items"], b["items"])):
        for key in ("command", "exit_code", "status"):
            if ia[key] != ib[key]:
                diffs.append(f"item {i} {key}: codex {ia[key]!r} | uexec {ib[key]!r}")
        kinds = (error_kind(ia["aggregated_output"]), error_kind(ib["aggregated_output"]))
        if ia["status"] == "failed" and kinds[0] == kinds[1] and kinds[0] != "other":
            # A failed spawn: its output is the error; compared by kind above.
            if ia["aggregated_output"] != ib["aggregated_output"]:
                notes.append(f"item {i}: same error kind ({kinds[0]}), other words")
            continue
        compare_text(f"item {i} aggregated_output", ia["aggregated_output"],
                     ib["aggregated_output"], strict, diffs, notes)


def split_intended(scenario: str, diffs: list[str]) -> tuple[list[str], list[str]]:
    """Moves the differences uexec makes on purpose out of `diffs`, into notes."""
    kept, intended = [], []
    for line in diffs:
        why = next((why for name, fact, a, b, why in INTENDED
                    if name == scenario and line == f"{fact}: codex {a!r} | uexec {b!r}"), None)
        if why is None:
            kept.append(line)
        else:
            intended.append(f"intended: {line} ({why})")
    return kept, intended


def compare_dirs(dirs: dict[str, Path], strict: bool) -> int:
    names = sorted({p.stem for side in SIDES for p in dirs[side].glob("*.json")})
    if not names:
        print(f"no results in {dirs['codex']} or {dirs['uexec']}", file=sys.stderr)
        return 2
    different = 0
    for name in names:
        facts = {}
        for side in SIDES:
            path = dirs[side] / f"{name}.json"
            if not path.exists():
                print(f"{name}: DIFFERENT\n  no {side} result ({path})")
                different += 1
                break
            facts[side] = scenario_facts(json.loads(path.read_text(encoding="utf-8")))
        else:
            diffs, notes = compare_scenario(facts, strict)
            diffs, intended = split_intended(name, diffs)
            notes = intended + notes
            calls = len(facts["codex"]["calls"])
            print(f"{name}: {'DIFFERENT' if diffs else 'same'} ({calls} calls)")
            for line in diffs:
                print(f"  {line}")
            for line in notes:
                print(f"  note: {line}")
            different += bool(diffs)
    print(f"\n{len(names) - different} of {len(names)} scenarios the same on both servers")
    return 1 if different else 0


# --------------------------------------------------------------------------
# Running the oracle


def run_oracle(oracle: Path, codex: Path, server_cmd: str, scenarios: list[str],
               out_dir: Path, timeout_s: float) -> bool:
    cmd = [sys.executable, str(oracle / "run_codex.py"), *scenarios, "--codex", str(codex),
           "--out-dir", str(out_dir), "--exec-server-cmd", server_cmd]
    print(f"$ {shlex.join(cmd)}", file=sys.stderr)
    env = dict(os.environ, CODEX_BIN=str(codex))
    try:
        proc = subprocess.run(cmd, env=env, cwd=REPO_ROOT, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"the oracle did not finish within {timeout_s} s", file=sys.stderr)
        return False
    # A non-zero exit means a harness problem or Codex failing; the comparison still shows it.
    return proc.returncode == 0 or any(out_dir.glob("*.json"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--codex", default=os.environ.get("CODEX_BIN")
                    or os.environ.get("UEXEC_CODEX_BIN") or str(DEFAULT_CODEX),
                    help="codex binary (default: $CODEX_BIN, $UEXEC_CODEX_BIN, or the npm install "
                         "under /tmp/codexpeer)")
    ap.add_argument("--uexec", default=os.environ.get("UEXEC_BIN")
                    or str(REPO_ROOT / "target" / "release" / "uexec"),
                    help="uexec binary (default: $UEXEC_BIN or target/release/uexec)")
    ap.add_argument("--oracle-dir", default=os.environ.get("UEXEC_ORACLE_DIR")
                    or str(REPO_ROOT.parent / "shared" / "oracle"))
    ap.add_argument("--scenario", action="append",
                    help="scenario file (repeatable; default: every scenario of the oracle and of "
                         "interop/scenarios)")
    ap.add_argument("--out-dir", help="keep results here (<dir>/codex, <dir>/uexec)")
    ap.add_argument("--results", nargs=2, metavar=("CODEX_DIR", "UEXEC_DIR"),
                    help="compare existing result folders instead of running the oracle")
    ap.add_argument("--strict-order", action="store_true",
                    help="count output whose lines only differ in order as different")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per oracle run")
    args = ap.parse_args()

    if args.results:
        return compare_dirs(dict(zip(SIDES, map(Path, args.results))), args.strict_order)

    oracle = Path(args.oracle_dir)
    codex, uexec = Path(args.codex), Path(args.uexec)
    for what, path in (("oracle", oracle / "run_codex.py"), ("codex", codex), ("uexec", uexec)):
        if not path.exists():
            print(f"{what} not found: {path}", file=sys.stderr)
            return 2
    scenarios = args.scenario or sorted(
        str(p) for folder in (oracle / "scenarios", HERE / "scenarios") for p in folder.glob("*.json"))
    out = Path(args.out_dir) if args.out_dir else Path(tempfile.mkdtemp(prefix="oracle-compare-"))
    servers = {
        "codex": f"{shlex.quote(str(codex))} exec-server --listen ws://127.0.0.1:0",
        "uexec": f"{shlex.quote(str(uexec))} serve --listen ws://127.0.0.1:0",
    }
    dirs = {side: out / side for side in SIDES}
    for side in SIDES:
        if not run_oracle(oracle, codex, servers[side], scenarios, dirs[side], args.timeout):
            return 2
    print(f"results in {out}", file=sys.stderr)
    return compare_dirs(dirs, args.strict_order)


if __name__ == "__main__":
    sys.exit(main())
