#!/usr/bin/env python3
"""Cold start of `uexec mcp`: from spawning the executable to the `initialize` answer, over
stdio.

    cargo build --release -p uexec && python3 bench/cold_start.py target/release/uexec [RUNS]

Times `uexec mcp --in-process` (the server answers itself) and a plain `uexec mcp`, which
relays to the user's daemon (already running: it is started once before the runs, in a
private runtime directory, and stopped at the end); with `uexec` (the front, which execs
the engine for `mcp`), `uexec-engine mcp --in-process` beside it is timed too. Starts are
interleaved; prints each one's median, min and max of RUNS starts (empty HOME).
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
runtime = tempfile.mkdtemp()
env = {"HOME": home, "PATH": os.environ["PATH"], "XDG_RUNTIME_DIR": runtime}
starts = {"uexec mcp --in-process": [binary, "mcp", "--in-process"],
          "uexec mcp (the daemon, running)": [binary, "mcp"]}
engine = os.path.join(os.path.dirname(binary), "uexec-engine")
if os.path.basename(binary) == "uexec" and os.path.exists(engine):
    starts["uexec-engine mcp --in-process"] = [engine, "mcp", "--in-process"]
init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "cold-start", "version": "0"}}}) + "\n"


def start(argv):
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    p.stdin.write(init.encode())
    p.stdin.flush()
    line = p.stdout.readline()
    took = (time.perf_counter() - t0) * 1000
    assert b'"id":1' in line, line
    p.stdin.close()
    p.wait()
    return took


try:
    start(starts["uexec mcp (the daemon, running)"])  # starts the daemon
    times = {label: [] for label in starts}
    for _ in range(runs):
        for label, argv in starts.items():
            times[label].append(start(argv))
finally:
    subprocess.run([binary, "daemon", "--stop"], env=env, stdout=subprocess.DEVNULL, check=False)
for label, ts in times.items():
    size = os.path.getsize(starts[label][0]) / (1024 * 1024)
    print(f"{label} ({size:.1f} MiB executable): answered initialize after "
          f"{statistics.median(ts):.2f} ms (median of {runs}; min {min(ts):.2f}, max {max(ts):.2f})")
