"""`login: true` round trip with a slow profile (not a test): uexec's shell snapshot against
a real login shell, in one run, medians.

The HOME has a `.bash_profile` that sleeps 300 ms (as pyenv/nvm/conda profiles cost) and
sets a variable, a function, an alias, a PATH entry and `shopt -s extglob`. Rows:
  * direct spawn+wait of `bash -c true` and `bash -lc true` (HOME = that profile);
  * `uexec mcp` exec_command {cmd: "true", login: false}  (non-login spawn through uexec);
  * `uexec mcp` exec_command {cmd: "true", login: true}   (the snapshot, after the first);
  * `uexec mcp --no-shell-snapshot`, login: true          (a real login every time).
Goal (issue 11): snapshot login <= 1.3x the non-login spawn through uexec.

Usage: python3 bench/login_snapshot.py --uexec target/release/uexec [--runs 30]
No dependencies: a minimal MCP client over stdio (newline-delimited JSON-RPC).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

PROFILE = """sleep 0.3
export PROFILE_VAR=profile
greet() { echo hello; }
alias ll='ls -l'
shopt -s extglob
export PATH="$HOME/bin:$PATH"
"""


class Mcp:
    def __init__(self, argv: list[str], home: str):
        env = {**os.environ, "HOME": home}
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=home)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg: dict) -> None:
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            msg = json.loads(self.p.stdout.readline())
            if msg.get("id") == self.next_id:
                assert "error" not in msg, msg
                return msg["result"]

    def exec_ms(self, args: dict) -> float:
        t = time.perf_counter()
        r = self.request("tools/call", {"name": "exec_command", "arguments": args})
        ms = (time.perf_counter() - t) * 1e3
        assert not r.get("isError"), r
        return ms

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=10)


def median_ms(f, runs: int) -> float:
    return statistics.median(f() for _ in range(runs))


def spawn_ms(argv: list[str], home: str) -> float:
    t = time.perf_counter()
    subprocess.run(argv, check=True, env={**os.environ, "HOME": home})
    return (time.perf_counter() - t) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uexec", default="target/release/uexec")
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="uexec-bench-home-")
    os.mkdir(os.path.join(home, "bin"))
    with open(os.path.join(home, ".bash_profile"), "w") as f:
        f.write(PROFILE)
    slow_runs = max(5, a.runs // 3)

    base = [os.path.abspath(a.uexec), "mcp", "--in-process", "--shell", "/bin/bash"]
    snap = Mcp(base, home)
    first = snap.exec_ms({"cmd": "true", "login": True})  # builds the snapshot
    for _ in range(5):
        snap.exec_ms({"cmd": "true", "login": False})
        snap.exec_ms({"cmd": "true", "login": True})
    rows = {}
    rows["direct `bash -c true`"] = median_ms(lambda: spawn_ms(["bash", "-c", "true"], home), a.runs)
    rows["direct `bash -lc true` (300 ms profile)"] = median_ms(
        lambda: spawn_ms(["bash", "-lc", "true"], home), slow_runs)
    rows["uexec mcp, login: false"] = median_ms(lambda: snap.exec_ms({"cmd": "true", "login": False}), a.runs)
    rows["uexec mcp, login: true (snapshot)"] = median_ms(lambda: snap.exec_ms({"cmd": "true", "login": True}), a.runs)
    snap.close()
    real = Mcp(base + ["--no-shell-snapshot"], home)
    rows["uexec mcp --no-shell-snapshot, login: true"] = median_ms(
        lambda: real.exec_ms({"cmd": "true", "login": True}), slow_runs)
    real.close()
    shutil.rmtree(home, ignore_errors=True)

    nonlogin = rows["uexec mcp, login: false"]
    print(f"first login call (builds the snapshot): {first:.1f} ms")
    print("| row | median ms | x uexec login:false |")
    print("|---|---:|---:|")
    for name, ms in rows.items():
        print(f"| {name} | {ms:.1f} | {ms / nonlogin:.2f} |")
    print(f"\nsnapshot login / bash -lc: {rows['uexec mcp, login: true (snapshot)'] / rows['direct `bash -lc true` (300 ms profile)']:.3f}")


if __name__ == "__main__":
    main()
