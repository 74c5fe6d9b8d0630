"""MCP round trip of a trivial command, through the official MCP Python SDK client.

Measured in one run, same machine, medians:
  * spawn+wait of `bash -c true` in this process (the floor any shell tool pays);
  * `uexec mcp`: exec_command {cmd: "true", login: false};
  * a peer shell MCP server (mcp-server-commands 0.5.0): run_command {command: "true"};
and a 256 MiB output flood through exec_command, with the uexec server's peak RSS.
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

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


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


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uexec", required=True)
    ap.add_argument("--peer", required=True, help="command line of the peer MCP server")
    ap.add_argument("--runs", type=int, default=200)
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="uexec-bench-home-")
    uexec = [os.path.abspath(a.uexec), "mcp", "--in-process", "--codex-compat"]
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


if __name__ == "__main__":
    anyio.run(main)
