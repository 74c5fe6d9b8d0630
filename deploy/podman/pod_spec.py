#!/usr/bin/env python3
"""The Kubernetes manifests' pod, as `podman run` flags: the manifests are the source of the
run of deploy/podman/run.sh, so the two cannot drift.

    python3 deploy/podman/pod_spec.py [--overlay dev]    # what it would run, and why

Renders the overlay with `kubectl kustomize`, takes its StatefulSet and reads every field of
it, down to the container. Each field is
- HONOURED: a podman flag, a volume made on the host as the kubelet would make it, or a
  request run_pod.py makes as the kubelet would (the probes' GETs);
- left to the CLUSTER, named with the reason (scheduling, the Service, the kubelet's probe
  timing, eviction...), and printed on every run;
- or refused: the run fails and names the field. A field added to the manifests must be
  taught here (or named as the cluster's) before CI passes again.
"""

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

KUSTOMIZE_ROOT = Path(__file__).resolve().parent.parent / "kubernetes"
SCHEDULING = "scheduling: which node runs the pod is the cluster's"
# The overlay's other objects: what they do happens in a cluster only.
CLUSTER_OBJECTS = {
    "Namespace": "its pod-security admission (restricted) refuses a pod that asks for more",
    "ServiceAccount": "the pods' identity towards the API server (no token mounted)",
    "Service": "the headless Service: each pod's DNS name, ready pods only",
    "NetworkPolicy": "who may connect (the agents' namespace only), by the network plugin",
}


class SpecError(Exception):
    """Fields of the manifests this run does not know how to honour (all of them)."""


@dataclass
class Volume:
    name: str
    kind: str  # "dir" (emptyDir on disk, a new claim), "tmpfs" (emptyDir in memory), "secret"
    secret_name: str = ""
    items: list = field(default_factory=list)  # (key, path, mode or None); [] = every key
    default_mode: int = 0o644
    size: str = ""


@dataclass
class Probe:
    kind: str
    path: str
    port: object  # a number or a port's name
    scheme: str
    timeout_s: float


@dataclass
class Pod:
    name: str = ""
    image: str = ""
    flags: list = field(default_factory=list)
    entrypoint: list = None
    args: list = None
    mounts: list = field(default_factory=list)  # (volume name, mountPath, read-only)
    volumes: dict = field(default_factory=dict)
    ports: dict = field(default_factory=dict)  # name or number -> (containerPort, protocol)
    probes: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    uid: int = None
    gid: int = None
    fs_group: int = None
    groups: list = field(default_factory=list)
    grace_s: int = 30
    memory_bytes: int = None
    cpus: float = None
    read_only_root: bool = False
    non_root: tuple = (False, "")  # runAsNonRoot, and where it was said
    no_new_privileges: bool = False
    cluster: list = field(default_factory=list)  # "path: why"
    errors: list = field(default_factory=list)

    def port(self, ref):
        """A probe's port (a name or a number) as the containerPort."""
        if ref in self.ports:
            return self.ports[ref][0]
        if isinstance(ref, int) and any(p == ref for p, _ in self.ports.values()):
            return ref
        raise SpecError(f"port {ref!r}: not a port of the container")


def walk(pod, obj, path, handlers):
    """Every key of obj to its handler: a function, or a string (left to the cluster, why)."""
    if not isinstance(obj, dict):
        pod.errors.append(f"{path}: expected a mapping, got {obj!r}")
        return
    for key, value in obj.items():
        handler = handlers.get(key)
        where = f"{path}.{key}"
        if handler is None:
            pod.errors.append(f"{where}: not known to deploy/podman/pod_spec.py (teach it, "
                              "or name it as the cluster's)")
        elif isinstance(handler, str):
            pod.cluster.append(f"{where}: {handler}")
        else:
            handler(value, where)


def only(pod, allowed, why):
    """A field honoured by its absence of effect here, for the listed values only."""
    def check(value, where):
        if value not in allowed:
            pod.errors.append(f"{where}: {value!r}: {why}")
    return check


