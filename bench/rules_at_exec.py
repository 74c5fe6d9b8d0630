"""The cost of judging every exec (issue 40), `uexec mcp --rules R --rules-at exec` against
`uexec mcp --rules R` (the script's text only), through the official MCP Python SDK client:
1. `exec_command` of a shell loop of 1,000 `/bin/true`;
2. `exec_command` of `make -j2` of a Makefile of 1,000 targets, each recipe one `/bin/true`
   (make execs each recipe itself, two at a time);
3. one exec's round trip: `exec_command` of `/bin/true` alone (the shell's exec and
   true's), back to back and each after a pause (`--pause-ms`, default 100: an agent's
   calls come after one, and the judging thread then sleeps).
4. with `--floor target/release/examples/exec_notify_floor` (`cargo build --release -p
   uexec-sys --example exec_notify_floor`), the floor: the loop and make run directly, with
   every exec handed to a supervisor that lets it go on at once (no reading, no rules, no
   record) against without the filter: what the kernel's round trip alone costs here.
The rules file holds a few rules none of these execs match (each exec is judged in full,
then allowed). The two servers' calls interleave one by one, the order turning; medians,
their ratio, and what one exec's judgement costs (the median pair difference over the
execs of a call).

Servers run in-process with an empty HOME in a temp cwd (no login profile, no daemon); the
exec-judging one writes each judged exec to uexec audit's record, as it would in use.

  .bench/venv/bin/python bench/rules_at_exec.py --uexec target/release/uexec \
      --floor target/release/examples/exec_notify_floor
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import tempfile
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

RULES = """prefix_rule(pattern = ["git", "push"], decision = "forbidden", justification = "people push")
prefix_rule(pattern = ["rm", "-rf"], decision = "forbidden")
prefix_rule(pattern = ["npm", "publish"], decision = "prompt")
"""


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uexec", required=True, help="the uexec binary")
    ap.add_argument("--execs", type=int, default=1000, help="execs of /bin/true per call")
    ap.add_argument("--runs", type=int, default=15, help="pairs of the loop and of make")
    ap.add_argument("--single-runs", type=int, default=60, help="pairs of the single exec, each series")
    ap.add_argument("--pause-ms", type=int, default=100, help="pause before each single exec of the paused series (0 skips it)")
    ap.add_argument("--floor", help="exec_notify_floor (uexec-sys's example): also time the kernel's round trip alone")
    ap.add_argument("--no-record", action="store_true", help="make the audit record unwritable (what the record costs)")
    a = ap.parse_args()
    a.uexec = os.path.abspath(a.uexec)
    home = tempfile.mkdtemp(prefix="uexec-exec-rules-bench-")
    rules = os.path.join(home, "bench.rules")
    with open(rules, "w") as f:
        f.write(RULES)
    if a.no_record:
        os.makedirs(os.path.join(home, ".local/state/uexec"))
        open(os.path.join(home, ".local/state/uexec/audit"), "w").close()
    env = {**os.environ, "HOME": home}
    env.pop("XDG_STATE_HOME", None)
    base = ["mcp", "--in-process", "--rules", rules]
    servers = [
        StdioServerParameters(command=a.uexec, args=base, env=env, cwd=home),
        StdioServerParameters(command=a.uexec, args=base + ["--rules-at", "exec"], env=env, cwd=home),
    ]
    with open(os.path.join(home, "Makefile"), "w") as f:
        targets = " ".join(f"t{i}" for i in range(a.execs))
        f.write(f".PHONY: all {targets}\nall: {targets}\n\t@echo done\n")
        for i in range(a.execs):
            f.write(f"t{i}:\n\t@/bin/true\n")
    loop = {
        "cmd": f"i=0; while [ $i -lt {a.execs} ]; do /bin/true; i=$((i+1)); done; echo done",
        "login": False,
        "yield_time_ms": 120000,
    }
    make = {"cmd": "make -s -j2 all", "login": False, "yield_time_ms": 120000}
    single = {"cmd": "/bin/true && echo done", "login": False, "yield_time_ms": 10000}
    async with contextlib.AsyncExitStack() as stack:
        sessions = []
        for params in servers:
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions.append(session)

        async def pairs(call: dict, runs: int, pause_ms: int = 0) -> tuple[list[float], list[float]]:
            text_only, at_exec = [], []
            for i in range(runs):
                for which in ([0, 1] if i % 2 == 0 else [1, 0]):
                    if pause_ms:
                        await anyio.sleep(pause_ms / 1000)
                    t = time.perf_counter()
                    r = await sessions[which].call_tool("exec_command", call)
                    took = (time.perf_counter() - t) * 1e3
                    assert not r.is_error and "done" in r.content[0].text, r
                    (at_exec if which else text_only).append(took)
            return text_only, at_exec

        for call in (loop, make, single):  # warm-up
            for s in sessions:
                r = await s.call_tool("exec_command", call)
                assert not r.is_error and "done" in r.content[0].text, r
        rows = [
            (f"a shell loop of {a.execs} `/bin/true`, {a.runs} pairs", a.execs, await pairs(loop, a.runs)),
            (f"`make -j2` of {a.execs} targets, one `/bin/true` each, {a.runs} pairs", a.execs, await pairs(make, a.runs)),
            (f"`/bin/true` alone (2 execs), back to back, {a.single_runs} pairs", 2, await pairs(single, a.single_runs)),
        ]
        if a.pause_ms:
            rows.append((f"`/bin/true` alone (2 execs), each after a {a.pause_ms} ms pause, {a.single_runs} pairs", 2,
                         await pairs(single, a.single_runs, a.pause_ms)))
    if a.floor:
        floor = os.path.abspath(a.floor)

        def direct(cmd: str, runs: int) -> tuple[list[float], list[float]]:
            bare, held = [], []
            for i in range(runs):
                for which in ([0, 1] if i % 2 == 0 else [1, 0]):
                    argv = ["bash", "-c", cmd] if not which else [floor, "--", "bash", "-c", cmd]
                    t = time.perf_counter()
                    out = subprocess.run(argv, cwd=home, env=env, capture_output=True, text=True, check=True)
                    took = (time.perf_counter() - t) * 1e3
                    assert "done" in out.stdout, out
                    (held if which else bare).append(took)
            return bare, held

        rows.append((f"floor, no MCP: the loop under a supervisor that answers at once, {a.runs} pairs", a.execs,
                     direct(loop["cmd"], a.runs)))
        rows.append((f"floor, no MCP: `make -j2` under a supervisor that answers at once, {a.runs} pairs", a.execs,
                     direct(make["cmd"], a.runs)))
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print("| `exec_command` of | text only | every exec judged | ratio | one exec's judgement |")
    print("|---|---|---|---|---|")
    for name, execs, (text_only, at_exec) in rows:
        diffs = sorted(w - wo for w, wo in zip(at_exec, text_only))
        per_exec_us = diffs[len(diffs) // 2] / execs * 1e3
        t, e = statistics.median(text_only), statistics.median(at_exec)
        print(f"| {name} | {t:.1f} ms | {e:.1f} ms | {e / t:.2f}x | {per_exec_us:+.0f} µs |")


if __name__ == "__main__":
    anyio.run(main)
