#!/usr/bin/env bash
# The container image, built and run for real, without Docker and without any image
# registry (CI runs this; so can anyone, as root, on Debian):
#
#   bash deploy/podman/run.sh [STATIC_UEXEC]
#
# STATIC_UEXEC is the `uexec` that deploy/build-static.sh printed (`uexec-engine` beside
# it); without it, that script is run first.
# 1. podman, runc and debootstrap from Debian's packages (installed when missing);
# 2. the base image debian:bookworm-slim, made with `debootstrap --variant=minbase` from the
#    mirror of this machine's apt sources, imported with `podman import`;
# 3. the Dockerfile built with podman, its executables stage `prebuilt`: the image ships
#    STATIC_UEXEC, the binary deploy/smoke_test.py tested (no second Rust build);
# 4. deploy/podman/run_pod.py runs the image as the Kubernetes manifests' StatefulSet runs
#    its pod (the flags come from the rendered manifests: deploy/podman/pod_spec.py) and
#    runs a command in it from the host through `uexec mcp --environment` over wss://.
# podman keeps everything (images, layers, containers) in a store of its own in a temp
# directory, removed at the end whatever happens: images of your own are never touched.
#   UEXEC_PODMAN_VENV    the venv for run_pod.py (default: one in the temp directory);
#                        requirements.txt is installed in it
#   UEXEC_DEBIAN_MIRROR  the mirror debootstrap reads (default: the apt sources')
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
HERE=deploy/podman
say() { printf 'podman/run.sh: %s\n' "$*"; }
fail() { say "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root (podman builds and runs the pod as root, as CI does)"

# 1. The tools, from Debian's packages.
if ! command -v podman >/dev/null || ! command -v runc >/dev/null \
    || ! command -v debootstrap >/dev/null; then
  started=$SECONDS
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
     --no-install-recommends podman runc debootstrap >/dev/null) \
    || fail "apt-get install podman runc debootstrap failed"
  say "installed podman, runc and debootstrap in $((SECONDS - started)) s"
fi
command -v kubectl >/dev/null || fail "kubectl not found (it renders the manifests)"

STATIC_UEXEC="${1:-$(bash deploy/build-static.sh)}"
[ -x "$STATIC_UEXEC" ] && [ -x "$(dirname "$STATIC_UEXEC")/uexec-engine" ] \
  || fail "$STATIC_UEXEC: not an executable with uexec-engine beside it"

mirror() {
  if [ -n "${UEXEC_DEBIAN_MIRROR:-}" ]; then echo "$UEXEC_DEBIAN_MIRROR"; return; fi
  # The first URI of the apt sources that is not the security archive.
  { sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr ' ' '\n'
    sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p' \
      /etc/apt/sources.list 2>/dev/null
  } | grep -v -- '-security' | grep -m1 . || true
}
MIRROR="$(mirror)"
[ -n "$MIRROR" ] || fail "no Debian mirror in the apt sources: set UEXEC_DEBIAN_MIRROR"

# podman's own store and settings in WORK: nothing of the machine's podman is read or left.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/uexec-podman-XXXXXX")"
export CONTAINERS_CONF="$WORK/containers.conf" CONTAINERS_STORAGE_CONF="$WORK/storage.conf"
# podman's default network is a bridge it makes at the first run (CNI's cni-podman0): one
# it made is deleted too (its iptables chains stay, empty).
BRIDGE=cni-podman0
ip link show "$BRIDGE" >/dev/null 2>&1 && had_bridge=1 || had_bridge=0
cleanup() {
  podman rm --all --force --time 0 >/dev/null 2>&1 || true
  podman system reset --force >/dev/null 2>&1 || true
  # What an interrupted debootstrap left mounted in its root (/proc, /sys), deepest first;
  # rm does not cross into a mount left behind.
  awk -v w="$WORK" 'index($2, w "/") == 1 { print $2 }' /proc/mounts | sort -r \
    | while read -r m; do umount -l "$m" || true; done
  rm -rf --one-file-system "$WORK" || say "could not remove $WORK" >&2
  if [ "$had_bridge" = 0 ] && ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link delete "$BRIDGE" || say "could not delete the bridge $BRIDGE" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Containers get the limits a kubelet's get: the host's. podman's default (1,048,576 open
# files) is above this machine's hard limit, and podman itself holds its processes to
# kernel.pid_max; the runtime cannot raise either (no CAP_SYS_RESOURCE here). runc: crun
# refuses a hybrid cgroup layout (v1 controllers, v2 at /sys/fs/cgroup/unified). No pids
# limit: Kubernetes sets none per container.
NOFILE="$(ulimit -Hn)"
NPROC="$(ulimit -Hu)"
PID_MAX="$(cat /proc/sys/kernel/pid_max)"
if [ "$NPROC" = unlimited ] || [ "$NPROC" -gt "$PID_MAX" ]; then NPROC="$PID_MAX"; fi
cat > "$CONTAINERS_CONF" <<EOF
[containers]
default_ulimits = ["nofile=$NOFILE:$NOFILE", "nproc=$NPROC:$NPROC"]
pids_limit = 0
[engine]
runtime = "runc"
tmp_dir = "$WORK/libpod"
events_logger = "file"
EOF
cat > "$CONTAINERS_STORAGE_CONF" <<EOF
[storage]
driver = "overlay"
graphroot = "$WORK/storage"
runroot = "$WORK/run"
EOF

# The manifests first: pod_spec.py's own tests, and the image the StatefulSet names.
VENV="${UEXEC_PODMAN_VENV:-$WORK/venv}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check -r "$HERE/requirements.txt"
"$VENV/bin/python" -m unittest -q "$HERE/test_pod_spec.py"
IMAGE="$("$VENV/bin/python" "$HERE/pod_spec.py" --overlay dev --image)"

# 2. The base image, from Debian's packages alone.
started=$SECONDS
debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
  || { tail -20 "$WORK/debootstrap.log" >&2; fail "debootstrap from $MIRROR failed"; }
# As a slim image: no package cache, no package lists (the Dockerfile's apt-get updates).
rm -rf "$WORK"/rootfs/var/cache/apt/*.bin "$WORK"/rootfs/var/cache/apt/archives/*.deb \
  "$WORK"/rootfs/var/lib/apt/lists/*
tar -C "$WORK/rootfs" -c . | podman import --quiet - debian:bookworm-slim >/dev/null
rm -rf "$WORK/rootfs"
say "debian:bookworm-slim made by debootstrap from $MIRROR in $((SECONDS - started)) s"

# 3. The Dockerfile, its executables the ones given (the context holds them alone).
started=$SECONDS
mkdir "$WORK/context"
cp "$STATIC_UEXEC" "$(dirname "$STATIC_UEXEC")/uexec-engine" "$WORK/context/"
podman build --pull=never --build-arg UEXEC_BINARIES=prebuilt -f Dockerfile -t "$IMAGE" \
  "$WORK/context" >"$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log" >&2; fail "podman build failed"; }
say "$IMAGE built with podman in $((SECONDS - started)) s"

# 4. The image run as the manifests' pod, and used from the host.
started=$SECONDS
"$VENV/bin/python" "$HERE/run_pod.py" --uexec "$STATIC_UEXEC" --overlay dev
say "run as the pod and used over wss:// in $((SECONDS - started)) s"
