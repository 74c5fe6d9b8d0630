"""Where the time of one `uexec run --no-login -- true` goes, from kernel tracepoints.

Records with `perf` (root, or perf_event_paranoid <= -1) the runs of one or more installs
(a directory holding `uexec` and `uexec-engine`), interleaved run by run, and prints the
median of each segment of a foreground run (a run hello; the daemon answers `ok` and
`started` once the command is spawned, then the session's frames): the front's start (exec
to connect), the daemon's accept, the hello up to the spawn (clone), the spawn up to
bash's exec, bash itself, bash's exit up to the daemon's reap (wait4), the reap up to the
`ended` frame, and the front's exit. Each install gets a private XDG_RUNTIME_DIR and an empty HOME; its
daemon is stopped at the end, and the scratch directories removed.

`--without-cgroups DIR` adds a column: DIR's install, copied to a scratch directory, whose
daemon starts in a private mount namespace with the unified cgroup mount hidden (root), so
its sessions run on their process group alone.

usage: python3 bench/run_timeline.py [--runs N] [--without-cgroups DIR] DIR [DIR ...]
   e.g. cargo build --release -p uexec && python3 bench/run_timeline.py target/release
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile

import without_cgroups

EVENTS = ",".join([
    "sched:sched_process_exec", "sched:sched_process_exit", "syscalls:sys_enter_connect",
    "syscalls:sys_exit_accept4", "syscalls:sys_enter_sendto", "syscalls:sys_enter_clone",
    "syscalls:sys_enter_writev", "syscalls:sys_enter_wait4",
])
SEGMENTS = ["exec", "connect", "accept", "clone", "bexec", "bexit", "reap", "reply", "end"]
LINE = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)$")
VFORK = "clone_flags: 0x00004111"  # CLONE_VM | CLONE_VFORK | SIGCHLD: the engine's spawn


def timelines(script: str, fronts: list[str]) -> dict[str, list[dict]]:
    """One dict of event times (ms) per run, by front."""
    runs: dict[str, list[dict]] = {f: [] for f in fronts}
    cur: dict | None = None
    for line in script.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, _tid, t, event, trace = m.groups()
        t, pid = float(t) * 1e3, int(pid)
        daemon = comm.startswith("tokio") or comm == "uexec-engine"
        if event == "sched:sched_process_exec":
            front = next((f for f in fronts if f"filename={f} " in trace + " "), None)
            if front:
                cur = {"exec": t, "pid": pid}
                runs[front].append(cur)
                continue
        if cur is None:
            continue
        if pid == cur["pid"] and event.endswith("enter_connect"):
            cur["connect"] = t
        elif daemon and event.endswith("exit_accept4") and not trace.startswith("0xffff") \
                and "connect" in cur and "accept" not in cur:
            cur["accept"] = t
        elif daemon and event.endswith(("enter_sendto", "enter_writev")) and "reap" in cur \
                and "reply" not in cur:
            cur["reply"] = t
        elif daemon and event.endswith("enter_clone") and VFORK in trace and "accept" in cur and "clone" not in cur:
            cur["clone"] = t
        elif comm == "bash" and event == "sched:sched_process_exec" and "clone" in cur and "bexec" not in cur:
            cur["bexec"] = t
        elif comm == "bash" and event == "sched:sched_process_exit" and "bexec" in cur and "bexit" not in cur:
            cur["bexit"] = t
        elif daemon and event.endswith("enter_wait4") and "bexit" in cur and "reap" not in cur:
            cur["reap"] = t
        elif event == "sched:sched_process_exit" and pid == cur["pid"]:
            cur["end"] = t
    return runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--without-cgroups", metavar="DIR")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="uexec-timeline-")  # removed at the end, the daemons stopped

    def scratch(prefix: str) -> str:
        return tempfile.mkdtemp(prefix=prefix, dir=work)

    fronts = [os.path.join(os.path.abspath(d), "uexec") for d in a.dirs]
    bare = None
    if a.without_cgroups:
        # A copy, so its runs are told apart by the front's path.
        bare = os.path.join(scratch("uexec-timeline-bare-"), "uexec")
        for name in ("uexec", "uexec-engine"):
            shutil.copy2(os.path.join(a.without_cgroups, name), os.path.join(os.path.dirname(bare), name))
        fronts.append(bare)
        a.dirs.append(f"{a.without_cgroups}, no cgroups")
    envs = []
    for front in fronts:
        runtime = scratch("uexec-timeline-run-")
        os.chmod(runtime, 0o700)
        env = {**os.environ, "HOME": scratch("uexec-timeline-home-"), "XDG_RUNTIME_DIR": runtime}
        env.pop("UEXEC_DAEMON", None)
        start = [front, "run", "--", "true"]  # starts the daemon
        if front == bare:
            start = without_cgroups.argv(start)
        subprocess.run(start, env=env, check=True)
        envs.append(env)
    loop = "; ".join(
        f"XDG_RUNTIME_DIR={env['XDG_RUNTIME_DIR']} HOME={env['HOME']} {front} run --no-login -- true"
        for front, env in zip(fronts, envs)
    )
    data = os.path.join(work, "perf.data")
    try:
        subprocess.run(["perf", "record", "-q", "-a", "-o", data, "-e", EVENTS, "--",
                        "sh", "-c", f"for i in $(seq {a.runs}); do {loop}; done"],
                       check=True, stdout=subprocess.DEVNULL)
        script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,time,event,trace"],
                                capture_output=True, text=True, check=True).stdout
    finally:
        for front, env in zip(fronts, envs):
            subprocess.run([front, "daemon", "--stop"], env=env, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    runs = timelines(script, fronts)
    complete = {f: [r for r in runs[f] if all(k in r for k in SEGMENTS)] for f in fronts}
    print(f"| segment (median ms of {a.runs}) | " + " | ".join(a.dirs) + " |")
    print("|---|" + "---:|" * len(fronts))
    for start, end in [*zip(SEGMENTS, SEGMENTS[1:]), ("exec", "end")]:
        cells = [f"{statistics.median(r[end] - r[start] for r in complete[f]):.3f}" if complete[f] else "n/a"
                 for f in fronts]
        print(f"| {start} -> {end} | " + " | ".join(cells) + " |")
    print("complete runs: " + ", ".join(f"{d}: {len(complete[f])}" for d, f in zip(a.dirs, fronts)))


if __name__ == "__main__":
    main()
