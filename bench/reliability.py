#!/usr/bin/env python3
"""Soak and chaos suite for the `uexec` binary: figures, not pass/fail timings.

    cargo build --release -p uexec && python3 bench/reliability.py [--uexec PATH]
        [--sessions 1000] [--trials 100] [--flood-secs 60] [--daemon-sessions 5000]
        [--only soak,crash,flood,descendants,daemon-soak,disk]

1. soak: SESSIONS sessions of mixed fate (exit, terminate, prune, client disconnect, Ctrl-C),
   PTY and pipe, through `uexec mcp --in-process` and `uexec serve --listen stdio`.
   Afterwards the long-lived servers' open fds, threads and RSS are compared with their
   baseline, and no zombie child nor orphaned session process may remain.
2. crash: TRIALS times, a `uexec mcp` and a `uexec serve` each holding 20 sessions (half of
   them with a `cmd &` background job) are SIGKILLed; 1 s later nothing of theirs may live.
3. flood: `yes` for FLOOD_SECS with a progress token, through a client that never reads;
   the peak RSS of `uexec mcp` (UEXEC_FLOOD_EXTRA adds flags, e.g. --no-transcripts).
4. descendants: TRIALS times each, sessions with a `setsid -f` and a double-forked
   descendant are terminated, or their server SIGKILLed (and TRIALS/5 times their daemon):
   nothing of theirs may live 5 s later.
5. daemon-soak: DAEMON_SESSIONS sessions through one daemon, transcripts on; its RSS, fds
   and threads every 500 sessions must level off.
6. disk: transcripts on a full disk (a 512 KiB tmpfs), in a read-only directory, and in a
   directory deleted while a session writes: every command ends normally, and every byte
   range a result says `read_output` has reads back (mount namespaces of their own).

Servers run in one scratch directory (removed at the end, whatever happens) with an empty
HOME and every command with `login: false`. Standard library only. Exit status 1 when a
check fails (zombie, orphan, survivor, leak, a false claim).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = f"{os.getpid()}{int(time.time()) % 100000}"
# The binary under test (set by main).
UEXEC_PATH = [""]
# Every server's directory (its HOME, transcripts among them) lives here; removed at exit.
SCRATCH = tempfile.mkdtemp(prefix="uexec-rel-")
FAILURES = []
# The flood stops there: past it, growth is unbounded and the machine is at risk.
FLOOD_RSS_CAP_MIB = 1024
FLOOD_EXTRA = os.environ.get("UEXEC_FLOOD_EXTRA", "").split()


def check(ok, what):
    if not ok:
        FAILURES.append(what)
        print(f"  FAIL: {what}", flush=True)


# ---------------------------------------------------------------- /proc


def stat(pid):
    """(state, ppid) of pid, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return rest[0], int(rest[1])
    except (OSError, IndexError, ValueError):
        return None


def all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def zombie_children(parent):
    return [p for p in all_pids() if (s := stat(p)) and s[1] == parent and s[0] == "Z"]


def live_with(needle):
    """Non-zombie processes whose command line contains needle."""
    found = []
    for pid in all_pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        s = stat(pid)
        if needle in cmdline and s and s[0] != "Z" and pid != os.getpid():
            found.append(pid)
    return found


def describe(pids):
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmdline = "?"
        out.append(f"{pid} (parent {(stat(pid) or ('?', '?'))[1]}: {cmdline})")
    return ", ".join(out)


def resources(pid):
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    status = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            status[key] = value.strip()
    return {
        "fds": fds,
        "threads": int(status["Threads"]),
        "rss_kib": int(status["VmRSS"].split()[0]),
    }


def wait_until(what, cond, timeout):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# ---------------------------------------------------------------- clients


