#!/usr/bin/env python3
"""Cold start of `uexec mcp`: from spawning the executable to the `initialize` answer, over
stdio.

    cargo build --release -p uexec && python3 bench/cold_start.py target/release/uexec [RUNS]

With `uexec` (the front, which execs the engine for `mcp`), `uexec-engine mcp` beside it is
timed too, interleaved start by start. Prints each one's size and the median, min and max
of RUNS starts (empty HOME).
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
binaries = [binary]
engine = os.path.join(os.path.dirname(binary), "uexec-engine")
if os.path.basename(binary) == "uexec" and os.path.exists(engine):
    binaries.append(engine)
home = tempfile.mkdtemp()
init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "cold-start", "version": "0"}}}) + "\n"
times = {b: [] for b in binaries}
for _ in range(runs):
    for b in binaries:
        t0 = time.perf_counter()
        p = subprocess.Popen([b, "mcp", "--in-process"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env={"HOME": home, "PATH": os.environ["PATH"]})
        p.stdin.write(init.encode())
        p.stdin.flush()
        line = p.stdout.readline()
        times[b].append((time.perf_counter() - t0) * 1000)
        assert b'"id":1' in line, line
        p.stdin.close()
        p.wait()
for b, ts in times.items():
    size = os.path.getsize(b) / (1024 * 1024)
    print(f"{os.path.basename(b)} {size:.1f} MiB; `mcp` answered initialize after "
          f"{statistics.median(ts):.2f} ms (median of {runs}; min {min(ts):.2f}, max {max(ts):.2f})")
