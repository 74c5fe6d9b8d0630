#!/usr/bin/env python3
"""Runs the image as the Kubernetes manifests run their pod, and uses it over wss://.

    python3 deploy/podman/run_pod.py --uexec PATH [--overlay dev] [--podman podman]

deploy/podman/run.sh builds the image and calls this with the podman it set up. Needs the
official MCP Python SDK and PyYAML (deploy/podman/requirements.txt).
1. pod_spec.py turns the overlay's StatefulSet into `podman run` flags, and fails on any
   field it cannot honour;
2. the two Secrets of step 2 of docs/src/kubernetes.md are made as an operator makes them (a bearer
   token; a CA and a server certificate signed by it, for the pods' DNS names and
   127.0.0.1), and the volumes as the kubelet makes them;
3. podman runs the pod (NAME-0), detached; the probes' GETs are made from the host
   (HTTPS, the certificate unverified, as the kubelet makes them);
4. an MCP client (the SDK) starts `uexec mcp --environment NAME-0=wss://127.0.0.1:PORT
   --remote-token-file ... --remote-ca ...` on the host, with a runtime directory of its
   own, and runs a command in the pod through it. The command prints what the pod is (its
   user and groups, what is mounted read-only, what it can write, its capabilities,
   no_new_privs and seccomp, its memory and CPU limits, uexec serve's arguments and
   environment), and each fact is compared with what the manifests and the image say;
5. a command left running there, the pod is stopped as the kubelet stops one (SIGTERM,
   then SIGKILL after terminationGracePeriodSeconds): uexec serve, the container's PID 1,
   must exit by itself, with 0, within the grace period.
The container is removed, and the client's daemon stopped, whatever happens.
"""

import argparse
import functools
import json
import os
import shlex
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import pod_spec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from smoke_test import make_tls  # noqa: E402  (deploy/: the same CA and certificate recipe)

DEADLINE_S = 60
# What step 2 of docs/src/kubernetes.md has the certificate name, and the address the host dials.
SAN = "DNS:*.uexec.uexec.svc,DNS:*.uexec.uexec.svc.cluster.local,IP:127.0.0.1"


def say(message):
    print(f"run_pod: {message}", flush=True)


class Failed(Exception):
    pass


def podman(cmd, *args, check=True):
    out = subprocess.run(cmd + list(args), capture_output=True, text=True)
    if check and out.returncode != 0:
        raise Failed(f"{shlex.join(cmd + list(args))}: {out.stderr.strip()}")
    return out.stdout.strip()


def eventually(what, condition, deadline_s=DEADLINE_S):
    """condition() until it returns something true, or Failed after deadline_s."""
    end = time.monotonic() + deadline_s
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > end:
            raise Failed(f"{what}: not within {deadline_s} s")
        time.sleep(0.1)


def get(probe, port):
    """The probe's GET, as the kubelet makes it (an HTTPS certificate is not verified)."""
    url = f"{probe.scheme.lower()}://127.0.0.1:{port}{probe.path}"
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=unverified, timeout=probe.timeout_s) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return None


def facts_script(pod):
    """A shell command that prints the pod's facts, one `key=value` a line."""
    lines = [
        'echo "uid=$(id -u)"; echo "gid=$(id -g)"',
        'echo "groups=$(id -G | tr " " "\\n" | sort -nu | tr "\\n" " ")"',
        'echo "hostname=$(cat /proc/sys/kernel/hostname)"',
        "mountopt() { awk -v p=\"$1\" '$2 == p { split($4, o, \",\"); m = o[1] } "
        "END { print m }' /proc/self/mounts; }",
        'echo "mount /=$(mountopt /)"',
        "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status "
        "| awk '{ print tolower($1) \"=\" $2 }' | tr -d :",
        'echo "memory=$(cat /sys/fs/cgroup/memory.max 2>/dev/null '
        '|| cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"',
        'echo "cpu=$(cat /sys/fs/cgroup/cpu.max 2>/dev/null '
        '|| echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us))"',
        "echo \"pid1=$(tr '\\0' ' ' < /proc/1/cmdline)\"",
    ]
    for _, path, _ in pod.mounts:
        q = shlex.quote(path)
        lines.append(f'echo "mount {path}=$(mountopt {q})"')
    for _, path, read_only in pod.mounts:
        if not read_only:
            q = shlex.quote(f"{path}/.uexec-written")
            lines.append(f'if : > {q} 2>/dev/null; then rm -f {q}; w=yes; else w=no; fi; '
                         f'echo "writes {path}=$w"')
    return "\n".join(lines)