class Server:
    """`uexec mcp` or `uexec serve --listen stdio`, spoken to in newline-delimited JSON-RPC."""

    def __init__(self, uexec, face, read=True, extra=(), env=None, argv=None):
        self.dir = tempfile.mkdtemp(dir=SCRATCH)
        os.makedirs(os.path.join(self.dir, "home"))
        # The mcp face in its own process: the figures are of the process that owns the
        # sessions (`--in-process`; the daemon has a part of its own, `daemon_soak`).
        if argv is None:
            argv = [uexec, "mcp", "--in-process", "--codex-compat"] if face == "mcp" else [uexec, "serve", "--listen", "stdio"]
            argv += list(extra)
        env = {"HOME": os.path.join(self.dir, "home"), "PATH": os.environ.get("PATH", ""), **(env or {})}
        self.face = face
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.dir,
            env=env,
        )
        self.pid = self.proc.pid
        self.next_id = 0
        self.start_handles = {}
        self.responses = {}
        self.cond = threading.Condition()
        if read:
            threading.Thread(target=self._read, daemon=True).start()
            if face == "mcp":
                self.request(
                    "initialize",
                    {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "reliability", "version": "0"},
                    },
                )
                self.notify("notifications/initialized")
            else:
                self.request("initialize", {"clientName": "reliability"})
                self.notify("initialized")

    def _read(self):
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "id" in msg and "method" not in msg:
                with self.cond:
                    self.responses[msg["id"]] = msg
                    self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def notify(self, method, params=None):
        self.send({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    def request(self, method, params, timeout=30):
        return self.wait(self.send_request(method, params), method, timeout)

    def send_request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def wait(self, rid, what, timeout=30):
        with self.cond:
            ok = self.cond.wait_for(lambda: rid in self.responses, timeout)
            if not ok:
                raise TimeoutError(f"{self.face}: no answer to {what} in {timeout}s")
            msg = self.responses.pop(rid)
        if "error" in msg:
            raise RuntimeError(f"{self.face} {what}: {msg['error']}")
        return msg["result"]

    def tool(self, name, arguments, meta=None):
        params = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        result = self.request("tools/call", params)
        return result.get("structuredContent") or {}

    # --- one session, either face

    def start(self, cmd, tty, pid_key):
        """Starts `bash -c cmd`; returns the handle to act on it."""
        return self.start_all([(cmd, tty, pid_key)])[0]

    def start_all(self, specs):
        """Starts every `(cmd, tty, pid_key)` at once; their handles once all have answered."""
        sent = []
        for cmd, tty, pid_key in specs:
            if self.face == "mcp":
                arguments = {"cmd": cmd, "tty": tty, "login": False, "yield_time_ms": 50}
                sent.append(self.send_request("tools/call", {"name": "exec_command", "arguments": arguments}))
            else:
                # bash, as `uexec mcp` uses here: dash (/bin/sh) catches SIGINT while it
                # starts and loses one that lands before its exec (9 of 50 plain `sh -c
                # 'sleep 30'` spawns outlive an immediate SIGINT even without uexec).
                params = {
                    "processId": pid_key,
                    "argv": ["/bin/bash", "-c", cmd],
                    "cwd": "file://" + self.dir,
                    "env": {"PATH": os.environ.get("PATH", "")},
                    "tty": tty,
                    "pipeStdin": not tty,
                }
                sent.append(self.send_request("process/start", params))
        handles = []
        for rid, (_, _, pid_key) in zip(sent, specs):
            result = self.wait(rid, "start")
            if self.face == "mcp":
                handles.append((result.get("structuredContent") or {}).get("session_id"))
            else:
                handles.append(pid_key)
        return handles

    def terminate(self, handle):
        if self.face == "mcp":
            self.tool("terminate_session", {"session_id": handle})
        else:
            self.request("process/terminate", {"processId": handle})

    def ctrl_c(self, handle):
        if self.face == "mcp":
            self.tool("write_stdin", {"session_id": handle, "chars": "\u0003", "yield_time_ms": 50})
        else:
            self.request("process/signal", {"processId": handle, "signal": "interrupt"})

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.forget()

    def forget(self):
        """Removes the server's directory (its transcripts: hundreds of MB a run)."""
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------- soak


FATES = ["exit", "terminate", "prune", "ctrl-c", "disconnect"]


def fate_at(i):
    """(face, fate) of the soak's i-th session."""
    face = "mcp" if i % 2 == 0 else "serve"
    fate = FATES[(i // 2) % len(FATES)]
    if fate == "prune" and face == "serve":
        fate = "exit"  # the exec server does not prune running processes
    return face, fate


def tty_at(i):
    """Whether the soak's i-th session has a PTY (Ctrl-C through MCP needs one: it is typed)."""
    face, fate = fate_at(i)
    return (i // 10) % 2 == 0 or (face, fate) == ("mcp", "ctrl-c")


def soak(uexec, sessions):
    print(f"soak: {sessions} sessions of mixed fate", flush=True)
    servers = {face: Server(uexec, face) for face in ("mcp", "serve")}
    tag = f"3600.{RUN}0"
    # Warm up, then take the baseline.
    for face, server in servers.items():
        for i in range(10):
            server.start("echo warm", i % 2 == 0, f"warm-{i}")
    time.sleep(1)
    baseline = {face: resources(s.pid) for face, s in servers.items()}
    counts = {}
    started = time.monotonic()
    prune_held = []
    disconnect_batch = []
    peak_zombies = 0
    for i in range(sessions):
        face, fate = fate_at(i)
        tty = tty_at(i)
        counts[(face, fate, tty)] = counts.get((face, fate, tty), 0) + 1
        server = servers[face]
        key = f"p{i}"
        if fate == "exit":
            server.start(f"echo {i}; exit {i % 3}", tty, key)
        elif fate == "terminate":
            handle = server.start(f"sleep {tag}{i:04d}", tty, key)
            server.terminate(handle)
        elif fate == "ctrl-c":
            # MCP types ^C into the PTY; the exec server sends SIGINT (process/signal).
            handle = server.start(f"sleep {tag}{i:04d}", tty, key)
            server.start_handles[i] = handle
            server.ctrl_c(handle)
        elif fate == "prune":
            # Long-lived sessions: past the store's limit (64) each new one prunes the oldest.
            server.start(f"sleep {tag}{i:04d}", tty, key)
            prune_held.append(i)
        else:  # disconnect: sessions of a short-lived server whose client goes away
            disconnect_batch.append((face, tty, i))
            if len(disconnect_batch) == 10:
                for batch_face in ("mcp", "serve"):
                    batch = [b for b in disconnect_batch if b[0] == batch_face]
                    if not batch:
                        continue
                    temp = Server(uexec, batch_face)
                    temp.start_all([(f"sleep {tag}{j:04d} & sleep {tag}{j:04d}", t, f"d{j}") for _, t, j in batch])
                    temp.close()
                    check(
                        wait_until("", lambda: not any(live_with(f"{tag}{j:04d}") for _, _, j in batch), 10),
                        f"{batch_face}: sessions outlived their disconnected client",
                    )
                disconnect_batch = []
        if i % 50 == 0:
            peak_zombies = max(peak_zombies, *(len(zombie_children(s.pid)) for s in servers.values()))
    elapsed = time.monotonic() - started
    print(f"  {sessions} sessions in {elapsed:.1f}s")
    # What still runs: only the mcp face's prune sessions may (the store keeps <= 64 live).
    time.sleep(1)
    fate_of = {}
    survivors = {}
    for pid in live_with(tag):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                arg = f.read().split(b"\0")[1].decode()
            i = int(arg.split(tag, 1)[1][:4])
        except (OSError, IndexError, ValueError):
            continue
        survivors.setdefault(fate_at(i), set()).add(i)
    held = len(survivors.pop(("mcp", "prune"), set()))
    print(f"  mcp prune sessions still running: {held} (the store's limit: 64)")
    check(held <= 64, f"{held} prune sessions running, more than the store's limit")
    for (face, fate), indices in sorted(survivors.items()):
        tty = sum(1 for i in indices if tty_at(i))
        print(f"  {face} {fate}: {len(indices)} sessions still running after it ({tty} PTY)")
        check(False, f"{face} {fate}: {len(indices)} sessions outlived their fate")
        # Terminated now, so that their pipes and PTYs do not count as leaks below.
        for i in indices:
            servers[face].terminate(servers[face].start_handles[i] if face == "mcp" else f"p{i}")
    for face, server in servers.items():
        check(not zombie_children(server.pid), f"{face}: zombie children {zombie_children(server.pid)}")
    end_of = {}
    for face, server in servers.items():
        if face == "mcp":
            # The held sessions are the mcp face's; terminate them through its own tool.
            out = server.tool("list_sessions", {})
            for s in out.get("sessions", []):
                try:
                    server.terminate(s["session_id"])
                except RuntimeError:
                    pass
    wait_until("", lambda: not live_with(tag), 10)
    # The exec server keeps an exited process (and its pipes) for 30 s, tokio its idle
    # blocking threads for 10 s: wait out both before comparing.
    settled = time.monotonic()
    wait_until(
        "",
        lambda: all(
            resources(s.pid)["fds"] <= baseline[f]["fds"]
            and resources(s.pid)["threads"] <= baseline[f]["threads"]
            for f, s in servers.items()
        ),
        40,
    )
    print(f"  settled after {time.monotonic() - settled:.1f}s")
    for face, server in servers.items():
        end_of[face] = resources(server.pid)
        b, e = baseline[face], end_of[face]
        print(
            f"  {face}: fds {b['fds']} -> {e['fds']}, threads {b['threads']} -> {e['threads']}, "
            f"RSS {b['rss_kib'] / 1024:.1f} -> {e['rss_kib'] / 1024:.1f} MiB"
        )
        check(e["fds"] <= b["fds"], f"{face}: fds {b['fds']} -> {e['fds']}")
        check(e["threads"] <= b["threads"], f"{face}: threads {b['threads']} -> {e['threads']}")
        check(
            e["rss_kib"] <= b["rss_kib"] + 16 * 1024,
            f"{face}: RSS grew by {(e['rss_kib'] - b['rss_kib']) / 1024:.1f} MiB",
        )
    print(f"  peak zombie children seen while running: {peak_zombies}")
    for server in servers.values():
        server.close()
    wait_until("", lambda: not live_with(tag), 5)
    orphans = live_with(tag)
    print(f"  orphans after the servers exit: {len(orphans)}")
    check(not orphans, f"orphans: {describe(orphans)}")
    mix = {}
    for (face, fate, tty), n in counts.items():
        mix[f"{face}/{fate}/{'pty' if tty else 'pipe'}"] = n
    print("  mix: " + ", ".join(f"{k} {v}" for k, v in sorted(mix.items())), flush=True)


# ---------------------------------------------------------------- crash


def crash(uexec, trials):
    print(f"crash: {trials} trials, SIGKILL with 20 sessions each", flush=True)
    survivors_total = 0
    started = time.monotonic()
    for trial in range(trials):
        tag = f"3601.{RUN}{trial:03d}"
        servers = [Server(uexec, "mcp"), Server(uexec, "serve")]
        for n, server in enumerate(servers):
            specs = []
            for i in range(20):
                cmd = f"sleep {tag} & sleep {tag}" if i % 2 == 0 else f"exec sleep {tag}"
                specs.append((cmd, i % 4 < 2, f"c{n}-{i}"))
            server.start_all(specs)
        check(
            wait_until("", lambda: len(live_with(tag)) >= 80, 10),
            f"trial {trial}: only {len(live_with(tag))} of 80 session processes started",
        )
        for server in servers:
            os.kill(server.pid, signal.SIGKILL)
        time.sleep(1)
        survivors = live_with(tag)
        survivors_total += len(survivors)
        check(not survivors, f"trial {trial}: survivors 1 s after SIGKILL: {describe(survivors)}")
        for server in servers:
            server.proc.wait()
            server.forget()
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
    print(
        f"  {trials} trials in {time.monotonic() - started:.1f}s; survivors 1 s after SIGKILL: "
        f"{survivors_total}",
        flush=True,
    )


# ---------------------------------------------------------------- flood


def flood(uexec, seconds):
    print(f"flood: {seconds}s of `yes` with a progress token, a client that never reads", flush=True)
    server = Server(uexec, "mcp", read=False, extra=FLOOD_EXTRA)
    # The handshake is written blind: the client never reads, not even the answers.
    server.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "reliability", "version": "0"},
            },
        }
    )
    server.notify("notifications/initialized")
    server.send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "exec_command",
                "arguments": {"cmd": "yes", "login": False, "yield_time_ms": 30000},
                "_meta": {"progressToken": "flood"},
            },
        }
    )
    peak = 0
    started = time.monotonic()
    while time.monotonic() < started + seconds:
        peak = max(peak, resources(server.pid)["rss_kib"])
        if peak > FLOOD_RSS_CAP_MIB * 1024:
            # Unbounded growth: stop before the machine runs out of memory.
            print(f"  stopped after {time.monotonic() - started:.1f}s: RSS past {FLOOD_RSS_CAP_MIB} MiB")
            break
        time.sleep(0.5)
    print(f"  peak RSS of uexec mcp: {peak / 1024:.1f} MiB (goal: under 64 MiB)", flush=True)
    check(peak < 64 * 1024, f"flood: peak RSS {peak / 1024:.1f} MiB")
    os.kill(server.pid, signal.SIGTERM)
    try:
        server.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()
    server.forget()


