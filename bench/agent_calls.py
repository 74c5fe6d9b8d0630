"""How many tool calls, and how many bytes returned to the model, an agent needs to reach the
moment it cares about: scripted strategies on the same tasks, in one run.

Tasks (each command writes the time of its event to a side file, which the output never shows):
  dev-server  prints `ready on :3000` after 5 s and keeps running     event: the ready line
  test-suite  20 s, one progress line a second, then exits 0            event: the exit
  build-fail  fails after 5 s (exit 2)                                  event: the exit
  installer   asks `Proceed? [y/N]` after 2 s (tty)                     event: the question
  quiet-30s   prints nothing for 30 s, then finishes                    event: the exit

Strategies:
  codex        Codex's defaults: exec_command (10 s window), then empty write_stdin polls
               (5 s each, the shortest an empty poll may wait) until the event shows.
  codex-eager  the same with exec_command's yield_time_ms at 1000, as agents that want to
               stay responsive ask for.
  (both run against plain `uexec mcp`, whose calls are Codex's: the oracle checks that)
  uexec        `uexec mcp --structured`: one exec_command with a 30 s window and `until`
               (pattern, prompt, exit); if the window ends first, one `wait` call.

Per task and strategy: calls, bytes of text returned (the model reads them: a proxy for
tokens), and the latency from the event to the return of the call that shows it. All ten
runs go at once, so the whole benchmark takes about 40 s. Servers: empty HOME, login: false.
usage: python bench/agent_calls.py --uexec target/release/uexec
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TASKS = {
    "dev-server": ("sleep 5; mark; echo 'ready on :3000'; exec sleep 600", False, {"pattern": "ready on :[0-9]+"}),
    "test-suite": (
        "for i in $(seq 1 20); do echo \"test $i ... ok\"; sleep 1; done; echo 'test result: ok. 20 passed'; mark",
        False,
        {"exit": True},
    ),
    "build-fail": ("echo 'Compiling app v0.1.0'; sleep 5; echo 'error[E0308]: mismatched types' >&2; mark; exit 2", False, {"exit": True}),
    "installer": ("sleep 2; mark; read -p 'Proceed? [y/N] ' a; echo \"answer=$a\"", True, {"prompt": True}),
    "quiet-30s": ("sleep 30; mark; echo done", False, {"exit": True}),
}
EVENT_TEXT = {"dev-server": "ready on :3000", "installer": "[y/N]"}


def command(task: str, mark_file: str) -> str:
    cmd, _, _ = TASKS[task]
    return f"mark() {{ date +%s.%N > {mark_file}; }}; " + cmd


def text_of(result) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def reached(task: str, structured: dict, seen: str) -> bool:
    if task in EVENT_TEXT:
        return EVENT_TEXT[task] in seen
    return "exit_code" in structured


async def run(session: ClientSession, strategy: str, task: str, workdir: str) -> dict:
    mark_file = os.path.join(workdir, f"{strategy}-{task}.event")
    _, tty, until = TASKS[task]
    calls, returned, seen = 0, 0, ""
    args = {"cmd": command(task, mark_file), "login": False, "tty": tty}
    if strategy == "uexec":
        args.update({"yield_time_ms": 30000, "until": until})
    elif strategy == "codex-eager":
        args["yield_time_ms"] = 1000
    r = await session.call_tool("exec_command", args)
    calls, returned, seen = 1, len(text_of(r)), r.structured_content.get("output", "")
    s = r.structured_content
    while not reached(task, s, seen):
        sid = s["session_id"]
        if strategy != "uexec":
            r = await session.call_tool("write_stdin", {"session_id": sid, "chars": ""})
            s = r.structured_content
        else:
            r = await session.call_tool("wait", {"session_ids": [sid], "until": until, "yield_time_ms": 300000})
            s = r.structured_content["sessions"][0]
        calls += 1
        returned += len(text_of(r))
        seen += s.get("output", "")
    back = time.time()
    with open(mark_file) as f:
        event = float(f.read())
    if "session_id" in s:
        await session.call_tool("terminate_session", {"session_id": s["session_id"]})
    return {"calls": calls, "bytes": returned, "latency_ms": (back - event) * 1e3}


async def strategy_runs(uexec: str, strategy: str, home: str, results: dict) -> None:
    argv = [uexec, "mcp", "--in-process"] + (["--structured"] if strategy == "uexec" else ["--codex-compat"])
    params = StdioServerParameters(command=argv[0], args=argv[1:], env={**os.environ, "HOME": home}, cwd=home)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()

            async def one(task: str) -> None:
                results[(strategy, task)] = await run(session, strategy, task, home)

            async with anyio.create_task_group() as tg:
                for task in TASKS:
                    tg.start_soon(one, task)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uexec", required=True)
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="uexec-bench-home-")
    uexec = os.path.abspath(a.uexec)
    results: dict = {}
    strategies = ("codex", "codex-eager", "uexec")
    async with anyio.create_task_group() as tg:
        for strategy in strategies:
            tg.start_soon(strategy_runs, uexec, strategy, home, results)
    print("calls / bytes returned / ms from the event to the call's return")
    print()
    print("| task | Codex defaults | Codex, 1 s first window | uexec (until, then wait) | uexec bytes vs each |")
    print("|---|---|---|---|---|")
    totals = {name: [0, 0] for name in strategies}
    for task in TASKS:
        row = []
        for name in strategies:
            r = results[(name, task)]
            totals[name][0] += r["calls"]
            totals[name][1] += r["bytes"]
            row.append(f"{r['calls']} / {r['bytes']} / {r['latency_ms']:.0f}")
        u = results[("uexec", task)]["bytes"]
        ratios = " ; ".join(f"{u / results[(n, task)]['bytes']:.2f}" for n in strategies[:2])
        print(f"| {task} | {' | '.join(row)} | {ratios} |")
    cells = [f"{c} / {b} / –" for c, b in (totals[n] for n in strategies)]
    ub = totals["uexec"][1]
    ratios = " ; ".join(f"{ub / totals[n][1]:.2f}" for n in strategies[:2])
    print(f"| **all** | {' | '.join(cells)} | {ratios} |")


if __name__ == "__main__":
    anyio.run(main)
