#!/usr/bin/env python3
"""Smoke test of the executables the container image copies (CI cannot run `docker build`).

    python3 deploy/smoke_test.py target/x86_64-unknown-linux-musl/release/uexec

What it checks, as the pod would run it:
1. `uexec` and `uexec-engine` beside it are static (no ELF interpreter, no NEEDED library):
   they run on any base image;
2. `uexec serve` with the image's arguments (wss://, --token-file, --tls-cert, --tls-key
   from files; a CA-signed certificate made here with openssl) starts, as uid 10001 when
   run as root (the image's user);
3. GET /readyz (the probes' path) answers 200 without a token;
4. an agent's side, `uexec mcp --environment pod=URL` (the same binary), runs a command
   there over MCP stdio: output, exit code 0, the pod's uid;
5. a person's `uexec run` (made by the front itself once the daemon runs) prints and exits
   with the command's code.
Talks only to 127.0.0.1; everything it starts is stopped at the end.
"""

import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

POD_UID = 10001
DEADLINE_S = 30


def fail(message):
    print(f"smoke_test: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check_static(binary):
    headers = subprocess.run(
        ["readelf", "--program-headers", "--dynamic", binary],
        capture_output=True, text=True, check=True,
    ).stdout
    if "INTERP" in headers or "(NEEDED)" in headers:
        fail(f"{binary} is not static:\n{headers}")
    print(f"smoke_test: {binary} is static ({os.path.getsize(binary)} bytes)")


def make_tls(d, san="IP:127.0.0.1,DNS:localhost"):
    """A CA and a server certificate for san signed by it (as cert-manager would), and a
    token (deploy/podman/run_pod.py makes its Secrets with it too)."""
    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.crt", "-days", "1", "-subj", "/CN=smoke-ca")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{d}/tls.key", "-out", f"{d}/tls.csr", "-subj", "/CN=uexec")
    with open(f"{d}/ext.cnf", "w") as f:
        f.write(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n"
                "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", f"{d}/tls.csr", "-CA", f"{d}/ca.crt", "-CAkey", f"{d}/ca.key",
            "-CAcreateserial", "-out", f"{d}/tls.crt", "-days", "1", "-extfile", f"{d}/ext.cnf")
    with open(f"{d}/token", "w") as f:
        f.write(os.urandom(24).hex() + "\n")
    os.chmod(f"{d}/token", 0o600)


def start_pod(binary, d):
    as_pod_user = []
    if os.geteuid() == 0 and shutil.which("setpriv"):
        for name in os.listdir(d):
            os.chown(os.path.join(d, name), POD_UID, POD_UID)
        os.chown(d, POD_UID, POD_UID)
        as_pod_user = ["setpriv", f"--reuid={POD_UID}", f"--regid={POD_UID}", "--clear-groups"]
    cmd = as_pod_user + [binary, "serve", "--listen", "wss://127.0.0.1:0",
                         "--token-file", f"{d}/token",
                         "--tls-cert", f"{d}/tls.crt", "--tls-key", f"{d}/tls.key"]
    pod = subprocess.Popen(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": d})
    url = pod.stdout.readline().strip()
    if not url.startswith("wss://"):
        pod.kill()
        fail(f"serve announced no wss:// URL: {url!r}; stderr: {pod.stderr.read()}")
    return pod, url, bool(as_pod_user)


def check_readyz(url):
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    ready = "https://" + url.removeprefix("wss://") + "/readyz"
    with urllib.request.urlopen(ready, context=insecure, timeout=10) as r:
        if r.status != 200:
            fail(f"{ready} answered {r.status}")
    print(f"smoke_test: {ready} answers 200")


def run_command_there(binary, url, d):
    agent = subprocess.Popen(
        [binary, "mcp", "--in-process", "--structured", "--environment", f"pod={url}", "--remote-token-file", f"{d}/token",
         "--remote-ca", f"{d}/ca.crt"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "smoke", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "exec_command",
                    "arguments": {"cmd": "echo smoke-$UEXEC; id -u", "login": False,
                                  "environment_id": "pod", "yield_time_ms": 10000}}},
    ]
    for m in messages:
        agent.stdin.write(json.dumps(m) + "\n")
    agent.stdin.flush()
    deadline = time.monotonic() + DEADLINE_S
    answer = None
    while time.monotonic() < deadline:
        line = agent.stdout.readline()
        if not line:
            break
        msg = json.loads(line)
        if msg.get("id") == 2:
            answer = msg
            break
    agent.stdin.close()
    agent.wait(timeout=DEADLINE_S)
    if answer is None:
        fail(f"no answer to exec_command; stderr: {agent.stderr.read()}")
    return answer["result"]


def check_person_run(binary):
    """`uexec run` twice: the first starts the daemon (through the engine), the second is
    made by the front alone; both print the output and exit with the command's code."""
    home = tempfile.mkdtemp(prefix="uexec-smoke-home-")
    runtime = tempfile.mkdtemp(prefix="uexec-smoke-run-")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
           "XDG_RUNTIME_DIR": runtime}
    try:
        for attempt in ("first", "second"):
            out = subprocess.run([binary, "run", "--no-login", "--", f"echo {attempt}; exit 3"],
                                 env=env, cwd=home, capture_output=True, text=True, timeout=30)
            if out.returncode != 3 or out.stdout != f"{attempt}\n":
                fail(f"uexec run ({attempt}): exit {out.returncode}, stdout {out.stdout!r}, "
                     f"stderr {out.stderr!r}")
    finally:
        subprocess.run([binary, "daemon", "--stop"], env=env, capture_output=True, timeout=30)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(runtime, ignore_errors=True)
    print("smoke_test: a person's `uexec run` printed the output and exited with the code")


def main():
    if len(sys.argv) != 2:
        fail("usage: smoke_test.py BINARY")
    binary = os.path.abspath(sys.argv[1])
    engine = os.path.join(os.path.dirname(binary), "uexec-engine")
    check_static(binary)
    check_static(engine)
    d = tempfile.mkdtemp(prefix="uexec-smoke-")
    os.chmod(d, 0o755)
    # Copies, as the image has (and the checkout may be out of the pod user's reach).
    shutil.copy2(binary, f"{d}/uexec")
    shutil.copy2(engine, f"{d}/uexec-engine")
    binary = f"{d}/uexec"
    check_person_run(binary)
    make_tls(d)
    pod, url, as_pod_user = start_pod(binary, d)
    try:
        check_readyz(url)
        result = run_command_there(binary, url, d)
        out = result.get("structuredContent", {})
        expected_uid = str(POD_UID) if as_pod_user else str(os.geteuid())
        if result.get("isError") or out.get("exit_code") != 0 \
                or out.get("output") != f"smoke-1\n{expected_uid}\n":
            fail(f"unexpected exec_command result: {json.dumps(result)}")
        who = f"uid {expected_uid}"
        print(f"smoke_test: a command ran in the pod over wss:// with token and TLS ({who})")
    finally:
        pod.terminate()
        try:
            pod.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pod.kill()
        shutil.rmtree(d, ignore_errors=True)
    print("smoke_test: OK")


if __name__ == "__main__":
    main()
