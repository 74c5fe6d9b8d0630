"""The round trip of a person's yes by MCP form elicitation (issue 39 §5), through the official
MCP Python SDK client: `exec_command true` on a `uexec mcp` whose rules hold `true` for a
yes (`prefix_rule(pattern = ["true"], decision = "prompt")`), the client's elicitation
callback answering "run once" at once, against the same call on a `uexec mcp` without rules.
The two servers' calls interleave one by one, back to back and each after a pause; medians,
their ratio, and the median of the pair differences (what the question costs: the server's
elicitation/create, the client's answer, the door's second half).

Servers run in-process with an empty HOME in a temp cwd (no login profile, no daemon).

  .bench/venv/bin/python bench/approval_roundtrip.py --uexec target/release/uexec
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

RULES = 'prefix_rule(pattern = ["true"], decision = "prompt", justification = "the bench asks")\n'
CALL = {"cmd": "true", "login": False}


async def run_once(context, params) -> types.ElicitResult:
    """The person: answers every form "run once", at once."""
    return types.ElicitResult(action="accept", content={"answer": "run once"})


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uexec", required=True, help="the uexec binary")
    ap.add_argument("--runs", type=int, default=200, help="pairs back to back")
    ap.add_argument("--pause-ms", type=int, default=100, help="pause before each call of the spaced series (0: none)")
    ap.add_argument("--paused-runs", type=int, default=40, help="pairs in the spaced series")
    a = ap.parse_args()
    a.uexec = os.path.abspath(a.uexec)
    home = tempfile.mkdtemp(prefix="uexec-approval-bench-")
    rules = os.path.join(home, "bench.rules")
    with open(rules, "w") as f:
        f.write(RULES)
    env = {**os.environ, "HOME": home}
    env.pop("XDG_STATE_HOME", None)
    plain = StdioServerParameters(command=a.uexec, args=["mcp", "--in-process"], env=env, cwd=home)
    held = StdioServerParameters(command=a.uexec, args=["mcp", "--in-process", "--rules", rules], env=env, cwd=home)
    async with contextlib.AsyncExitStack() as stack:
        sessions = []
        for params, callback in [(plain, None), (held, run_once)]:
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write, elicitation_callback=callback))
            await session.initialize()
            sessions.append(session)
        for _ in range(10):  # warm-up; each held call must run on the yes
            for s in sessions:
                r = await s.call_tool("exec_command", CALL)
                assert not r.is_error, r

        async def series(pairs: int, pause_ms: int) -> tuple[float, float, float]:
            without, with_yes = [], []
            for i in range(pairs):
                order = [0, 1] if i % 2 == 0 else [1, 0]
                for which in order:
                    if pause_ms:
                        await anyio.sleep(pause_ms / 1e3)
                    t = time.perf_counter()
                    r = await sessions[which].call_tool("exec_command", CALL)
                    took = (time.perf_counter() - t) * 1e3
                    assert not r.is_error, r
                    (with_yes if which else without).append(took)
            diffs = sorted(w - wo for w, wo in zip(with_yes, without))
            return statistics.median(without), statistics.median(with_yes), diffs[len(diffs) // 2]

        rows = [(f"back to back, {a.runs} pairs", await series(a.runs, 0))]
        if a.pause_ms:
            rows.append((f"each after a {a.pause_ms} ms pause, {a.paused_runs} pairs", await series(a.paused_runs, a.pause_ms)))
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print("| `exec_command true` | no rules | held, answered by form | ratio | median pair difference |")
    print("|---|---|---|---|---|")
    for label, (without, with_yes, diff) in rows:
        print(f"| {label} | {without:.2f} ms | {with_yes:.2f} ms | {with_yes / without:.2f}x | {diff:+.2f} ms |")


if __name__ == "__main__":
    anyio.run(main)
