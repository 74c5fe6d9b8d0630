"""MCP round trip of a trivial command, through the official MCP Python SDK client.

Measured in one run, same machine, medians:
  * spawn+wait of `bash -c true` in this process (the floor any shell tool pays);
  * `uexec mcp`: exec_command {cmd: "true", login: false};
  * a peer shell MCP server (mcp-server-commands 0.5.0): run_command {command: "true"};
and a 256 MiB output flood through exec_command, with the uexec server's peak RSS.

Then the spacing of an agent's calls (`--pause-ms`, default 100; 0 skips it): `uexec mcp`,
the same without cgroups (`--without-cgroups`, root: its cgroup mount hidden, see
without_cgroups.py), the same sandboxed (`--sandboxed`: `--sandbox read-only`) and the peer, their calls interleaved one by one, back to back and each
after a pause (the model thinks between calls; the kernel's cgroup lock was slow to take
after an idle spell, issue 41), medians of `--paused-runs` (default 40) each; and bursts of
`--burst` (default 16) calls at once through each.
Servers run with an empty HOME in a temp cwd (login shells read no dotfiles).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import contextlib

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import without_cgroups


def spawn_wait_ms(runs: int, shell: str = "bash") -> float:
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([shell, "-c", "true"], check=True)
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples)


def children_named(exe: str) -> list[int]:
    me, out = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            target = os.readlink(f"/proc/{name}/exe")
        except OSError:
            continue
        if ppid == me and os.path.realpath(exe) == target:
            out.append(int(name))
    return out


def peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def roundtrips(argv: list[str], tool: str, arguments: dict, runs: int, home: str, flood: bool = False):
    params = StdioServerParameters(command=argv[0], args=argv[1:], env={**os.environ, "HOME": home}, cwd=home)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(10):  # warm-up
                await session.call_tool(tool, arguments)
            samples = []
            for _ in range(runs):
                t = time.perf_counter()
                r = await session.call_tool(tool, arguments)
                samples.append((time.perf_counter() - t) * 1e3)
                assert not r.is_error, r
            flood_result = None
            if flood:
                cmd = "head -c 268435456 /dev/zero | tr '\\0' a"
                t = time.perf_counter()
                r = await session.call_tool("exec_command", {"cmd": cmd, "login": False, "yield_time_ms": 30000})
                total_tokens = r.structured_content["original_token_count"]
                sid = r.structured_content.get("session_id")
                while sid is not None:
                    r = await session.call_tool("write_stdin", {"session_id": sid, "yield_time_ms": 30000})
                    total_tokens += r.structured_content["original_token_count"]
                    sid = r.structured_content.get("session_id")
                elapsed = time.perf_counter() - t
                pids = children_named(argv[0])
                rss = peak_rss_mib(pids[-1]) if pids else float("nan")
                flood_result = (elapsed, total_tokens, len(r.structured_content["output"]), rss)
            return statistics.median(samples), flood_result


async def spaced(servers: list[tuple[list[str], str, dict]], home: str, runs: int, pause_ms: int) -> list[float]:
    """The median round trip through each server (argv, tool, arguments), their calls
    interleaved one by one (the order turning each round) and each timed call after
    `pause_ms` of sleep (0: back to back)."""
    async with contextlib.AsyncExitStack() as stack:
        sessions = []
        for argv, tool, arguments in servers:
            params = StdioServerParameters(command=argv[0], args=argv[1:], env={**os.environ, "HOME": home}, cwd=home)
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            for _ in range(10):  # warm-up
                await session.call_tool(tool, arguments)
            sessions.append((session, tool, arguments))
        samples = [[] for _ in sessions]
        for i in range(runs):
            for k in range(len(sessions)):
                j = (i + k) % len(sessions)
                session, tool, arguments = sessions[j]
                if pause_ms:
                    await anyio.sleep(pause_ms / 1e3)
                t = time.perf_counter()
                r = await session.call_tool(tool, arguments)
                samples[j].append((time.perf_counter() - t) * 1e3)
                assert not r.is_error, r
        return [statistics.median(times) for times in samples]


async def bursts(servers: list[tuple[list[str], str, dict]], home: str, runs: int, width: int) -> list[float]:
    """The median time of `width` concurrent calls (from the first sent to the last answer)
    through each server, the servers' bursts interleaved, 100 ms apart."""
    async with contextlib.AsyncExitStack() as stack:
        sessions = []
        for argv, tool, arguments in servers:
            params = StdioServerParameters(command=argv[0], args=argv[1:], env={**os.environ, "HOME": home}, cwd=home)
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            for _ in range(10):  # warm-up
                await session.call_tool(tool, arguments)
            sessions.append((session, tool, arguments))
        samples = [[] for _ in sessions]
        for i in range(runs):
            for k in range(len(sessions)):
                j = (i + k) % len(sessions)
                session, tool, arguments = sessions[j]
                await anyio.sleep(0.1)
                results = []

                async def one() -> None:
                    results.append(await session.call_tool(tool, arguments))

                t = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for _ in range(width):
                        tg.start_soon(one)
                samples[j].append((time.perf_counter() - t) * 1e3)
                assert all(not r.is_error for r in results), results
        return [statistics.median(times) for times in samples]


