#!/usr/bin/env python3
"""Benchmark exec servers speaking the Codex exec-server dialect: uexec serve vs codex exec-server.

Measures, against each server in turn (same client, same machine, same run):

* latency from sending ``process/start`` to receiving ``process/closed`` for ``true`` and
  ``echo hi`` (sequential runs on one connection; median, p90, mean);
* throughput of a 256 MiB flood (``head -c 268435456 /dev/zero | tr '\\0' a``): time from
  ``process/start`` to ``process/closed`` with every output byte received, in MiB/s, and the
  CPU time the server process spent on it (its children excluded);

then prints uexec/codex ratios (latency: lower is better; throughput: higher is better).

Usage (needs Python >= 3.10 and ``websockets``; the wire suite's venv has it)::

    .wire-venv/bin/python crates/uexec-server/bench/bench.py \\
        --uexec target-helper/release/uexec \\
        --codex /tmp/codexpeer/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex

Either server may be omitted. ``--runs`` sets latency samples, ``--flood-bytes`` the flood size.
The client decodes no base64 on the hot path (chunk sizes are computed from the base64 length),
so it stays cheap next to the servers; it is still one Python process, so absolute throughput is
a floor, and the ratio is what to read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from websockets.asyncio.client import connect

FLOOD_BYTES_DEFAULT = 268435456
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


class Server:
    """A server process started with ``--listen ws://127.0.0.1:0``; the URL is its first stdout line."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str] | None = None):
        self.name = name
        self.argv = argv
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def __enter__(self) -> "Server":
        env = dict(os.environ)
        env.update(self.env or {})
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        m = re.search(r"ws://\S+", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"{self.name}: no URL on stdout: {line!r}")
        self.url = m.group(0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (not its children), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def b64_len(text: str) -> int:
    return len(text) // 4 * 3 - text.endswith("=") - text.endswith("==")


class Client:
    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0

    @classmethod
    async def open(cls, url: str) -> "Client":
        ws = await connect(url, max_size=None, compression=None, ping_interval=None, max_queue=64)
        client = cls(ws)
        await client.call("initialize", {"clientName": "uexec-bench"})
        await ws.send(json.dumps({"method": "initialized", "params": {}}))
        return client

    async def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        rid = self.next_id
        await self.ws.send(json.dumps({"id": rid, "method": method, "params": params}))
        while True:
            msg = json.loads(await self.ws.recv())
            if msg.get("id") == rid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    async def run_to_close(self, pid: str, argv: list[str]) -> tuple[float, int]:
        """Start a process; return (seconds from start request to closed, output bytes)."""
        self.next_id += 1
        rid = self.next_id
        params = {"processId": pid, "argv": argv, "cwd": "file://" + tempfile.gettempdir(),
                  "env": ENV, "tty": False, "pipeStdin": False, "arg0": None}
        t0 = time.perf_counter()
        await self.ws.send(json.dumps({"id": rid, "method": "process/start", "params": params}))
        out_bytes = 0
        tag = '"processId":"%s"' % pid
        while True:
            raw = await self.ws.recv()
            if isinstance(raw, bytes):
                raw = raw.decode()
            if '"process/output"' in raw and tag in raw:
                start = raw.index('"chunk":"') + 9
                out_bytes += b64_len(raw[start:raw.index('"', start)])
                continue
            if '"process/closed"' in raw and tag in raw:
                return time.perf_counter() - t0, out_bytes
            msg = json.loads(raw)
            if msg.get("id") == rid and "error" in msg:
                raise RuntimeError(f"process/start: {msg['error']}")


async def bench(server: Server, runs: int, flood_bytes: int) -> dict[str, object]:
    client = await Client.open(server.url)
    results: dict[str, object] = {}
    for label, argv in [("true", ["true"]), ("echo hi", ["/bin/sh", "-c", "echo hi"])]:
        await client.run_to_close(f"warm-{label}", argv)
        samples = []
        for i in range(runs):
            dt, _ = await client.run_to_close(f"{label}-{i}", argv)
            samples.append(dt * 1000)
        samples.sort()
        results[label] = {
            "median_ms": statistics.median(samples),
            "p90_ms": samples[int(0.9 * (len(samples) - 1))],
            "mean_ms": statistics.fmean(samples),
        }
    script = f"head -c {flood_bytes} /dev/zero | tr '\\0' a"
    assert server.proc is not None
    cpu0 = cpu_seconds(server.proc.pid)
    dt, got = await client.run_to_close("flood", ["/bin/sh", "-c", script])
    cpu = cpu_seconds(server.proc.pid) - cpu0
    if got != flood_bytes:
        raise RuntimeError(f"{server.name}: flood delivered {got} of {flood_bytes} bytes")
    results["flood"] = {"seconds": dt, "mib_per_s": flood_bytes / 2**20 / dt, "server_cpu_s": cpu}
    await client.ws.close()
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--uexec", help="path of the uexec binary")
    ap.add_argument("--codex", help="path of the codex binary (0.171.0)")
    ap.add_argument("--runs", type=int, default=100, help="latency samples per command (default 100)")
    ap.add_argument("--flood-bytes", type=int, default=FLOOD_BYTES_DEFAULT)
    args = ap.parse_args()

    servers = []
    if args.uexec:
        servers.append(Server("uexec", [args.uexec, "serve", "--listen", "ws://127.0.0.1:0"]))
    if args.codex:
        home = tempfile.mkdtemp(prefix="bench-codex-home-")
        servers.append(Server("codex", [args.codex, "exec-server", "--listen", "ws://127.0.0.1:0"], {"HOME": home}))
    if not servers:
        ap.error("give --uexec and/or --codex")

    all_results: dict[str, dict[str, object]] = {}
    for server in servers:
        with server:
            all_results[server.name] = asyncio.run(bench(server, args.runs, args.flood_bytes))

    print(f"runs={args.runs} flood={args.flood_bytes} bytes, cpus={os.cpu_count()}")
    for name, res in all_results.items():
        print(f"\n{name}:")
        for label in ("true", "echo hi"):
            r = res[label]
            print(f"  {label:8} start->closed median {r['median_ms']:.2f} ms  p90 {r['p90_ms']:.2f} ms  mean {r['mean_ms']:.2f} ms")
        f = res["flood"]
        print(f"  flood    {f['seconds']:.2f} s  {f['mib_per_s']:.0f} MiB/s  server CPU {f['server_cpu_s']:.2f} s")
    if "uexec" in all_results and "codex" in all_results:
        u, c = all_results["uexec"], all_results["codex"]
        print("\nuexec / codex (latency: < 1 is faster; throughput: > 1 is faster):")
        for label in ("true", "echo hi"):
            print(f"  {label:8} median latency ratio {u[label]['median_ms'] / c[label]['median_ms']:.2f}")
        print(f"  flood    throughput ratio {u['flood']['mib_per_s'] / c['flood']['mib_per_s']:.2f}"
              f"  server CPU ratio {u['flood']['server_cpu_s'] / c['flood']['server_cpu_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
