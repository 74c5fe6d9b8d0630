#!/usr/bin/env python3
"""Cold start of `uexec mcp`: from spawning the binary to the `initialize` answer, over stdio.

    cargo build --release -p uexec && python3 bench/cold_start.py target/release/uexec [RUNS]

Prints the binary's size and the median, min and max of RUNS starts (empty HOME).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

binary = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 50
home = tempfile.mkdtemp()
init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "cold-start", "version": "0"}}}) + "\n"
times = []
for _ in range(runs):
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env={"HOME": home, "PATH": os.environ["PATH"]})
    p.stdin.write(init.encode())
    p.stdin.flush()
    line = p.stdout.readline()
    times.append((time.perf_counter() - t0) * 1000)
    assert b'"id":1' in line, line
    p.stdin.close()
    p.wait()
size = os.path.getsize(binary) / (1024 * 1024)
print(f"binary {size:.1f} MiB; initialize answered after {statistics.median(times):.2f} ms "
      f"(median of {runs}; min {min(times):.2f}, max {max(times):.2f})")