async def spacing(a, uexec: list[str], home: str) -> None:
    true = {"cmd": "true", "login": False}
    servers = [(uexec, "exec_command", true)]
    names = ["uexec mcp --in-process (a cgroup per session)"]
    if a.without_cgroups:
        servers.append((without_cgroups.argv(uexec), "exec_command", true))
        names.append("the same, its cgroup mount hidden (process groups only)")
    servers.append((shlex.split(a.peer), "run_command", {"command": "true"}))
    names.append("mcp-server-commands 0.5.0, run_command")
    back = await spaced(servers, home, a.paused_runs, 0)
    paused = await spaced(servers, home, a.paused_runs, a.pause_ms)
    print()
    print(f"| `true` through MCP, calls interleaved, medians of {a.paused_runs} | back to back (ms) | after a {a.pause_ms} ms pause (ms) |")
    print("|---|---|---|")
    for name, b, p in zip(names, back, paused):
        print(f"| {name} | {b:.2f} | {p:.2f} |")
    if a.without_cgroups:
        print(f"| ratio: with cgroups / without (goal <= 1.1x) | {back[0] / back[1]:.2f}x | {paused[0] / paused[1]:.2f}x |")
    print(f"| ratio: uexec mcp / mcp-server-commands | {back[0] / back[-1]:.2f}x | {paused[0] / paused[-1]:.2f}x |")
    if a.burst:
        wide = await bursts(servers, home, a.paused_runs // 2, a.burst)
        print()
        print(f"| {a.burst} concurrent `true`, bursts 100 ms apart, medians of {a.paused_runs // 2} | ms |")
        print("|---|---|")
        for name, w in zip(names, wide):
            print(f"| {name} | {w:.2f} |")
        if a.without_cgroups:
            print(f"| ratio: with cgroups / without | {wide[0] / wide[1]:.2f}x |")
    if a.sandboxed:
        # A pair of its own: the sandboxed server starts launchers ahead, in the background,
        # which would load the machine under the other rows.
        pair = [(uexec, "exec_command", true), (uexec + ["--sandbox", "read-only"], "exec_command", true)]
        back = await spaced(pair, home, a.paused_runs, 0)
        paused = await spaced(pair, home, a.paused_runs, a.pause_ms)
        print(f"| uexec mcp, unsandboxed (paired with the next row) | {back[0]:.2f} | {paused[0]:.2f} |")
        print(f"| uexec mcp --sandbox read-only | {back[1]:.2f} | {paused[1]:.2f} |")
        print(f"| ratio: sandboxed / not (goals <= 2x, <= 1.8x) | {back[1] / back[0]:.2f}x | {paused[1] / paused[0]:.2f}x |")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uexec", required=True)
    ap.add_argument("--peer", required=True, help="command line of the peer MCP server")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--pause-ms", type=int, default=100, help="the spacing series' pause before each call (0: none)")
    ap.add_argument("--paused-runs", type=int, default=40)
    ap.add_argument("--without-cgroups", action="store_true", help="(root) a uexec mcp without cgroups beside")
    ap.add_argument("--sandboxed", action="store_true", help="a uexec mcp --sandbox read-only beside")
    ap.add_argument("--burst", type=int, default=16, help="calls at once in the burst series (0: none)")
    ap.add_argument("--spacing-only", action="store_true", help="the spacing series alone")
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="uexec-bench-home-")
    uexec = [os.path.abspath(a.uexec), "mcp", "--in-process", "--codex-compat"]
    if a.spacing_only:
        await spacing(a, uexec, home)
        return
    base = spawn_wait_ms(a.runs)
    base_sh = spawn_wait_ms(a.runs, "sh")
    uexec_ms, flood = await roundtrips(uexec, "exec_command", {"cmd": "true", "login": False}, a.runs, home, flood=True)
    uexec_sh_ms, _ = await roundtrips(
        uexec, "exec_command", {"cmd": "true", "login": False, "shell": "/bin/sh"}, a.runs, home
    )
    peer_ms, _ = await roundtrips(shlex.split(a.peer), "run_command", {"command": "true"}, a.runs, home)
    print(f"| MCP round trip of `true` (median of {a.runs}, Python SDK client) | ms | x spawn+wait of the same shell |")
    print("|---|---|---|")
    print(f"| spawn+wait of `bash -c true` in the client process | {base:.2f} | 1.00 |")
    print(f"| uexec mcp, exec_command (login: false; bash) | {uexec_ms:.2f} | {uexec_ms / base:.2f} |")
    print(f"| spawn+wait of `sh -c true` (dash) in the client process | {base_sh:.2f} | 1.00 |")
    print(f"| uexec mcp, exec_command (login: false, shell: /bin/sh) | {uexec_sh_ms:.2f} | {uexec_sh_ms / base_sh:.2f} |")
    print(f"| mcp-server-commands 0.5.0, run_command (node exec: /bin/sh -c) | {peer_ms:.2f} | {peer_ms / base_sh:.2f} |")
    elapsed, tokens, body, rss = flood
    print()
    print(
        f"256 MiB flood through exec_command: {elapsed:.2f} s ({256 / elapsed:.0f} MiB/s), "
        f"{tokens} tokens accounted, {body} characters returned (truncated), "
        f"uexec server peak RSS {rss:.1f} MiB (goal < 64 MiB)"
    )
    if a.pause_ms:
        await spacing(a, uexec, home)


if __name__ == "__main__":
    anyio.run(main)
