"""The daemon and the CLI, against baselines measured in the same run (medians).

  * `uexec run --no-login -- true` end to end (CLI -> daemon -> process -> back) against a
    spawn+wait of `bash -c true` from this process; goal <= 2x; beside it the same run made
    by the engine's own CLI (`uexec-engine run`, what `uexec` was before the front), and the
    windowed exchange (`uexec run --until-*`: hello, initialize, exec_command; a foreground run is a
    run hello instead, one message less) made by bench/minimal_client.rs (built here with rustc: it sends request
    bytes prepared by this script and reads the answer, nothing else), the floor of any
    small client; all four interleaved, run by run;
  * an exec_command round trip of `true` through `uexec mcp --daemon` against plain
    in-process `uexec mcp`, same MCP Python SDK client, calls interleaved; goal <= 1.2x;
  * `uexec attach` of a 200x50 PTY session whose screen was drawn by 256 KiB of output: from
    the spawn of `uexec attach` to the first screen bytes on its stdout; goal < 20 ms.

Two more rows of the first line, each through a daemon of its own (interleaved too):
  * `--front PATH`: another front (e.g. the musl one `deploy/build-static.sh` builds, which
    the .deb ships), copied into a directory of its own beside `--uexec`'s `uexec-engine`
    (the .deb's layout): a hard link, so that it runs through the first row's daemon, or
    where the scratch directory (TMPDIR) is on another file system, a copy with a daemon of
    its own;
  * `--without-cgroups` (root): a daemon started in a private mount namespace where the
    unified cgroup mount is hidden, so its sessions run on their process group alone.

And the same rows again, each timed call after a pause (`--pause-ms`, default 100; 0 skips
them), `--paused-runs` (default 40) each: an agent's calls come seconds apart, and the
kernel's cgroup lock was slow to take after an idle spell (issue 41).

A private XDG_RUNTIME_DIR and an empty HOME; the daemons are stopped at the end, and the
directories removed.
usage: python bench/people.py --uexec target/release/uexec [--runs N] [--front PATH] [--without-cgroups]
                              [--pause-ms MS] [--paused-runs N]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import without_cgroups


async def mcp_roundtrips(argvs: list[list[str]], env: dict, cwd: str, runs: int, pause_ms: int = 0) -> list[float]:
    """The median exec_command round trip of `true` through each server, the servers' calls
    interleaved one by one (a drift of the machine's speed moves them alike), each timed
    call after `pause_ms` of sleep (0: back to back)."""
    async with contextlib.AsyncExitStack() as stack:
        sessions = []
        for argv in argvs:
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions.append(session)
        args = {"cmd": "true", "login": False}
        samples = [[] for _ in sessions]
        for i in range(runs + 10):
            for session, times in zip(sessions, samples):
                if pause_ms and i >= 10:
                    await anyio.sleep(pause_ms / 1e3)
                t = time.perf_counter()
                r = await session.call_tool("exec_command", args)
                if i >= 10:  # the first ten warm up
                    times.append((time.perf_counter() - t) * 1e3)
                assert not r.is_error, r
        return [statistics.median(times) for times in samples]


def attach_ms(uexec: str, env: dict, cwd: str, runs: int) -> float:
    # A 200x50 screen: the attach redraws it at the person's size (no terminal here: 24x80
    # is what a non-tty attach asks for, so the session is drawn at 200x50 by itself).
    draw = "stty rows 50 cols 200; for i in $(seq 1 4000); do printf '\\033[%d;1H%-60s' $((i % 50 + 1)) \"line $i $(printf %0120d $i)\"; done; exec sleep 300"
    out = subprocess.run(
        [uexec, "run", "--json", "--tty", "--no-login", "--yield", "5000", "--", draw],
        env=env, cwd=cwd, capture_output=True,
    )
    # Exit 4: the window ended with the command still running, as asked.
    assert out.returncode == 4, (out.returncode, out.stderr)
    sid = json.loads(out.stdout)["session_id"]
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.Popen([uexec, "attach", str(sid)], env=env, cwd=cwd,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        p.stdout.read(1)
        samples.append((time.perf_counter() - t) * 1e3)
        p.kill()
        p.wait()
    subprocess.run([uexec, "kill", str(sid)], env=env, cwd=cwd, capture_output=True)
    return statistics.median(samples)


def minimal_client(uexec: str, env: dict, cwd: str, work: str) -> list[str] | None:
    """The command line of the minimal client making `uexec run --no-login -- true`'s
    exchange, built in `work`; None without rustc."""
    client = os.path.join(work, "minimal_client")
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minimal_client.rs")
    # Static where the C library allows it, as the front is (crates/uexec/build.rs).
    rustc = ["rustc", "-O", "-C", "strip=symbols", source, "-o", client]
    try:
        if subprocess.run([*rustc, "-C", "target-feature=+crt-static"], capture_output=True).returncode != 0:
            subprocess.run(rustc, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"(no minimal client: {e})")
        return None
    st = os.stat(os.path.join(os.path.dirname(uexec), "uexec-engine"))  # the daemon's build
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    hello = {
        "protocol": "uexec-daemon/1",
        "version": subprocess.run([uexec, "--version"], capture_output=True, text=True, check=True).stdout.split()[1],
        "build": f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}",
        "owner": "@person",
        "cwd": cwd,
        "env": [[b64(os.fsencode(k)), b64(os.fsencode(v))] for k, v in env.items()],
        "settings": {"shell": None, "max_output_tokens": None, "env_keep": [], "env_set": [], "env_drop": [],
                     "strip_ansi": False, "collapse_cr": False, "deterministic_ids": False, "extended": True,
                     "codex_tools_only": False, "structured": True},
    }
    messages = [
        hello,
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "uexec-bench", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "exec_command", "arguments": {"cmd": "true", "login": False, "tty": False, "yield_time_ms": 10000}}},
    ]
    request = os.path.join(work, "request")
    with open(request, "wb") as f:
        f.write(b"".join(json.dumps(m, separators=(",", ":")).encode() + b"\n" for m in messages))
    socket = os.path.join(env["XDG_RUNTIME_DIR"], "uexec", "daemon.sock")
    return [client, request, socket]


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uexec", required=True)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--front", help="another front's path, run beside a copy of --uexec's engine")
    ap.add_argument("--without-cgroups", action="store_true",
                    help="a row through a daemon whose sessions have no cgroup (root)")
    ap.add_argument("--pause-ms", type=int, default=100, help="the pause before each call of the paused rows (0: none)")
    ap.add_argument("--paused-runs", type=int, default=40)
    a = ap.parse_args()
    uexec = os.path.abspath(a.uexec)
    work = tempfile.mkdtemp(prefix="uexec-bench-")  # removed at the end, the daemons stopped

    def scratch(prefix: str) -> str:
        return tempfile.mkdtemp(prefix=prefix, dir=work)

    home = scratch("uexec-bench-home-")

    def place() -> dict:
        runtime = scratch("uexec-bench-run-")
        os.chmod(runtime, 0o700)
        place_env = {**os.environ, "HOME": home, "XDG_RUNTIME_DIR": runtime}
        place_env.pop("UEXEC_DAEMON", None)
        return place_env

    env = place()
    subprocess.run([uexec, "run", "--", "true"], env=env, cwd=home, check=True)  # starts the daemon
    # Other daemons for the extra rows: (name, front, env).
    others = []
    if a.front:
        beside = scratch("uexec-bench-front-")
        front = os.path.join(beside, "uexec")
        shutil.copy2(a.front, front)
        engine_file = os.path.join(os.path.dirname(uexec), "uexec-engine")
        try:
            # The same file: the front is of the first row's build and runs through its daemon.
            os.link(engine_file, os.path.join(beside, "uexec-engine"))
            front_env, front_daemon = env, "the same daemon"
        except OSError:  # the scratch directory is on another file system
            shutil.copy2(engine_file, beside)
            front_env, front_daemon = place(), "a daemon of its own"
            subprocess.run([front, "run", "--", "true"], env=front_env, cwd=home, check=True)
        others.append(("front", front, front_env))
    if a.without_cgroups:
        bare_env = place()
        start = without_cgroups.argv([uexec, "run", "--", "true"])  # its daemon stays there
        subprocess.run(start, env=bare_env, cwd=home, check=True)
        others.append(("bare", uexec, bare_env))

    engine = os.path.join(os.path.dirname(uexec), "uexec-engine")
    rows = {
        "bash": (["bash", "-c", "true"], None),
        "run": ([uexec, "run", "--no-login", "--", "true"], env),
        "engine": ([engine, "run", "--no-login", "--", "true"], env),
    }
    client = minimal_client(uexec, env, home, scratch("uexec-bench-minimal-"))
    if client is not None:
        rows["minimal"] = (client, env)
    for name, front, other_env in others:
        rows[name] = ([front, "run", "--no-login", "--", "true"], other_env)
    # Interleaved: a drift of the machine's speed moves every row alike.
    samples = {name: [] for name in rows}
    for _ in range(a.runs):
        for name, (argv, row_env) in rows.items():
            t = time.perf_counter()
            subprocess.run(argv, env=row_env, cwd=home, check=True)
            samples[name].append((time.perf_counter() - t) * 1e3)
    bash, run, engine_run = (statistics.median(samples[n]) for n in ("bash", "run", "engine"))
    minimal = statistics.median(samples["minimal"]) if client is not None else None
    inproc, daemon = await mcp_roundtrips([[uexec, "mcp", "--in-process"], [uexec, "mcp", "--daemon"]], env, home, a.runs)
    paused = {name: [] for name in rows}
    paused_inproc = paused_daemon = None
    if a.pause_ms:
        for _ in range(a.paused_runs):
            for name, (argv, row_env) in rows.items():
                time.sleep(a.pause_ms / 1e3)
                t = time.perf_counter()
                subprocess.run(argv, env=row_env, cwd=home, check=True)
                paused[name].append((time.perf_counter() - t) * 1e3)
        paused_inproc, paused_daemon = await mcp_roundtrips(
            [[uexec, "mcp", "--in-process"], [uexec, "mcp", "--daemon"]], env, home, a.paused_runs, a.pause_ms)
    attach = attach_ms(uexec, env, home, max(20, a.runs // 10))
    subprocess.run([uexec, "daemon", "--stop"], env=env, cwd=home, capture_output=True)
    for _, front, other_env in others:
        subprocess.run([front, "daemon", "--stop"], env=other_env, cwd=home, capture_output=True)
    shutil.rmtree(work, ignore_errors=True)

    print(f"| benchmark (median of {a.runs}) | baseline | uexec | ratio | goal |")
    print("|---|---|---|---|---|")
    print(f"| `true` end to end | {bash:.2f} ms (`bash -c true` spawn+wait) | {run:.2f} ms (`uexec run --no-login -- true`) | {run / bash:.2f}x | <= 2x |")
    print(f"| `true` end to end, the engine's own CLI | {bash:.2f} ms | {engine_run:.2f} ms (`uexec-engine run --no-login -- true`) | {engine_run / bash:.2f}x | |")
    if "front" in samples:
        other = statistics.median(samples["front"])
        print(f"| `true` end to end, another front | {bash:.2f} ms | {other:.2f} ms (`{a.front} run --no-login -- true`, through {front_daemon}) | {other / bash:.2f}x | <= 2x |")
    if "bare" in samples:
        bare = statistics.median(samples["bare"])
        print(f"| `true` end to end, sessions without cgroups | {bash:.2f} ms | {bare:.2f} ms (a daemon with the cgroup mount hidden) | {bare / bash:.2f}x | |")
    if minimal is not None:
        print(f"| `true` end to end, floor of a small client | {bash:.2f} ms | {minimal:.2f} ms (bench/minimal_client.rs, the windowed exchange of `run --until-*`) | {minimal / bash:.2f}x | |")
    print(f"| exec_command `true`, MCP round trip | {inproc:.2f} ms (`uexec mcp --in-process`) | {daemon:.2f} ms (`uexec mcp`, the daemon) | {daemon / inproc:.2f}x | <= 1.2x |")
    if a.pause_ms:
        p_bash, p_run = (statistics.median(paused[n]) for n in ("bash", "run"))
        print(f"| `true` end to end, each after a {a.pause_ms} ms pause (median of {a.paused_runs}) | {p_bash:.2f} ms | {p_run:.2f} ms | {p_run / p_bash:.2f}x | <= 2x |")
        if "bare" in paused:
            p_bare = statistics.median(paused["bare"])
            print(f"| the same, sessions without cgroups | {p_bash:.2f} ms | {p_bare:.2f} ms | {p_bare / p_bash:.2f}x (with cgroups {p_run / p_bare:.2f}x without) | |")
        print(f"| exec_command `true`, MCP round trip, each after a {a.pause_ms} ms pause | {paused_inproc:.2f} ms (in-process) | {paused_daemon:.2f} ms (the daemon) | {paused_daemon / paused_inproc:.2f}x | <= 1.2x |")
    print(f"| `uexec attach` to a 200x50 screen, spawn to first screen bytes | | {attach:.2f} ms | | < 20 ms |")


if __name__ == "__main__":
    anyio.run(main)