# ---------------------------------------------------------------- descendants


DETACHED = [
    # A descendant in a session of its own, and one double-forked (reparented away).
    ("setsid", "setsid -f sleep {tag} >/dev/null 2>&1; exec sleep {tag}"),
    ("double fork", "(sleep {tag} >/dev/null 2>&1 &); exec sleep {tag}"),
]


def cgroup_note():
    """What holds descendants here, as `uexec doctor` says it."""
    out = subprocess.run([UEXEC_PATH[0], "doctor"], capture_output=True, text=True).stdout
    line = next((l for l in out.splitlines() if "cgroup v2 per session" in l), "")
    return line.strip() or "(uexec doctor says nothing of cgroups)"



def survivors_of(tag, what):
    """How many processes tagged `tag` are still alive 5 s after their end was asked for
    (checked as `what`); they are killed."""
    wait_until("", lambda: not live_with(tag), 5)
    survivors = live_with(tag)
    check(not survivors, f"{what}: survivors {describe(survivors)}")
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    return len(survivors)

def descendants(uexec, trials):
    """Descendants that left their process group (setsid, a double fork) die with their
    session: on terminate, and when the server or the daemon is SIGKILLed."""
    print(f"descendants: {trials} trials each of terminate and of SIGKILL of the server, "
          f"sessions with setsid and double-forked descendants", flush=True)
    print(f"  {cgroup_note()}")
    started = time.monotonic()
    totals = {}
    # Terminate: one server, a trial a pair of sessions.
    server = Server(uexec, "mcp")
    left = 0
    for trial in range(trials):
        tag = f"3602.{RUN}{trial:03d}"
        handles = server.start_all([(cmd.format(tag=tag), False, f"t{trial}-{k}") for k, (_, cmd) in enumerate(DETACHED)])
        wait_until("", lambda: len(live_with(tag)) >= 4, 10)
        for handle in handles:
            server.terminate(handle)
        left += survivors_of(tag, f"terminate trial {trial}")
    server.close()
    totals["terminate_session"] = left
    # SIGKILL of the server: a server a trial.
    left = 0
    for trial in range(trials):
        tag = f"3603.{RUN}{trial:03d}"
        server = Server(uexec, "mcp")
        server.start_all([(cmd.format(tag=tag), False, f"k{trial}-{k}") for k, (_, cmd) in enumerate(DETACHED)])
        wait_until("", lambda: len(live_with(tag)) >= 4, 10)
        os.kill(server.pid, signal.SIGKILL)
        server.proc.wait()
        left += survivors_of(tag, f"SIGKILL trial {trial}")
        server.forget()
    totals["SIGKILL of uexec mcp --in-process"] = left
    # SIGKILL of the daemon: a daemon a trial (fewer: each is a daemon's start).
    left = 0
    daemon_trials = max(1, trials // 5)
    for trial in range(daemon_trials):
        tag = f"3604.{RUN}{trial:03d}"
        runtime = tempfile.mkdtemp(dir=SCRATCH)
        os.chmod(runtime, 0o700)
        client = Server(uexec, "mcp", argv=[uexec, "mcp", "--daemon", "--codex-compat", "--linger", "forever"],
                        env={"XDG_RUNTIME_DIR": runtime})
        client.start_all([(cmd.format(tag=tag), False, f"d{trial}-{k}") for k, (_, cmd) in enumerate(DETACHED)])
        wait_until("", lambda: len(live_with(tag)) >= 4, 10)
        with open(os.path.join(runtime, "uexec", "daemon.pid")) as f:
            os.kill(int(f.read().strip()), signal.SIGKILL)
        left += survivors_of(tag, f"daemon SIGKILL trial {trial}")
        client.close()
    totals[f"SIGKILL of the daemon ({daemon_trials} trials)"] = left
    for what, n in totals.items():
        print(f"  {what}: {n} survivors (deadline 5 s)")
    print(f"  in {time.monotonic() - started:.1f}s", flush=True)


# ---------------------------------------------------------------- daemon soak


def daemon_soak(uexec, sessions):
    """SESSIONS sessions through one daemon, transcripts on: its RSS, fds and threads
    sampled every 500 sessions (a plateau, not growth)."""
    print(f"daemon soak: {sessions} sessions through the daemon, transcripts on", flush=True)
    runtime = tempfile.mkdtemp(dir=SCRATCH)
    os.chmod(runtime, 0o700)
    client = Server(uexec, "mcp", argv=[uexec, "mcp", "--daemon", "--codex-compat"], env={"XDG_RUNTIME_DIR": runtime})
    with open(os.path.join(runtime, "uexec", "daemon.pid")) as f:
        daemon = int(f.read().strip())
    tag = f"3605.{RUN}"
    samples = []
    started = time.monotonic()
    for i in range(sessions):
        if i % 500 == 0:
            samples.append((i, resources(daemon)))
        if i % 10 == 9:
            # A session that outlives its window, ended by terminate.
            handle = client.start(f"sleep {tag}{i:05d}", False, f"s{i}")
            client.terminate(handle)
        else:
            client.start(f"echo {i}; printf '%0{i % 2000}d' 0", i % 4 == 0, f"s{i}")
    samples.append((sessions, resources(daemon)))
    elapsed = time.monotonic() - started
    print(f"  {sessions} sessions in {elapsed:.1f}s")
    print("  sessions | RSS MiB | fds | threads")
    for n, r in samples:
        print(f"  {n:8d} | {r['rss_kib'] / 1024:7.1f} | {r['fds']:3d} | {r['threads']:7d}")
    # The plateau: past the first thousand, what the second half adds.
    half = samples[len(samples) // 2][1]
    last = samples[-1][1]
    check(last["fds"] <= half["fds"] + 4, f"daemon fds grew from {half['fds']} to {last['fds']} in the second half")
    check(last["threads"] <= half["threads"] + 4, f"daemon threads grew from {half['threads']} to {last['threads']}")
    check(last["rss_kib"] <= half["rss_kib"] + 8 * 1024,
          f"daemon RSS grew from {half['rss_kib'] / 1024:.1f} to {last['rss_kib'] / 1024:.1f} MiB in the second half")
    client.close()
    subprocess.run([uexec, "daemon", "--stop"], env={**os.environ, "XDG_RUNTIME_DIR": runtime},
                   capture_output=True, check=False)
    check(not live_with(tag), "daemon soak: sessions outlived the daemon")


# ---------------------------------------------------------------- disk


# A script that sets the transcripts' directory up in a mount namespace of its own, then
# runs the server there: $1 the place, $2 the case, then the server's argv.
DISK_SETUP = r"""set -e
place="$1"; case="$2"; shift 2
mkdir -p -m 700 "$place/t"
case "$case" in
  full) mount -t tmpfs -o size=512k,mode=0700 tmpfs "$place/t" ;;
  read-only) mount --bind "$place/t" "$place/t" && mount -o remount,ro,bind "$place/t" ;;
esac
exec "$@"
"""

FLOOD_CMD = "seq 1 400000; echo the-end"  # 2.6 MB: the pending buffer (1 MiB) cuts it


def claims_hold(server, result, where):
    """Whether what `result` says the transcript has, it has: each readable byte range it
    names reads back whole."""
    readable = result.get("omitted_readable")
    if not readable:
        return True
    # A running session by its id; an exited one, whose id is gone, by its transcript.
    which = {"session_id": result["session_id"]} if "session_id" in result else {"transcript": result.get("transcript")}
    for offset in {readable["start"], max(readable["start"], readable["end"] - 4096)}:
        want = min(4096, readable["end"] - offset)
        page = server.tool("read_output", {**which, "offset": offset, "limit": want})
        got = page.get("next_offset", offset) - page.get("offset", offset)
        if got != want:
            print(f"  {where}: read_output at {offset} gave {got} of the {want} bytes claimed readable")
            return False
    return True


def disk(uexec):
    """Transcripts on a full disk, in a read-only directory, and in a directory deleted
    while sessions write: every command ends normally, and no result claims bytes the disk
    lacks."""
    print("disk: transcripts on a full disk, read-only, and deleted mid-run", flush=True)
    for case in ("full", "read-only", "deleted"):
        place = tempfile.mkdtemp(dir=SCRATCH)
        tdir = os.path.join(place, "t")
        argv = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", DISK_SETUP, "sh", place, case,
                uexec, "mcp", "--in-process", "--structured", "--transcripts-dir", tdir]
        server = Server(uexec, "mcp", argv=argv)
        ok = True
        results = []

        def took(r):
            """A result, its claims checked as it arrives (a claim is of that moment)."""
            nonlocal ok
            results.append(r)
            ok &= check_soft(claims_hold(server, r, f"disk {case}"), f"disk {case}: a result claimed bytes the disk lacks")
            return r

        for i in range(3):
            deleting = case == "deleted" and i == 1
            # The one across the deletion writes slowly, for 2 s.
            cmd = "for i in $(seq 1 40); do seq 1 20000; sleep 0.05; done; echo the-end" if deleting else FLOOD_CMD
            r = took(server.tool("exec_command", {"cmd": cmd, "login": False, "yield_time_ms": 500 if deleting else 250}))
            if deleting:
                shutil.rmtree(tdir, ignore_errors=True)
            while "session_id" in r and "exit_code" not in r:
                r = took(server.tool("write_stdin", {"session_id": r["session_id"], "chars": "", "yield_time_ms": 30000}))
        ended = [r for r in results if "exit_code" in r]
        ok &= check_soft(len(ended) == 3 and all(r["exit_code"] == 0 for r in ended),
                         f"disk {case}: every command ended with 0 ({[r.get('exit_code') for r in ended]})")
        ok &= check_soft(all("the-end" in (r.get("output") or "") for r in ended),
                         f"disk {case}: every command's last line arrived")
        stopped = sum(1 for r in results if "transcript_stopped" in r)
        print(f"  {case}: {len(ended)} commands ended, {len(results)} results, "
              f"{stopped} saying the transcript stopped, every claim checked: {'held' if ok else 'FAILED'}")
        server.close()


def check_soft(ok, what):
    check(ok, what)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uexec", default=os.path.join(ROOT, "target/release/uexec"))
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--flood-secs", type=int, default=60)
    parser.add_argument("--daemon-sessions", type=int, default=5000)
    parser.add_argument("--only", default="soak,crash,flood,descendants,daemon-soak,disk")
    args = parser.parse_args()
    args.uexec = os.path.abspath(args.uexec)
    UEXEC_PATH[0] = args.uexec
    if not os.access(args.uexec, os.X_OK):
        sys.exit(f"no uexec binary at {args.uexec}: cargo build --release -p uexec")
    parts = args.only.split(",")
    try:
        if "soak" in parts:
            soak(args.uexec, args.sessions)
        if "crash" in parts:
            crash(args.uexec, args.trials)
        if "flood" in parts:
            flood(args.uexec, args.flood_secs)
        if "descendants" in parts:
            descendants(args.uexec, args.trials)
        if "daemon-soak" in parts:
            daemon_soak(args.uexec, args.daemon_sessions)
        if "disk" in parts:
            disk(args.uexec)
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)
        left = [d for d in os.listdir(tempfile.gettempdir()) if d.startswith("uexec-rel-")]
        print(f"scratch removed; uexec-rel-* directories left in {tempfile.gettempdir()}: {len(left)}")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
