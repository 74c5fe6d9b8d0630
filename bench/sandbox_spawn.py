"""What a sandbox costs per command: spawn + wait of `true`, unsandboxed and through uexec's
launcher (`uexec __sandbox-exec`, the exact argv uexec builds), with bubblewrap as the anchor
when it is installed, all in one run, interleaved so that machine noise hits every variant.

Variants (each spawned with posix_spawn and reaped with waitpid):
  direct          /bin/true
  read-only       launcher: user+pid+mount namespaces, Landlock, seccomp
  read-only+netoff  the same plus a network namespace with lo up
  bwrap           bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --tmpfs /tmp
                  (its nearest equivalent of read-only + network off)

Prints the median and p90 per variant in ms, and each median's ratio to `direct`; then the
median CPU time (user + system, of the process and every descendant it reaped, from wait4),
which a busy machine disturbs less than the wall time.
usage: python3 bench/sandbox_spawn.py --uexec target/release/uexec [--runs 300]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time


def spawn_wait(argv: list[str]) -> tuple[float, float]:
    """Wall time and CPU time of one spawn + wait, in ms."""
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ)
    _, status, usage = os.wait4(pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed with {status}")
    return elapsed * 1000, (usage.ru_utime + usage.ru_stime) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uexec", required=True)
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    uexec = os.path.abspath(args.uexec)
    tmp = tempfile.mkdtemp(prefix="uexec-bench-sbx-")
    true = shutil.which("true") or "/bin/true"
    launcher = [uexec, "__sandbox-exec"]
    variants = {
        "direct": [true],
        "read-only": launcher
        + ["--layers", "namespaces,landlock,seccomp", "--write", tmp, "--", true],
        "read-only+netoff": launcher
        + [
            "--layers",
            "namespaces,network-namespace,landlock,seccomp",
            "--write",
            tmp,
            "--network-off",
            "--",
            true,
        ],
    }
    bwrap = shutil.which("bwrap")
    if bwrap:
        variants["bwrap"] = [
            bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            true,
        ]
    samples: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for argv in variants.values():  # warm the page cache
        spawn_wait(argv)
    for _ in range(args.runs):
        for name, argv in variants.items():
            wall, used = spawn_wait(argv)
            samples[name].append(wall)
            cpu[name].append(used)
    base = statistics.median(samples["direct"])
    cpu_base = statistics.median(cpu["direct"])
    print(f"spawn + wait of `true`, {args.runs} runs each, interleaved")
    print(f"{'variant':<18} {'median ms':>10} {'p90 ms':>8} {'x direct':>9} {'CPU ms':>7} {'x direct':>9}")
    for name, values in samples.items():
        values.sort()
        median = statistics.median(values)
        p90 = values[int(len(values) * 0.9) - 1]
        used = statistics.median(cpu[name])
        print(f"{name:<18} {median:>10.3f} {p90:>8.3f} {median / base:>9.2f} "
              f"{used:>7.3f} {used / cpu_base:>9.2f}")
    if not bwrap:
        print("bwrap: not installed (apt-get install bubblewrap)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
