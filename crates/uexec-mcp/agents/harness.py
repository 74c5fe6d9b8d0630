#!/usr/bin/env python3
"""uexec mcp through the real agents: Claude Code headless and Codex, each against a scripted
mock model on 127.0.0.1, checking what the agent hands back to the model for every call.

Flow:

1. For each agent, server command (--server, and each --variant of it) and scenario: start the mock model (mock_model.py), start the agent with uexec as its MCP
   server (agents.py), let the script play, and stop the agent at the timeout if need be.
2. After the agent exited, a scenario with a survivor marker waits (deadline) for every
   process carrying the marker to be gone, reports those still there and kills them.
3. Count the tokens of every handed-back text (tokens.mjs, offline), run each call's checks
   (scenarios.py) and print one table, then the handed-back texts themselves.
4. Exit 0 only if every check of every call passed and every agent run ended on its own.

Run it through run.sh, which installs the agents and enters a network namespace.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from inspector import run_inspector, stop_inspector_servers  # noqa: E402
from agents import _server_argv, kill_leftover_group, run_agent, run_claude_tty, stop_daemon, stop_group  # noqa: E402
from approval import approval_scenarios, write_files  # noqa: E402
from mock_model import Anthropic, Call, MockModel, Record, Responses  # noqa: E402
from scenarios import Scenario, all_scenarios  # noqa: E402

REPO = HERE.parent.parent.parent
SURVIVOR_DEADLINE_S = 10.0


@dataclass
class Row:
    agent: str
    server: str
    scenario: str
    call: str
    record: Record | None
    failures: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    tokens: dict[str, int] | None = None
    # Why this row is known to fail (a scenario's expected_failure): its failures do not count.
    expected: str | None = None


def processes_with(marker: str) -> list[tuple[int, str]]:
    """Live processes whose command line or environment carries the marker."""
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
            try:
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    environ = fh.read()
            except OSError:
                environ = b""
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline or marker.encode() in environ:
            found.append((int(entry), cmdline.replace(b"\0", b" ").decode("utf-8", "replace").strip()))
    return found


def survivors_after(marker: str) -> list[tuple[int, str]]:
    deadline = time.monotonic() + SURVIVOR_DEADLINE_S
    while True:
        left = processes_with(marker)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def play(agent: str, binary: str, server: str, sc: Scenario, args: argparse.Namespace) -> tuple[list[Row], dict]:
    """One scenario through one agent: `claude`, `codex`, or interactive Claude Code over a
    transport (`claude-tty/stdio`, `claude-tty/http`)."""
    dialect = Responses if agent == "codex" else Anthropic
    # The scenario's files (rules, hooks) and the server's flags for them.
    write_files(sc)
    label, server = server, " ".join([server, *map(shlex.quote, sc.server_flags)])
    timeout = min(args.timeout, sc.timeout or args.timeout)
    mock = MockModel(dialect, sc.calls).start()
    tty_notes: list[str] = []
    if agent.startswith("claude-tty"):
        transport = agent.split("/", 1)[1]
        run = run_claude_tty(binary, server, transport, mock, sc.prompt, timeout, sc.screen_steps,
                             sc.claude_tools)
        http = run.http
        if http is not None and sc.survivor_marker:
            # Over HTTP the sessions live in the server, which outlives the agent here: say what
            # ran on after the agent left, then stop the server and require nothing after it.
            left = processes_with(sc.survivor_marker)
            tty_notes.append(f"{len(left)} marked process(es) still ran in the HTTP server once Claude Code had exited")
        if http is not None:
            stop_group(http)
    else:
        run = run_agent(agent, binary, server, mock.port, sc.prompt, timeout, sc.claude_tools)
    survivors = survivors_after(sc.survivor_marker) if sc.survivor_marker else []
    kill_leftover_group(run.pid)
    in_daemon = stop_daemon(server, run.tmp)
    mock.stop()
    # What the run left, read once the agent and its daemon are gone: the scenario's files and
    # the record `uexec audit` reads under the run's HOME.
    after = [(check.__name__, check(sc.directory, Path(run.tmp) / "home", _server_argv(server)[0]))
             for check in sc.after] if run.tmp else []
    if not args.keep:
        shutil.rmtree(run.tmp, ignore_errors=True)
    server = label
    rows = []
    for i, call in enumerate(sc.calls):
        rec = mock.records[i] if i < len(mock.records) else None
        row = Row(agent, server, sc.name, f"{i + 1}. {call.tool} {call.label}", rec)
        if rec is None or rec.text is None:
            row.failures.append("the agent handed nothing back")
        else:
            for check in sc.checks[i]:
                problem = check(rec.text)
                (row.failures if problem else row.passed).append(f"{check.__name__}: {problem}" if problem else check.__name__)
        rows.append(row)
    run_row = Row(agent, server, sc.name, "(the agent run)", None)
    for problem in getattr(run, "problems", []):
        run_row.failures.append(f"tty: {problem}")
    if run.timed_out:
        run_row.failures.append(f"timed out after {timeout:.0f} s")
    elif run.rc != 0:
        run_row.failures.append(f"agent exit code {run.rc}")
    else:
        run_row.passed.append("agent exit 0")
    if mock.errors:
        run_row.failures += [f"mock: {e}" for e in mock.errors]
    for name, problem in after:
        (run_row.failures if problem else run_row.passed).append(f"{name}: {problem}" if problem else name)
    if not mock.finished.is_set():
        run_row.failures.append("the script did not reach its end")
    if sc.secret:
        if any(sc.secret in json.dumps(body) for body in mock.requests):
            run_row.failures.append("the secret reached the model")
        else:
            run_row.passed.append("the secret never reached the model")
    if sc.offered_checks:
        # The first request that offers uexec's tools (some of an agent's requests offer none).
        offers_uexec = (dialect.offered(b) for b in mock.requests)
        offered = next((o for o in offers_uexec if any("uexec" in name for name in o)), [])
        for check in sc.offered_checks:
            problem = check(offered)
            (run_row.failures if problem else run_row.passed).append(
                f"{check.__name__}: {problem}" if problem else check.__name__)
    # A plain `uexec mcp` keeps its sessions in the daemon: it must have used one (it would
    # serve in-process, saying why on stderr, if none could start).
    wants_daemon = not any(flag in server.split() for flag in ("--in-process", "--daemon=false", "--http")) \
        and not agent.endswith("/http")
    if wants_daemon:
        if in_daemon:
            run_row.passed.append("in the daemon")
        else:
            run_row.failures.append("no uexec daemon ran: the server kept its sessions in-process")
    if sc.survivor_marker:
        if survivors:
            run_row.failures.append(f"{len(survivors)} process(es) outlived the agent: "
                                    + "; ".join(f"{pid} {cmd[:60]}" for pid, cmd in survivors))
        else:
            run_row.passed.append("nothing outlived the agent")
    rows.append(run_row)
    if sc.expected_failure:
        # A known gap: its failures are shown, not counted; once it passes, the mark must go.
        if any(r.failures for r in rows):
            for r in rows:
                r.expected = sc.expected_failure
        else:
            run_row.failures.append(f"XPASS: every check passed, but the scenario is marked as failing "
                                    f"({sc.expected_failure}): remove the mark")
    info = {"agent": agent, "server": server, "scenario": sc.name, "seconds": round(run.seconds, 2),
            "rc": run.rc, "timed_out": run.timed_out, "tmp": run.tmp if args.keep else None,
            "searches": len(mock.searches), "requests": len(mock.requests),
            "stderr_tail": run.stderr[-1500:] if run_row.failures else ""}
    if agent.startswith("claude-tty") and run_row.failures:
        # Claude Code's debug log: its MCP lines and errors say why; the screen says the rest.
        mcp_lines = [ln for ln in run.stderr.splitlines() if "MCP" in ln or "ERROR" in ln]
        info["stderr_tail"] = "\n".join(mcp_lines[-12:]) + "\nscreen at the end:\n" + "\n".join(
            ln for ln in getattr(run, "screen", "").splitlines()[-25:] if ln.strip())
    if agent.startswith("claude-tty"):
        info.update({"steps": getattr(run, "steps_done", []), "notes": tty_notes,
                     "screen": getattr(run, "screen", ""), "screens": getattr(run, "screens", [])})
    if args.dump_requests:
        info["requests_bodies"] = mock.requests
    return rows, info


def count_tokens(rows: list[Row], node: str) -> None:
    texts = [r.record.text for r in rows if r.record and r.record.text is not None]
    if not texts:
        return
    try:
        proc = subprocess.run([node, str(HERE / "tokens.mjs")], input=json.dumps(texts), capture_output=True,
                              text=True, timeout=120, cwd=HERE)
    except subprocess.TimeoutExpired:
        print("token counting took over 120 s: no token figures", file=sys.stderr)
        return
    if proc.returncode != 0:
        print(f"token counting failed: {proc.stderr.strip()[:500]}", file=sys.stderr)
        return
    counts = iter(json.loads(proc.stdout))
    for r in rows:
        if r.record and r.record.text is not None:
            r.tokens = next(counts)


def visible(text: str) -> str:
    """The text as the model reads it, control characters but the line feed shown as symbols
    (a carriage return is U+240D), so that a real CR and a JSON-escaped `\\r` differ."""
    return "".join(ch if ch == "\n" or ch >= " " else chr(0x2400 + ord(ch)) for ch in text)


def print_report(rows: list[Row], full: bool) -> None:
    servers = list(dict.fromkeys(r.server for r in rows))
    label = {s: (f"S{i + 1}" if len(servers) > 1 else "") for i, s in enumerate(servers)}
    for s in servers:
        if label[s]:
            print(f"{label[s]} = {s}")
    head = f"{'agent':<17}{'srv':<4}{'scenario':<16}{'call':<34}{'o200k':>6}{'claude':>7}  result"
    print(head)
    print("-" * len(head))
    for r in rows:
        tok = r.tokens or {}
        result = "PASS" if not r.failures else ("XFAIL " if r.expected else "FAIL ") + ", ".join(
            f.split(":")[0] for f in r.failures)
        print(f"{r.agent:<17}{label[r.server]:<4}{r.scenario:<16}{r.call[:33]:<34}"
              f"{tok.get('o200k', ''):>6}{tok.get('claude', ''):>7}  {result}")
    totals: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        if r.tokens:
            t = totals.setdefault((r.agent, r.server), [0, 0, 0])
            t[0] += r.tokens["o200k"]
            t[1] += r.tokens["claude"]
            t[2] += 1
    for (agent, server), (o200k, claude, n) in totals.items():
        print(f"tokens handed back, {agent} {label[server] or server}: {n} results, o200k {o200k}, claude {claude}")
    print("\nWhat each agent handed back to the model (verbatim; a CR shows as \u240d):")
    for r in rows:
        if r.record is None:
            if r.failures:
                print(f"- {r.agent} {label[r.server]} {r.scenario} {r.call}: " + "; ".join(r.failures))
            continue
        print(f"- {r.agent} {label[r.server]} {r.scenario} {r.call}: sent {r.record.sent_name} "
              f"{json.dumps(r.record.sent_arguments, ensure_ascii=False)}")
        for f in r.failures:
            print(f"    FAIL {f}")
        text = "(nothing)" if r.record.text is None else visible(r.record.text)
        if not full and len(text) > 600:
            text = text[:597] + "..."
        print(f"    back{' (is_error)' if r.record.is_error else ''}:")
        for line in text.split("\n"):
            print(f"    | {line}")


def find_node() -> str:
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if os.access(os.path.join(d, "node"), os.X_OK):
            return os.path.join(d, "node")
    return "node"


def play_inspector(agent: str, binary: str, server: str, marker: str, args: argparse.Namespace) -> tuple[list[Row], dict]:
    """The MCP Inspector CLI: a long exec_command, a poll, a terminate (inspector.py)."""
    transport = agent.split("/", 1)[1]
    try:
        done, run, http = run_inspector(binary, server, transport, marker, args.timeout)
    except RuntimeError as exc:
        row = Row(agent, server, "exec_poll_kill", "(the CLI runs)", None, failures=[str(exc)])
        return [row], {"agent": agent, "server": server, "scenario": "exec_poll_kill", "seconds": 0,
                       "rc": None, "timed_out": False, "stderr_tail": str(exc)}
    if len(done) == 3 and done[-1][0].text is not None:
        survivors = survivors_after(marker)  # what the terminate left
        stop_inspector_servers(server, run, http)
    else:
        stop_inspector_servers(server, run, http)
        survivors = survivors_after(marker)  # what even the server's end left
    rows = []
    for i, (rec, checks) in enumerate(done):
        row = Row(agent, server, "exec_poll_kill", f"{i + 1}. {rec.call.tool} {rec.call.label}", rec)
        if rec.text is None:
            row.failures.append("the CLI printed nothing")
        else:
            for check in checks:
                problem = check(rec.text)
                (row.failures if problem else row.passed).append(f"{check.__name__}: {problem}" if problem else check.__name__)
        rows.append(row)
    run_row = Row(agent, server, "exec_poll_kill", "(the CLI runs)", None)
    run_row.failures += run.notes
    if run.timed_out:
        run_row.failures.append(f"a CLI call timed out after {args.timeout:.0f} s")
    if len(done) < 3:
        run_row.failures.append("the steps did not reach their end")
    if survivors:
        run_row.failures.append(f"{len(survivors)} process(es) outlived the terminate: "
                                + "; ".join(f"{pid} {cmd[:60]}" for pid, cmd in survivors))
    else:
        run_row.passed.append("nothing outlived the terminate")
    rows.append(run_row)
    if not args.keep:
        shutil.rmtree(run.tmp, ignore_errors=True)
    info = {"agent": agent, "server": server, "scenario": "exec_poll_kill", "seconds": round(run.seconds, 2),
            "rc": run.rc, "timed_out": run.timed_out, "stderr_tail": run.stderr[-1500:] if run_row.failures else ""}
    return rows, info


def play_ts_sdk(server: str, args: argparse.Namespace) -> tuple[list[Row], dict]:
    """The TypeScript SDK's Client as the person's side of uexec's form (ts_elicitation.mjs):
    a row per case (run once, deny with a reason, run once through the daemon)."""
    t0 = time.monotonic()
    # The script runs in this directory: a server path relative to the caller's (CI's
    # `target/release/uexec mcp`) is made absolute first.
    words = server.split()
    if words and os.sep in words[0] and not os.path.isabs(words[0]):
        words[0] = os.path.abspath(words[0])
    argv = [find_node(), str(HERE / "ts_elicitation.mjs"), "--server", " ".join(words), "--json"]
    info = {"agent": "ts-sdk", "server": server, "scenario": "elicitation", "rc": None, "timed_out": False,
            "stderr_tail": ""}
    try:
        proc = subprocess.run(argv, cwd=HERE, capture_output=True, text=True, timeout=args.timeout)
        info["rc"] = proc.returncode
        cases = json.loads(proc.stdout)["cases"]
    except subprocess.TimeoutExpired:
        info["timed_out"] = True
        cases, proc = [], None
    except (ValueError, KeyError):
        cases = []
    info["seconds"] = round(time.monotonic() - t0, 2)
    rows = []
    for c in cases:
        call = Call("exec_command", {"cmd": "touch made"}, f"answer {c['name']}")
        rec = Record(call=call, sent_name="exec_command", sent_arguments=call.arguments, text=c["result"],
                     is_error=c["is_error"])
        rows.append(Row("ts-sdk", server, "elicitation", f"{c['name']}: touch made", rec,
                        failures=list(c["failures"]), passed=list(c["passed"])))
    if not cases:
        why = f"timed out after {args.timeout:.0f} s" if info["timed_out"] else \
            f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-600:]}"
        rows.append(Row("ts-sdk", server, "elicitation", "(the client runs)", None, failures=[why]))
        info["stderr_tail"] = why
    return rows, info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default=f"{REPO}/target/release/uexec mcp",
                    help="the MCP server command the agents start (default: %(default)s)")
    ap.add_argument("--agent", choices=["claude", "codex", "claude-interactive", "inspector", "ts-sdk", "all"],
                    default="all", help="claude: headless (-p); claude-interactive: on a pseudo-terminal; inspector: "
                    "the MCP Inspector CLI; ts-sdk: the TypeScript SDK's Client answering uexec's form "
                    "(ts_elicitation.mjs); all (default): every one")
    ap.add_argument("--transport", action="append", choices=["stdio", "http"],
                    help="claude-interactive and inspector: over this transport (repeatable; default both)")
    ap.add_argument("--variant", action="append", default=[], metavar="FLAG",
                    help="also run every scenario with --FLAG added to --server, e.g. `--variant structured` "
                    "or `--variant codex-compat` (repeatable)")
    ap.add_argument("--scenario", action="append", help="only this scenario (repeatable)")
    ap.add_argument("--claude", default=str(HERE / "node_modules/.bin/claude"))
    ap.add_argument("--codex", default=os.environ.get("UEXEC_CODEX_BIN", ""))
    ap.add_argument("--inspector", default=str(HERE / "node_modules/.bin/mcp-inspector"))
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds one agent run may take (default %(default)s)")
    ap.add_argument("--json", help="write every row and run as JSON here")
    ap.add_argument("--full", action="store_true", help="print the handed-back texts whole")
    ap.add_argument("--keep", action="store_true", help="keep each run's temporary HOME")
    ap.add_argument("--dump-requests", action="store_true", help="keep the request bodies in --json")
    args = ap.parse_args()

    chosen = ["claude", "codex", "claude-interactive", "inspector", "ts-sdk"] if args.agent == "all" else [args.agent]
    transports = args.transport or ["stdio", "http"]
    agents = []
    for a in chosen:
        agents += [f"claude-tty/{t}" for t in transports] if a == "claude-interactive" else \
            [f"inspector/{t}" for t in transports] if a == "inspector" else [a]
    binaries = {"claude": args.claude, "codex": args.codex, "inspector": args.inspector,
                "ts-sdk": str(HERE / "ts_elicitation.mjs")}
    for a in agents:
        base = "claude" if a.startswith("claude") else a.split("/")[0]
        binaries.setdefault(a, binaries[base])
        if not binaries[a] or not os.access(binaries[a], os.X_OK):
            print(f"no {a} binary at {binaries[a]!r} (see run.sh)", file=sys.stderr)
            return 2
    servers = [args.server] + [f"{args.server} --{flag.lstrip('-')}" for flag in args.variant]
    rows: list[Row] = []
    runs: list[dict] = []
    t0 = time.monotonic()
    for agent in agents:
        for si, server in enumerate(servers):
            marker = f"uexec-agents-mark-{os.getpid()}-{agent.replace('/', '-')}-{si}"
            if agent == "ts-sdk":
                if args.scenario and "elicitation" not in args.scenario:
                    continue
                r, info = play_ts_sdk(server, args)
                print(f"{agent}{f' ({server})' if si else ''}: {info['seconds']} s, "
                      f"{'ok' if not any(x.failures for x in r) else 'FAILED'}", file=sys.stderr, flush=True)
                rows += r
                runs.append(info)
                continue
            if agent.startswith("inspector/"):
                if args.scenario and "exec_poll_kill" not in args.scenario:
                    continue
                r, info = play_inspector(agent, binaries[agent], server, marker, args)
                print(f"{agent}{f' ({server})' if si else ''}: {info['seconds']} s, "
                      f"{'ok' if not any(x.failures for x in r) else 'FAILED'}", file=sys.stderr, flush=True)
                rows += r
                runs.append(info)
                continue
            files = Path(tempfile.mkdtemp(prefix="uexec-agents-files-"))
            for sc in all_scenarios(marker) + approval_scenarios(files):
                if (args.scenario and sc.name not in args.scenario) or agent.split("/")[0] not in sc.agents:
                    continue
                r, info = play(agent, binaries[agent], server, sc, args)
                print(f"{agent} {sc.name}{f' ({server})' if si else ''}: {info['seconds']} s, "
                      f"{'ok' if not any(x.failures for x in r) else 'FAILED'}", file=sys.stderr, flush=True)
                rows += r
                runs.append(info)
            if not args.keep:
                shutil.rmtree(files, ignore_errors=True)
    count_tokens(rows, find_node())
    print_report(rows, args.full)
    failed = [r for r in rows if r.failures and not r.expected]
    known = [r for r in rows if r.failures and r.expected]
    total = time.monotonic() - t0
    print(f"\n{len(rows) - len(failed) - len(known)} of {len(rows)} rows passed"
          f"{f', {len(known)} failed as expected' if known else ''}; {len(runs)} agent runs in {total:.1f} s")
    for reason in dict.fromkeys(r.expected for r in known):
        print(f"expected to fail: {reason}")
    for info in runs:
        if info["stderr_tail"]:
            print(f"stderr of {info['agent']} {info['scenario']}: {info['stderr_tail']}", file=sys.stderr)
    if args.json:
        out = {"rows": [{"agent": r.agent, "server": r.server, "scenario": r.scenario, "call": r.call,
                         "passed": r.passed, "failures": r.failures, "expected_failure": r.expected,
                         "tokens": r.tokens,
                         "sent": r.record and {"name": r.record.sent_name, "arguments": r.record.sent_arguments},
                         "handed_back": r.record and r.record.text,
                         "is_error": r.record and r.record.is_error} for r in rows],
               "runs": runs, "seconds": round(total, 1)}
        Path(args.json).write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
