#!/usr/bin/env python3
"""A client that stops reading while `uexec mcp` floods it with progress: the server's peak RSS
and how soon the result follows once the client reads again.

    python3 bench/mcp_slow_client.py target/release/uexec BYTES IDLE_SECONDS
"""
import json, subprocess, sys, time, os, tempfile
binary = sys.argv[1]; size = int(sys.argv[2]); wait_s = float(sys.argv[3])
home = tempfile.mkdtemp()
p = subprocess.Popen([binary, "mcp", "--in-process", "--codex-compat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, "HOME": home})
def send(m): p.stdin.write((json.dumps(m)+"\n").encode()); p.stdin.flush()
send({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"slow","version":"0"}}})
p.stdout.readline()
send({"jsonrpc":"2.0","method":"notifications/initialized"})
t0 = time.time()
send({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec_command","arguments":{"cmd":f"head -c {size} /dev/zero | tr '\\0' x","login":False,"yield_time_ms":30000},"_meta":{"progressToken":"t"}}})
time.sleep(wait_s)  # the client does not read
t1 = time.time()
n = 0
while True:
    line = p.stdout.readline()
    m = json.loads(line)
    if m.get("method") == "notifications/progress": n += 1
    elif m.get("id") == 2: break
t2 = time.time()
hwm = [l for l in open(f"/proc/{p.pid}/status") if l.startswith("VmHWM")][0].split()[1]
print(f"output {size} bytes, client idle {wait_s}s: VmHWM {int(hwm)/1024:.1f} MiB, {n} progress notifications, result {t2-t1:.3f}s after the client started reading, exit {m['result']['structuredContent'].get('exit_code')}")
p.stdin.close(); p.wait()