def quantity(text, where):
    """A Kubernetes quantity (512Mi, 2Gi, 1G, 500m, "2") as a number."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6,
             "G": 10**9, "T": 10**12, "m": 10**-3}
    text = str(text)
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix):
            number, scale = text[: -len(suffix)], units[suffix]
            break
    else:
        number, scale = text, 1
    try:
        return float(number) * scale
    except ValueError:
        raise SpecError(f"{where}: {text!r} is not a quantity") from None


def statefulset(pod, sts):
    pod.name = f"{sts['metadata']['name']}-0"
    walk(pod, sts, "StatefulSet", {
        "apiVersion": lambda v, w: None, "kind": lambda v, w: None,
        "metadata": "the object's name, namespace and labels are the API server's "
                    "(the pod is named NAME-0, as the StatefulSet's first pod)",
        "spec": lambda v, w: walk(pod, v, w, {
            "serviceName": "the headless Service gives each pod its DNS name "
                           "(uexec-0.uexec.uexec.svc); here the host dials 127.0.0.1",
            "replicas": "one pod runs here (NAME-0); the others are the same",
            "podManagementPolicy": "the order the cluster starts pods in",
            "selector": "which pods the StatefulSet owns",
            "persistentVolumeClaimRetentionPolicy": "what the cluster keeps of claims",
            "volumeClaimTemplates": lambda v, w: claims(pod, v, w),
            "template": lambda v, w: walk(pod, v, w, {
                "metadata": lambda v, w: walk(pod, v, w, {
                    "labels": lambda v, w: pod.flags.extend(
                        f"--label={k}={val}" for k, val in v.items()),
                }),
                "spec": lambda v, w: pod_spec(pod, v, w),
            }),
        }),
    })


def claims(pod, templates, where):
    """A new claim is an empty volume: a directory made for the run."""
    for i, claim in enumerate(templates):
        name = claim.get("metadata", {}).get("name")
        pod.volumes[name] = Volume(name, "dir")
        walk(pod, claim, f"{where}[{i}]", {
            "metadata": lambda v, w: walk(pod, v, w, {"name": lambda v, w: None}),
            "spec": "the storage class provisions the claim (size, access modes); "
                    "here an empty directory",
        })


def pod_spec(pod, spec, where):
    if spec.get("automountServiceAccountToken") is not False:
        pod.errors.append(f"{where}.automountServiceAccountToken: must be false (a "
                          "service-account token mount is not reproduced here)")
    if spec.get("enableServiceLinks") is not False:
        pod.errors.append(f"{where}.enableServiceLinks: must be false (the Services' "
                          "variables are not reproduced here)")
    # The pod's security context first: a container's own fields override it.
    walk(pod, {k: v for k, v in spec.items() if k == "securityContext"}, where, {
        "securityContext": lambda v, w: security(pod, v, w, pod_level=True),
    })
    walk(pod, {k: v for k, v in spec.items() if k != "securityContext"}, where, {
        "serviceAccountName": "the pod's identity towards the API server (no token is "
                              "mounted: automountServiceAccountToken is false)",
        "automountServiceAccountToken": lambda v, w: None,
        "enableServiceLinks": lambda v, w: None,
        "terminationGracePeriodSeconds": lambda v, w: setattr(pod, "grace_s", int(v)),
        "containers": lambda v, w: containers(pod, v, w),
        "volumes": lambda v, w: volumes(pod, v, w),
        "nodeSelector": SCHEDULING, "affinity": SCHEDULING, "tolerations": SCHEDULING,
        "topologySpreadConstraints": SCHEDULING, "priorityClassName": SCHEDULING,
    })


def security(pod, ctx, where, pod_level):
    def user(v, w):
        pod.uid = int(v)

    def group(v, w):
        pod.gid = int(v)

    def seccomp(v, w):
        kind = v.get("type")
        if kind == "Unconfined":
            pod.flags.append("--security-opt=seccomp=unconfined")
        elif kind != "RuntimeDefault":  # RuntimeDefault: podman's default profile
            pod.errors.append(f"{w}.type: {kind!r}: only RuntimeDefault and Unconfined")

    def fs_group(v, w):
        pod.fs_group = int(v)

    def supplemental(v, w):
        pod.groups.extend(int(g) for g in v)

    def capabilities(v, w):
        walk(pod, v, w, {
            "drop": lambda caps, _w: pod.flags.extend(f"--cap-drop={c}" for c in caps),
            "add": lambda caps, _w: pod.flags.extend(f"--cap-add={c}" for c in caps),
        })

    handlers = {"runAsUser": user, "runAsGroup": group, "seccompProfile": seccomp}
    if pod_level:
        handlers.update({
            "fsGroup": fs_group, "supplementalGroups": supplemental,
            # The volumes are new: Always and OnRootMismatch both give them the group.
            "fsGroupChangePolicy": only(pod, ("Always", "OnRootMismatch"), "unknown policy"),
        })
    else:
        handlers.update({
            "allowPrivilegeEscalation": lambda v, w: setattr(pod, "no_new_privileges", not v),
            "readOnlyRootFilesystem": lambda v, w: setattr(pod, "read_only_root", bool(v)),
            "privileged": only(pod, (False,), "a privileged container is not run here"),
            "capabilities": capabilities,
        })
    # Checked once the user is known (the container's runAsUser wins): translate().
    handlers["runAsNonRoot"] = lambda v, w: setattr(pod, "non_root", (bool(v), w))
    walk(pod, ctx, where, handlers)


def containers(pod, items, where):
    if len(items) != 1:
        pod.errors.append(f"{where}: {len(items)} containers; one per pod is run here")
        return
    c = items[0]
    walk(pod, c, f"{where}[0]", {
        "name": lambda v, w: None,  # the container's name within its pod
        "image": lambda v, w: setattr(pod, "image", v),
        # --pull=never: the image is the one built here (IfNotPresent finds it present).
        "imagePullPolicy": only(pod, ("IfNotPresent", "Never"),
                                "the image is built here, not pulled"),
        "command": lambda v, w: setattr(pod, "entrypoint", list(v)),
        "args": lambda v, w: setattr(pod, "args", list(v)),
        "workingDir": lambda v, w: pod.flags.append(f"--workdir={v}"),
        "ports": lambda v, w: ports(pod, v, w),
        "env": lambda v, w: env(pod, v, w),
        "readinessProbe": lambda v, w: probe(pod, "readiness", v, w),
        "livenessProbe": lambda v, w: probe(pod, "liveness", v, w),
        "startupProbe": lambda v, w: probe(pod, "startup", v, w),
        "resources": lambda v, w: resources(pod, v, w),
        "securityContext": lambda v, w: security(pod, v, w, pod_level=False),
        "volumeMounts": lambda v, w: mounts(pod, v, w),
    })


def ports(pod, items, where):
    for i, p in enumerate(items):
        number, protocol = p.get("containerPort"), p.get("protocol", "TCP")
        walk(pod, p, f"{where}[{i}]", {
            "name": lambda v, w: None, "containerPort": lambda v, w: None,
            "protocol": only(pod, ("TCP", "UDP"), "unknown protocol"),
        })
        pod.ports[p.get("name", number)] = (number, protocol)
        # Published on the host's loopback only, on a port the kernel picks.
        pod.flags.append(f"--publish=127.0.0.1::{number}/{protocol.lower()}")


def env(pod, items, where):
    for i, e in enumerate(items):
        walk(pod, e, f"{where}[{i}]", {"name": lambda v, w: None, "value": lambda v, w: None})
        pod.env[e["name"]] = str(e.get("value", ""))
        pod.flags.append(f"--env={e['name']}={pod.env[e['name']]}")


def probe(pod, kind, spec, where):
    timing = "the kubelet's timing; run_pod.py makes the request once the pod runs"
    got = {}
    walk(pod, spec, where, {
        "httpGet": lambda v, w: walk(pod, v, w, {
            "path": lambda p, _w: got.update(path=p),
            "port": lambda p, _w: got.update(port=p),
            "scheme": only(pod, ("HTTP", "HTTPS"), "unknown scheme"),
        }),
        "timeoutSeconds": lambda v, w: got.update(timeout=float(v)),
        "initialDelaySeconds": timing, "periodSeconds": timing,
        "failureThreshold": timing, "successThreshold": timing,
    })
    if "httpGet" not in spec:
        pod.errors.append(f"{where}: only httpGet probes are made here")
        return
    scheme = spec["httpGet"].get("scheme", "HTTP")
    pod.probes.append(Probe(kind, got.get("path", "/"), got.get("port"), scheme,
                            got.get("timeout", 1.0)))


def resources(pod, spec, where):
    def limits(v, w):
        def memory(q, qw):
            pod.memory_bytes = int(quantity(q, qw))
            pod.flags.append(f"--memory={pod.memory_bytes}b")

        def cpu(q, qw):
            pod.cpus = quantity(q, qw)
            pod.flags.append(f"--cpus={pod.cpus:g}")

        walk(pod, v, w, {"memory": memory, "cpu": cpu,
                         "ephemeral-storage": "the kubelet evicts a pod past it"})

    walk(pod, spec, where, {"requests": SCHEDULING, "limits": limits})


def mounts(pod, items, where):
    for i, m in enumerate(items):
        walk(pod, m, f"{where}[{i}]", {
            "name": lambda v, w: None, "mountPath": lambda v, w: None,
            "readOnly": lambda v, w: None,
        })
        pod.mounts.append((m["name"], m["mountPath"], bool(m.get("readOnly"))))


def volumes(pod, items, where):
    for i, v in enumerate(items):
        name, at = v.get("name"), f"{where}[{i}]"
        if "emptyDir" in v:
            vol = Volume(name, "dir")

            def empty_dir(spec, w, vol=vol):
                spec = spec or {}
                if spec.get("medium") == "Memory":
                    vol.kind = "tmpfs"

                def size(s, sw):  # a tmpfs's size; on disk, an eviction
                    if vol.kind == "tmpfs":
                        vol.size = str(int(quantity(s, sw)))
                    else:
                        pod.cluster.append(f"{sw}: the kubelet evicts a pod past it")

                walk(pod, spec, w, {"medium": only(pod, ("", "Memory"), "unknown medium"),
                                    "sizeLimit": size})

            walk(pod, v, at, {"name": lambda _v, _w: None, "emptyDir": empty_dir})
        elif "secret" in v:
            vol = Volume(name, "secret")

            def secret(spec, w, vol=vol):
                def items(its, iw):
                    for j, it in enumerate(its):
                        walk(pod, it, f"{iw}[{j}]", {"key": lambda _v, _w: None,
                                                     "path": lambda _v, _w: None,
                                                     "mode": lambda _v, _w: None})
                        vol.items.append((it["key"], it["path"], it.get("mode")))

                walk(pod, spec, w, {
                    "secretName": lambda s, _w: setattr(vol, "secret_name", s),
                    "defaultMode": lambda m, _w: setattr(vol, "default_mode", int(m)),
                    "items": items,
                })

            walk(pod, v, at, {"name": lambda _v, _w: None, "secret": secret})
        else:
            pod.errors.append(f"{at}: volume {name!r}: only emptyDir, secret and claims")
            continue
        pod.volumes[name] = vol


def render(overlay):
    """The overlay's objects, as `kubectl kustomize` renders them (as validate.py does)."""
    import yaml  # the venv's (run.sh makes it); imported here so --help needs none

    out = subprocess.run(["kubectl", "kustomize", str(KUSTOMIZE_ROOT / "overlays" / overlay)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SpecError(f"kubectl kustomize {overlay}: {out.stderr.strip()}")
    return [o for o in yaml.safe_load_all(out.stdout) if o]


def load(overlay):
    """The overlay's StatefulSet as a Pod, or SpecError naming every field refused."""
    return translate(render(overlay))


def translate(objects):
    """Rendered objects (one StatefulSet, and objects the cluster alone acts on) as a Pod."""
    sets = [o for o in objects if o.get("kind") == "StatefulSet"]
    if len(sets) != 1:
        raise SpecError(f"{len(sets)} StatefulSets; expected one")
    pod = Pod()
    for o in objects:
        kind, name = o.get("kind"), o.get("metadata", {}).get("name")
        if kind in CLUSTER_OBJECTS:
            pod.cluster.append(f"{kind}/{name}: {CLUSTER_OBJECTS[kind]}")
        elif kind != "StatefulSet":
            pod.errors.append(f"{kind}/{name}: an object not known to deploy/podman/pod_spec.py")
    statefulset(pod, sets[0])
    non_root, where = pod.non_root
    if non_root and pod.uid is None:
        pod.errors.append(f"{where}: without runAsUser the kubelet reads the image's USER; "
                          "not done here")
    elif non_root and pod.uid == 0:
        pod.errors.append(f"{where}: the user is 0 (the kubelet refuses to start it)")
    for name, path, _ in pod.mounts:
        if name not in pod.volumes:
            pod.errors.append(f"volumeMounts: {name!r} ({path}) names no volume")
    for p in pod.probes:
        try:
            p.port = pod.port(p.port)
        except SpecError as e:
            pod.errors.append(f"{p.kind}Probe: {e}")
    if pod.errors:
        raise SpecError("fields the podman run cannot honour:\n  " + "\n  ".join(pod.errors))
    return pod


def run_flags(pod, volume_root):
    """`podman run` flags for the pod, its volumes made under volume_root (made already by
    make_volumes); the image and its arguments last."""
    flags = [f"--name={pod.name}", f"--hostname={pod.name}", "--pull=never",
             f"--stop-timeout={pod.grace_s}"] + pod.flags
    if pod.uid is not None:
        flags.append(f"--user={pod.uid}" + (f":{pod.gid}" if pod.gid is not None else ""))
    for g in ([pod.fs_group] if pod.fs_group is not None else []) + pod.groups:
        flags.append(f"--group-add={g}")
    if pod.no_new_privileges:
        flags.append("--security-opt=no-new-privileges")
    if pod.read_only_root:
        # podman's --read-only would add writable tmpfs at /tmp, /run and /var/tmp: the
        # kubelet adds none, so only the pod's volumes are writable.
        flags += ["--read-only", "--read-only-tmpfs=false"]
    for name, path, read_only in pod.mounts:
        vol = pod.volumes[name]
        if vol.kind == "tmpfs":
            size = f",size={vol.size}" if vol.size else ""
            mode = "2777" if pod.fs_group is not None else "777"
            flags.append(f"--mount=type=tmpfs,dst={path},tmpfs-mode={mode}{size}")
        else:
            ro = ",ro=true" if read_only else ""
            flags.append(f"--mount=type=bind,src={volume_root / name},dst={path}{ro}")
    if pod.entrypoint is not None:
        flags.append(f"--entrypoint={json.dumps(pod.entrypoint)}")
    return flags + [pod.image] + (pod.args or [])


def make_volumes(pod, volume_root, secrets):
    """Each volume as the kubelet makes it: an emptyDir (or a new claim) is a directory of
    mode 0777, and with fsGroup of that group with the setgid bit; a secret's keys are files
    of defaultMode (or the item's mode), with fsGroup of that group and readable by it.
    secrets: secret name -> {key: bytes} (what the operator creates, docs/src/kubernetes.md step 2)."""
    for vol in pod.volumes.values():
        where = volume_root / vol.name
        if vol.kind == "tmpfs":
            continue
        where.mkdir(parents=True)
        group = pod.fs_group if pod.fs_group is not None else 0
        if vol.kind == "dir":
            os.chown(where, 0, group)
            os.chmod(where, 0o2777 if pod.fs_group is not None else 0o777)
            continue
        data = secrets.get(vol.secret_name)
        if data is None:
            raise SpecError(f"volume {vol.name}: secret {vol.secret_name!r} is not one of "
                            f"those made for the run ({', '.join(sorted(secrets))})")
        for key, path, mode in vol.items or [(k, k, None) for k in data]:
            if key not in data:
                raise SpecError(f"volume {vol.name}: secret {vol.secret_name} has no key {key!r}")
            target = where / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data[key])
            mode = vol.default_mode if mode is None else mode
            if pod.fs_group is not None:
                mode |= 0o440
            os.chown(target, 0, group)
            os.chmod(target, mode)
        os.chmod(where, 0o755)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--overlay", default="dev",
                    help="deploy/kubernetes/overlays/OVERLAY (default: dev)")
    ap.add_argument("--image", action="store_true", help="print the container's image only")
    args = ap.parse_args()
    try:
        pod = load(args.overlay)
    except SpecError as e:
        sys.exit(f"pod_spec: {e}")
    if args.image:
        print(pod.image)
        return
    print("podman run", " ".join(run_flags(pod, Path("VOLUMES"))))
    for p in pod.probes:
        print(f"{p.kind} probe: GET {p.scheme.lower()}://POD:{p.port}{p.path} "
              f"(timeout {p.timeout_s:g} s)")
    for line in pod.cluster:
        print(f"left to the cluster: {line}")


if __name__ == "__main__":
    main()
