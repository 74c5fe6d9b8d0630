#!/usr/bin/env python3
"""resources/subscribe + DELETE cycles over streamable HTTP: the server's RSS before and after.

    python3 bench/mcp_subscribe_cycles.py target/release/uexec CYCLES
"""
import http.client, json, subprocess, sys, os, re, tempfile
binary = sys.argv[1]; cycles = int(sys.argv[2])
p = subprocess.Popen([binary, "mcp", "--http", "127.0.0.1:0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "HOME": tempfile.mkdtemp()})
while True:
    line = p.stderr.readline().decode()
    m = re.search(r"http://([0-9.:]+)/mcp", line)
    if m: host, port = m.group(1).rsplit(":", 1); break
def rss():
    return int([l for l in open(f"/proc/{p.pid}/status") if l.startswith("VmRSS")][0].split()[1]) / 1024
H = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
def post(c, body, sid=None):
    h = dict(H)
    if sid: h["mcp-session-id"] = sid; h["MCP-Protocol-Version"] = "2025-06-18"
    c.request("POST", "/mcp", json.dumps(body), h)
    r = c.getresponse(); data = r.read()
    return r, data
before = rss()
for i in range(cycles):
    c = http.client.HTTPConnection(host, int(port))
    r, _ = post(c, {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"0"}}})
    sid = r.getheader("mcp-session-id")
    post(c, {"jsonrpc":"2.0","method":"notifications/initialized"}, sid)
    post(c, {"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"uexec://sessions/1000"}}, sid)
    c.request("DELETE", "/mcp", headers={"mcp-session-id": sid, "MCP-Protocol-Version": "2025-06-18"}); c.getresponse().read()
    c.close()
print(f"{cycles} subscribe+DELETE cycles: VmRSS {before:.1f} -> {rss():.1f} MiB")
p.terminate(); p.wait()
