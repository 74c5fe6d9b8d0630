# syntax=docker/dockerfile:1
# uexec as a pod: `uexec serve` (the Codex-compatible exec server) over wss://, with the
# token and the TLS pair read from mounted files. See deploy/kubernetes/ and the book's
# "Running on Kubernetes" (docs/src/kubernetes.md).
#
#   docker build -t uexec:dev .
#   docker build --build-arg RUNTIME_IMAGE=my-toolchain:latest -t uexec:mine .
#
# The executables are static (musl): the runtime stage may be any image with the shell and
# tools your agents' commands need (the default has bash, coreutils, git and CA
# certificates).
#
# Where the executables come from (UEXEC_BINARIES):
# - `source` (the default): built here from this checkout in RUST_IMAGE, by
#   deploy/build-static.sh;
# - `prebuilt`: copied from a build context that holds just `uexec` and `uexec-engine`, as
#   deploy/build-static.sh made them. CI builds the image so (deploy/podman/run.sh), with
#   the binary it has already smoke-tested:
#     podman build --build-arg UEXEC_BINARIES=prebuilt -f Dockerfile DIR_WITH_THE_TWO
# Only the chosen stage is built (BuildKit and podman skip the stages nothing uses).

ARG RUST_IMAGE=rust:1.95-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
ARG UEXEC_BINARIES=source

FROM ${RUST_IMAGE} AS binaries-source
WORKDIR /src
COPY . .
RUN bash deploy/build-static.sh > /tmp/binary-path \
 && install -D -m 0755 "$(cat /tmp/binary-path)" /out/uexec \
 && install -D -m 0755 "$(dirname "$(cat /tmp/binary-path)")/uexec-engine" /out/uexec-engine

FROM scratch AS binaries-prebuilt
COPY uexec uexec-engine /out/

FROM binaries-${UEXEC_BINARIES} AS binaries

FROM ${RUNTIME_IMAGE}
# A shell and the everyday tools of coding agents; one unprivileged user (10001) whose home
# is the workspace (with /tmp, the only writable places).
RUN set -eux; \
    if command -v apt-get >/dev/null; then \
      apt-get update; \
      apt-get install -y --no-install-recommends bash ca-certificates git procps; \
      rm -rf /var/lib/apt/lists/*; \
    fi; \
    (getent group 10001 || groupadd --gid 10001 uexec); \
    (getent passwd 10001 || useradd --uid 10001 --gid 10001 --home-dir /workspace --no-create-home --shell /bin/bash uexec); \
    install -d -o 10001 -g 10001 -m 0750 /workspace
# `uexec` execs `uexec-engine` beside it for everything but a plain `uexec run`.
COPY --from=binaries /out/uexec /out/uexec-engine /usr/local/bin/

USER 10001:10001
WORKDIR /workspace
ENV HOME=/workspace \
    SHELL=/bin/bash
# The workspace and /tmp are the writable volumes; run with a read-only root filesystem.
VOLUME ["/workspace", "/tmp"]
EXPOSE 9000
# /readyz on the same port answers 200 without a token (the probes use it).
ENTRYPOINT ["/usr/local/bin/uexec", "serve", \
            "--listen", "wss://0.0.0.0:9000", \
            "--token-file", "/etc/uexec/token/token", \
            "--tls-cert", "/etc/uexec/tls/tls.crt", \
            "--tls-key", "/etc/uexec/tls/tls.key"]
