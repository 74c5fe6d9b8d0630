"""Throughput of the network allowlist's proxy: a 256 MiB download from a host-side loopback
HTTP server, by curl run through `uexec mcp`, directly (network on) and through the proxy
(network: {"allow": [...]}), alternated in one run. Prints MiB/s per run, the medians, and
their ratio; then the CPU time per GiB of uexec and the command (the relay runs in uexec, curl
in its reaped children), a figure that machine load disturbs less than the throughput (on a
busy machine a download waits for a core; its CPU cost stays the same). Resolution: one clock
tick (10 ms) per run.

usage: python3 bench/sandbox_proxy.py --uexec target/release/uexec [--mib 256] [--runs 3]
Talks raw MCP (JSON-RPC lines over stdio): no client library needed.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import statistics
import subprocess
import tempfile
import threading

CHUNK = b"\0" * (1 << 20)


def serve(mib: int) -> int:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", str(mib << 20))
            self.end_headers()
            for _ in range(mib):
                self.wfile.write(CHUNK)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def cpu_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime of `pid` (children count once reaped)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class Mcp:
    def __init__(self, argv: list[str], home: str):
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=home,
            env={**os.environ, "HOME": home},
        )
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            message = json.loads(self.proc.stdout.readline())
            if message.get("id") == self.next_id:
                return message

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uexec", required=True)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    port = serve(args.mib)
    home = tempfile.mkdtemp(prefix="uexec-bench-proxy-")
    mcp = Mcp([os.path.abspath(args.uexec), "mcp", "--structured"], home)
    cmd = (f"curl -sS --noproxy '' -o /dev/null -w '%{{speed_download}}' "
           f"http://127.0.0.1:{port}/")
    variants = {
        "direct": "on",
        "proxy": {"allow": [f"127.0.0.1:{port}"]},
    }
    speeds: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.runs):
        for name, network in variants.items():
            before = cpu_seconds(mcp.proc.pid)
            r = mcp.request("tools/call", {"name": "exec_command", "arguments": {
                "cmd": cmd, "login": False, "yield_time_ms": 30000, "network": network}})
            output = r["result"]["structuredContent"]["output"].strip()
            mib_s = float(output) / (1 << 20)
            speeds[name].append(mib_s)
            cpu[name].append((cpu_seconds(mcp.proc.pid) - before) * 1024 / args.mib)
            print(f"{name:<7} {mib_s:8.1f} MiB/s  {cpu[name][-1] * 1000:6.0f} ms CPU/GiB")
    mcp.close()
    direct = statistics.median(speeds["direct"])
    proxy = statistics.median(speeds["proxy"])
    print(f"{args.mib} MiB, median of {args.runs}: direct {direct:.1f} MiB/s, "
          f"proxy {proxy:.1f} MiB/s, proxy/direct {proxy / direct:.2f}")
    cpu_direct = statistics.median(cpu["direct"])
    cpu_proxy = statistics.median(cpu["proxy"])
    print(f"CPU per GiB (uexec + command), median: direct {cpu_direct * 1000:.0f} ms, "
          f"proxy {cpu_proxy * 1000:.0f} ms, proxy/direct {cpu_proxy / cpu_direct:.2f}")


if __name__ == "__main__":
    main()
