#!/usr/bin/env python3
"""Terminating idle sessions on `uexec serve` (issue 41): how long from the terminates to
every process's `process/exited` and `process/closed`, run after run.

    cargo build --release -p uexec && python3 bench/terminate_idle.py [--uexec PATH]
        [--sessions 32] [--runs 20] [--kind plain|jobs] [--idle-ms 200]

Each run starts SESSIONS idle processes at once through one `uexec serve --listen stdio`
(half `sleep 600` on pipes with stdin open, half an interactive `bash` on a PTY), waits
until every one answered its start, then sends every `process/terminate` at once, and
times the answers, the last `process/exited` and the last `process/closed`. One run that
takes seconds where the others take milliseconds is what this is for: the slowest run is
printed beside the median, and every run above a second is named. Standard library only;
an empty HOME; the server is the same for every run (as an agent's is).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time


class Serve:
    def __init__(self, uexec, home):
        self.proc = subprocess.Popen(
            [uexec, "serve", "--listen", "stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=home,
            env={"HOME": home, "PATH": os.environ.get("PATH", "")},
        )
        self.next_id = 0
        self.cond = threading.Condition()
        self.responses = {}
        # processId -> monotonic time of its exited / closed notification
        self.exited = {}
        self.closed = {}
        threading.Thread(target=self._read, daemon=True).start()
        self.request("initialize", {"clientName": "terminate-idle"})
        self.send({"method": "initialized", "params": {}})

    def _read(self):
        for line in self.proc.stdout:
            now = time.monotonic()
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self.cond:
                method = msg.get("method")
                if method in ("process/exited", "process/closed"):
                    key = msg["params"]["processId"]
                    (self.exited if method == "process/exited" else self.closed)[key] = now
                elif "id" in msg and method is None:
                    self.responses[msg["id"]] = (now, msg)
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def send_request(self, method, params):
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        return self.next_id

    def wait(self, rid, timeout=30):
        with self.cond:
            if not self.cond.wait_for(lambda: rid in self.responses, timeout):
                raise TimeoutError(f"no answer to request {rid} in {timeout}s")
            at, msg = self.responses.pop(rid)
        if "error" in msg:
            raise RuntimeError(msg["error"])
        return at, msg["result"]

    def request(self, method, params):
        return self.wait(self.send_request(method, params))[1]

    def wait_all(self, table, keys, timeout=30):
        with self.cond:
            if not self.cond.wait_for(lambda: all(k in table for k in keys), timeout):
                missing = [k for k in keys if k not in table]
                raise TimeoutError(f"{len(missing)} never reported: {missing[:4]}")
            return max(table[k] for k in keys)

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


KINDS = {
    # an idle command on a pipe (stdin open), and an interactive shell at its prompt
    "plain": (["/bin/bash", "-c", "sleep 600"], ["/bin/bash", "-i"]),
    # the same with a job of their own in the background (a descendant holding the output)
    "jobs": (["/bin/bash", "-c", "sleep 600 & sleep 600"], ["/bin/bash", "-ic", "sleep 600 & exec bash -i"]),
}


def one_run(serve, run, sessions, home, kind="plain", idle=0.2):
    keys = [f"r{run}-{i}" for i in range(sessions)]
    sent = []
    for i, key in enumerate(keys):
        tty = i % 2 == 1
        params = {
            "processId": key,
            "argv": KINDS[kind][1] if tty else KINDS[kind][0],
            "cwd": "file://" + home,
            "env": {"PATH": os.environ.get("PATH", ""), "HOME": home},
            "tty": tty,
            "pipeStdin": not tty,
        }
        sent.append(serve.send_request("process/start", params))
    for rid in sent:
        serve.wait(rid)
    time.sleep(idle)  # idle: the shells at their prompts, the sleeps asleep
    t = time.monotonic()
    sent = [serve.send_request("process/terminate", {"processId": k}) for k in keys]
    answered = max(serve.wait(rid)[0] for rid in sent)
    exited = serve.wait_all(serve.exited, keys)
    closed = serve.wait_all(serve.closed, keys)
    return answered - t, exited - t, closed - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uexec", default="target/release/uexec")
    ap.add_argument("--sessions", type=int, default=32)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--kind", choices=sorted(KINDS), default="plain", help="what the sessions run")
    ap.add_argument("--idle-ms", type=int, default=200, help="how long they sit idle before the terminates")
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="uexec-terminate-idle-")
    serve = Serve(os.path.abspath(a.uexec), home)
    rows = []
    try:
        for run in range(a.runs):
            load = os.getloadavg()[0]
            answered, exited, closed = one_run(serve, run, a.sessions, home, a.kind, a.idle_ms / 1e3)
            rows.append((answered, exited, closed))
            flag = "  <-- slow" if closed > 1 else ""
            print(
                f"run {run:2}: answered {answered * 1e3:7.1f} ms, last exited {exited * 1e3:7.1f} ms, "
                f"last closed {closed * 1e3:7.1f} ms (load {load:.2f}){flag}",
                flush=True,
            )
    finally:
        serve.close()
    for name, col in zip(["answered", "last exited", "last closed"], zip(*rows)):
        print(f"{name}: median {statistics.median(col) * 1e3:.1f} ms, max {max(col) * 1e3:.1f} ms")
    sys.exit(0)


if __name__ == "__main__":
    main()
