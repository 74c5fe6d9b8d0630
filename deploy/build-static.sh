#!/usr/bin/env bash
# Builds the static uexec executables that the container image copies (musl, no shared
# libraries: they run on any base image, distroless or not): `uexec` and `uexec-engine`,
# which must be installed side by side (the first execs the second). The Dockerfile and CI
# both run this script, so CI smoke-tests exactly what the image ships. Prints the path of
# `uexec`; `uexec-engine` is beside it.
#
# Honours CARGO_TARGET_DIR (a relative one is taken from the checkout's root, as cargo does).
# Needs: rustup (adds the musl target) and musl-gcc (Debian: musl-tools; ring compiles C).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
TARGET=x86_64-unknown-linux-musl

if ! rustup target list --installed | grep -qx "$TARGET"; then
  rustup target add "$TARGET" >&2
fi
if ! command -v musl-gcc >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    (apt-get update -qq && apt-get install -y -qq --no-install-recommends musl-tools) >&2
  else
    echo "build-static.sh: musl-gcc not found (Debian/Ubuntu: apt-get install musl-tools)" >&2
    exit 1
  fi
fi
CC_x86_64_unknown_linux_musl=musl-gcc \
  cargo build --release --locked -p uexec --target "$TARGET" >&2
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$PWD/$TARGET_DIR" ;; esac
echo "$TARGET_DIR/$TARGET/release/uexec"
