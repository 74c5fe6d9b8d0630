"""The cost of judging every exec (issue 40): `exec_command` of a shell loop of 1,000
`/bin/true` on a `uexec mcp --rules R --rules-at exec` against the same on `uexec mcp --rules
R` (the script's text only), through the official MCP Python SDK client. The rules file
holds a few rules none of the loop's execs match (each exec is judged in full, then
allowed). The two servers' calls interleave one by one; medians, their ratio, and what one
exec's judgement costs (the median pair difference over the execs of a call).

Servers run in-process with an empty HOME in a temp cwd (no login profile, no daemon); the
exec-judging one writes each judged exec to uexec audit's record, as it would in use.

  .bench/venv/bin/python bench/rules_at_exec.py --uexec target/release/uexec
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
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
    ap.add_argument("--runs", type=int, default=15, help="pairs")
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
    call = {
        "cmd": f"i=0; while [ $i -lt {a.execs} ]; do /bin/true; i=$((i+1)); done; echo done",
        "login": False,
        "yield_time_ms": 120000,
    }
    async with contextlib.AsyncExitStack() as stack:
        sessions = []
        for params in servers:
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions.append(session)
        for s in sessions:  # warm-up
            r = await s.call_tool("exec_command", call)
            assert not r.is_error and "done" in r.content[0].text, r
        text_only, at_exec = [], []
        for i in range(a.runs):
            for which in ([0, 1] if i % 2 == 0 else [1, 0]):
                t = time.perf_counter()
                r = await sessions[which].call_tool("exec_command", call)
                took = (time.perf_counter() - t) * 1e3
                assert not r.is_error and "done" in r.content[0].text, r
                (at_exec if which else text_only).append(took)
    diffs = sorted(w - wo for w, wo in zip(at_exec, text_only))
    per_exec_us = diffs[len(diffs) // 2] / a.execs * 1e3
    t, e = statistics.median(text_only), statistics.median(at_exec)
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print(f"| a loop of {a.execs} `/bin/true`, {a.runs} pairs | text only | every exec judged | ratio | one exec's judgement |")
    print("|---|---|---|---|---|")
    print(f"| `exec_command` | {t:.1f} ms | {e:.1f} ms | {e / t:.2f}x | {per_exec_us:+.0f} µs |")


if __name__ == "__main__":
    anyio.run(main)
