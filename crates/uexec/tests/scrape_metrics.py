#!/usr/bin/env python3
"""uexec's figures read by a real Prometheus parser (the `prometheus_client` package's), as a
scraper or node_exporter's textfile collector would read them.

    python3 -m venv .metrics-venv && .metrics-venv/bin/pip install prometheus-client==0.26.0 websockets==17.4
    .metrics-venv/bin/python crates/uexec/tests/scrape_metrics.py target/release/uexec

1. A daemon of its own (private runtime directory, empty HOME): `uexec run` a command that
   succeeds, one that fails, one refused by the sandbox ceiling... then `uexec metrics`, parsed.
2. `uexec serve` with a token: a process started and run to its end over the wire, then
   `GET /metrics` with the token (200, parsed) and without (401).
Each family must parse with the type uexec declares, and the samples must say what
happened. Exit 0 only if every check held; the daemon and the server are stopped whatever
happens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

UEXEC = os.path.abspath(sys.argv[1])
FAILURES: list[str] = []

FAMILIES = {
    "uexec_sessions": "gauge",
    "uexec_spawns": "counter",
    "uexec_spawn_failures": "counter",
    "uexec_exits": "counter",
    "uexec_output_bytes": "counter",
    "uexec_session_cpu_seconds": "histogram",
    "uexec_session_memory_peak_bytes": "histogram",
    "uexec_call_duration_seconds": "histogram",
}


def check(ok: bool, what: str) -> None:
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def parse(text: str, where: str) -> dict[str, dict]:
    """Every family by name: its type and its samples as {(name, labels): value}."""
    families = {}
    for family in text_string_to_metric_families(text):
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
        families[family.name] = {"type": family.type, "samples": samples}
    for name, kind in FAMILIES.items():
        got = families.get(name, {}).get("type")
        check(got == kind, f"{where}: {name} parses as a {kind} (got {got})")
    return families


def value(families: dict, family: str, sample: str, **labels) -> float:
    return families.get(family, {}).get("samples", {}).get((sample, tuple(sorted(labels.items()))), -1.0)


def daemon_figures(env: dict) -> None:
    run = lambda *argv: subprocess.run([UEXEC, "run", "--no-login", *argv], env=env,  # noqa: E731
                                       stdin=subprocess.DEVNULL, capture_output=True)
    check(run("--", "echo", "scraped").returncode == 0, "uexec run echo")
    check(run("--", "sh", "-c", "exit 3").returncode == 3, "uexec run exit 3")
    text = subprocess.run([UEXEC, "metrics"], env=env, capture_output=True, text=True, check=True).stdout
    families = parse(text, "uexec metrics")
    check(value(families, "uexec_spawns", "uexec_spawns_total") == 2, "two spawns counted")
    check(value(families, "uexec_exits", "uexec_exits_total", cause="success") == 1, "one success")
    check(value(families, "uexec_exits", "uexec_exits_total", cause="error") == 1, "one error")
    check(value(families, "uexec_output_bytes", "uexec_output_bytes_total") >= len("scraped\n"), "bytes out")
    check(value(families, "uexec_sessions", "uexec_sessions", state="running") == 0, "none running")
    check("scraped" not in text and "exit 3" not in text, "no command line in the text")


def serve_figures(env: dict, work: str) -> None:
    token = os.path.join(work, "token")
    with open(token, "w") as f:
        f.write("scrape-token\n")
    os.chmod(token, 0o600)
    server = subprocess.Popen([UEXEC, "serve", "--listen", "ws://127.0.0.1:0", "--token-file", token],
                              env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in server.stdout:
            if line.startswith("ws://"):
                url = line.strip()
                break
        check(url is not None, "uexec serve announced its URL")
        if url is None:
            return
        base = "http://" + url.removeprefix("ws://")
        run_over_the_wire(url, "scrape-token")
        request = urllib.request.Request(base + "/metrics", headers={"Authorization": "Bearer scrape-token"})
        with urllib.request.urlopen(request, timeout=10) as response:
            check(response.status == 200, "GET /metrics with the token: 200")
            check(response.headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"),
                  "its content type is Prometheus text 0.0.4")
            text = response.read().decode()
        families = parse(text, "uexec serve /metrics")
        check(value(families, "uexec_spawns", "uexec_spawns_total") == 1, "serve: one spawn")
        check(value(families, "uexec_exits", "uexec_exits_total", cause="success") == 1, "serve: one success")
        check(value(families, "uexec_call_duration_seconds", "uexec_call_duration_seconds_count",
                    call="process/start") == 1, "serve: process/start timed")
        try:
            urllib.request.urlopen(base + "/metrics", timeout=10)
            check(False, "GET /metrics without the token is refused")
        except urllib.error.HTTPError as e:
            check(e.code == 401, f"GET /metrics without the token: 401 (got {e.code})")
    finally:
        server.terminate()
        server.wait(timeout=30)


def run_over_the_wire(url: str, token: str) -> None:
    """initialize, initialized, process/start `true`, then read until it closed."""
    from websockets.sync.client import connect  # noqa: PLC0415

    with connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        def ask(i, method, params):
            ws.send(json.dumps({"id": i, "method": method, "params": params}))
            while True:
                msg = json.loads(ws.recv(timeout=30))
                if msg.get("id") == i:
                    return msg
        ask(1, "initialize", {"clientName": "scrape"})
        ws.send(json.dumps({"method": "initialized", "params": {}}))
        started = ask(2, "process/start", {"processId": "p", "argv": ["true"], "cwd": "file:///",
                                           "env": {}, "tty": False})
        check("result" in started, f"process/start answered: {started}")
        closed = ask(3, "process/read", {"processId": "p", "afterSeq": 0, "waitMs": 10000})
        check(closed.get("result", {}).get("closed") is True or "exitCode" in json.dumps(closed),
              "the process ran to its end")


def main() -> int:
    work = tempfile.mkdtemp(prefix="uexec-scrape-")
    runtime = os.path.join(work, "run")
    os.mkdir(runtime, 0o700)
    os.mkdir(os.path.join(work, "home"))
    env = {"PATH": os.environ["PATH"], "HOME": os.path.join(work, "home"), "XDG_RUNTIME_DIR": runtime}
    try:
        daemon_figures(env)
        serve_figures(env, work)
    finally:
        subprocess.run([UEXEC, "daemon", "--stop"], env=env, capture_output=True, check=False)
        subprocess.run(["rm", "-rf", work], check=False)
    print(f"{'FAILED: ' + str(len(FAILURES)) if FAILURES else 'all checks passed'}")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