def expected_facts(pod, entrypoint):
    """What the manifests (and, where they say nothing, the image) say of the pod."""
    want = {"hostname": pod.name, "mount /": "ro" if pod.read_only_root else "rw",
            "pid1": " ".join(entrypoint) + " "}
    if pod.uid is not None:
        want["uid"] = str(pod.uid)
    if pod.gid is not None:
        groups = {pod.gid} | {g for g in [pod.fs_group] + pod.groups if g is not None}
        want["gid"] = str(pod.gid)
        want["groups"] = " ".join(str(g) for g in sorted(groups)) + " "
    drops = [f for f in pod.flags if f.startswith("--cap-")]
    if drops == ["--cap-drop=ALL"]:
        want["capeff"] = "0" * 16
    want["nonewprivs"] = "1" if pod.no_new_privileges else "0"
    want["seccomp"] = "0" if "--security-opt=seccomp=unconfined" in pod.flags else "2"
    if pod.memory_bytes is not None:
        want["memory"] = str(pod.memory_bytes)
    if pod.cpus is not None:
        want["cpu"] = f"{int(pod.cpus * 100000)} 100000"
    for _, path, read_only in pod.mounts:
        want[f"mount {path}"] = "ro" if read_only else "rw"
        if not read_only:
            want[f"writes {path}"] = "yes"
    for name, value in pod.env.items():
        want[f"env {name}"] = value
    return want


async def through_mcp(uexec, env_id, url, secrets_dir, pod, runtime, then):
    """exec_command in the pod through `uexec mcp --environment`: the facts, then a
    command left running, and then then(facts' output) while the client is still there
    (a client that leaves ends its sessions)."""
    params = StdioServerParameters(
        command=uexec,
        args=["mcp", "--structured", "--environment", f"{env_id}={url}",
              "--remote-token-file", f"{secrets_dir}/token", "--remote-ca",
              f"{secrets_dir}/ca.crt"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": runtime,
             "XDG_RUNTIME_DIR": runtime},
        cwd=runtime,
    )
    with open(f"{runtime}/mcp.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                with anyio.fail_after(DEADLINE_S):
                    await session.initialize()
                    facts = await session.call_tool("exec_command", {
                        "cmd": facts_script(pod), "environment_id": env_id,
                        "login": False, "yield_time_ms": 10000})
                    left = await session.call_tool("exec_command", {
                        "cmd": "echo left running; sleep 600", "environment_id": env_id,
                        "login": False, "yield_time_ms": 500})
                for what, res in (("the facts", facts), ("the command left running", left)):
                    if res.is_error or res.structured_content is None:
                        raise Failed(f"exec_command ({what}) failed: {res.content}")
                if facts.structured_content.get("exit_code") != 0:
                    raise Failed(f"the facts command: {json.dumps(facts.structured_content)}")
                if left.structured_content.get("session_id") is None:
                    raise Failed(f"the sleep ended: {json.dumps(left.structured_content)}")
                output = facts.structured_content.get("output", "")
                await anyio.to_thread.run_sync(then, output)


def compare(output, environ, want):
    """The facts the command printed, and uexec serve's environment (read from the host:
    the server makes itself non-dumpable, so its /proc/1/environ is closed to the pod's
    user), against what the manifests say."""
    got = dict(line.split("=", 1) for line in output.splitlines() if "=" in line)
    for var in environ.split(b"\0"):
        name, _, value = var.decode(errors="replace").partition("=")
        got[f"env {name}"] = value
    wrong = [f"  {k}: manifests say {v!r}, the pod has {got.get(k)!r}"
             for k, v in want.items() if got.get(k) != v]
    for k in want:
        say(f"  {k} = {got.get(k)!r}")
    if wrong:
        raise Failed("the pod is not as the manifests say:\n" + "\n".join(wrong))


def start(cmd, pod, work):
    """The Secrets and volumes made, the pod run and ready: the host ports of its ports."""
    secrets = work / "secrets"
    secrets.mkdir()
    make_tls(str(secrets), san=SAN)
    read = lambda name: (secrets / name).read_bytes()  # noqa: E731
    pod_spec.make_volumes(pod, work / "volumes", {
        "uexec-token": {"token": read("token")},
        "uexec-tls": {"tls.crt": read("tls.crt"), "tls.key": read("tls.key")},
    })
    flags = pod_spec.run_flags(pod, work / "volumes")
    say("podman run -d " + shlex.join(flags))
    podman(cmd, "run", "-d", *flags)
    host_ports = {}
    for number, protocol in pod.ports.values():
        published = podman(cmd, "port", pod.name, f"{number}/{protocol.lower()}")
        host_ports[number] = published.splitlines()[0].rpartition(":")[2]

    def ready():
        state = podman(cmd, "inspect", pod.name, "--format", "{{.State.Status}}")
        if state != "running":
            raise Failed(f"the pod is {state}")
        return all(get(p, host_ports[p.port]) == 200
                   for p in pod.probes if p.kind == "readiness")

    t0 = time.monotonic()
    eventually("the readiness probe", ready)
    say(f"ready after {time.monotonic() - t0:.2f} s")
    return host_ports


def check_and_stop(cmd, pod, host_ports, output):
    """The facts against the manifests and the image, the probes again, then the stop."""
    say("a command ran in the pod through uexec mcp --environment over wss://; its facts:")
    image = json.loads(podman(cmd, "image", "inspect", pod.image, "--format",
                              "{{json .Config}}"))
    entrypoint = (pod.entrypoint if pod.entrypoint is not None
                  else image.get("Entrypoint") or []) + \
        (pod.args if pod.args is not None else image.get("Cmd") or [])
    pid = podman(cmd, "inspect", pod.name, "--format", "{{.State.Pid}}")
    compare(output, Path(f"/proc/{pid}/environ").read_bytes(), expected_facts(pod, entrypoint))
    for p in pod.probes:
        status = get(p, host_ports[p.port])
        if status != 200:
            raise Failed(f"the {p.kind} probe's GET answered {status}")
        say(f"the {p.kind} probe's GET {p.path} answers 200")
    t0 = time.monotonic()
    podman(cmd, "stop", "--time", str(pod.grace_s), pod.name)
    took = time.monotonic() - t0
    code = podman(cmd, "inspect", pod.name, "--format", "{{.State.ExitCode}}")
    if code != "0" or took >= pod.grace_s:
        raise Failed(f"stopped in {took:.1f} s (grace {pod.grace_s} s), exit code {code}")
    say(f"stopped by SIGTERM in {took:.2f} s with a command running (grace {pod.grace_s} s), "
        "exit code 0")


def use(args, cmd, pod, host_ports, secrets):
    """The MCP client on the host, its daemon in a runtime directory of its own (stopped)."""
    # The agents dial the port named wss (the Service's target), else the only one.
    wss = pod.ports.get("wss", next(iter(pod.ports.values()), (None,)))[0]
    if wss not in host_ports:
        raise Failed("the container has no port to dial")
    url = f"wss://127.0.0.1:{host_ports[wss]}"
    runtime = tempfile.mkdtemp(prefix="uexec-podman-client-")
    os.chmod(runtime, 0o700)
    then = functools.partial(check_and_stop, cmd, pod, host_ports)
    try:
        anyio.run(through_mcp, args.uexec, pod.name, url, secrets, pod, runtime, then)
    except BaseException as e:
        errlog = Path(runtime, "mcp.stderr")
        if errlog.exists():
            say(f"uexec mcp's stderr:\n{errlog.read_text(errors='replace')}")
        failed = e
        while isinstance(failed, BaseExceptionGroup):  # anyio's task groups wrap then()'s
            failed = failed.subgroup(lambda x: isinstance(x, Failed))
            failed = failed.exceptions[0] if failed is not None else None
        if failed is None:
            raise
        raise failed from None
    finally:
        subprocess.run([args.uexec, "daemon", "--stop"], capture_output=True,
                       env={"PATH": os.environ.get("PATH", ""), "HOME": runtime,
                            "XDG_RUNTIME_DIR": runtime}, timeout=30)
        shutil.rmtree(runtime, ignore_errors=True)


def run(args, pod, work):
    cmd = shlex.split(args.podman)
    try:
        host_ports = start(cmd, pod, work)
        use(args, cmd, pod, host_ports, work / "secrets")
    except Failed:
        say("the pod's log:\n" + podman(cmd, "logs", pod.name, check=False))
        raise
    finally:
        podman(cmd, "rm", "--force", "--time", "0", pod.name, check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--uexec", required=True, help="the uexec the host runs (the client)")
    ap.add_argument("--overlay", default="dev", help="deploy/kubernetes/overlays/OVERLAY")
    ap.add_argument("--podman", default="podman", help="the podman command (run.sh's)")
    args = ap.parse_args()
    if not os.access(args.uexec, os.X_OK):
        sys.exit(f"run_pod: --uexec {args.uexec}: not an executable")
    try:
        pod = pod_spec.load(args.overlay)
    except pod_spec.SpecError as e:
        sys.exit(f"run_pod: {e}")
    for line in pod.cluster:
        say(f"left to the cluster: {line}")
    work = Path(tempfile.mkdtemp(prefix="uexec-podman-pod-"))
    try:
        run(args, pod, work)
    except (Failed, pod_spec.SpecError) as e:
        sys.exit(f"run_pod: FAIL: {e}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say("OK")


if __name__ == "__main__":
    main()
