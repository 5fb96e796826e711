# syntax=docker/dockerfile:1
#
# localserve: serve ABEJA Platform and Cortex handlers from one image.
#
#   docker build -t localserve .                          # GPU (CUDA 12 + cuDNN 9, from pip)
#   docker build -t localserve:cpu --build-arg VARIANT=cpu .
#   docker build -t localserve:cpu-onnx --build-arg VARIANT=cpu-onnx .   # no TensorFlow
#   docker run --gpus all -p 8888:8888 -v "$PWD":/mnt/project localserve
#
# Versions, and why they fit together (checked on PyPI, 2025-2026 releases):
# - tensorflow[and-cuda] 2.18-2.21 is built for CUDA 12 and pulls its own CUDA 12 wheels
#   (nvidia-*-cu12 >= 12.5, nvidia-cudnn-cu12 >= 9.3, < 10).
# - onnxruntime-gpu 1.19-1.26 on PyPI is built for CUDA 12.x + cuDNN 9.x; from 1.27 on it
#   targets CUDA 13, so the `gpu` extra caps it at < 1.27. Both need Python >= 3.11
#   (onnxruntime-gpu 1.26, numpy 2.4): every variant starts from python:3.12-slim.
# - CUDA and cuDNN come from pip (nvidia-*-cu12 wheels), resolved once for both runtimes:
#   TensorFlow finds them in site-packages, onnxruntime through preload_dlls(), which localserve
#   calls before its first CUDA session; both then load one libcudnn.so.9. Host driver: one that
#   runs CUDA 12 (>= 525; the wheels' CUDA minor version may need a newer one, >= 570 for 12.8).
#
# The `cortex` extra brings what Cortex's images had pre-installed for user code (boto3,
# requests, msgpack, numpy, dill; seeds 000 and 002).
#
# The ENTRYPOINT is the `localserve` command and the CMD its default arguments, so
# `docker run IMAGE` serves the project mounted at /mnt/project, and
# `docker run IMAGE run --input sample.json` or `docker run IMAGE serve --handler main:handler`
# work as well. Where to listen comes from the environment, not the CMD, so that arguments after
# the image name keep it: LOCALSERVE_HOST=0.0.0.0, LOCALSERVE_PORT=8888 (the HEALTHCHECK asks
# that port; `docker run -e LOCALSERVE_PORT=9000 -p 9000:9000 IMAGE` moves both) and
# LOCALSERVE_GRPC_PORT=8081, the Open Inference Protocol over gRPC (KServe's h2c port; the `grpc`
# extra is in every variant; `-e LOCALSERVE_GRPC_PORT=` turns it off). 500 texts are hidden from
# clients by the environment too (LOCALSERVE_HIDE_ERRORS=1, `serve --hide-errors`), whatever the
# command; `-e LOCALSERVE_HIDE_ERRORS=0` shows them. Set LOCALSERVE_API_KEY to require
# `Authorization: Bearer <key>`. ORT_DISABLE_TELEMETRY=1: ONNX Runtime neither sends telemetry nor
# tries to keep a device id under $HOME, which, on a read-only root (the exported pods'), printed a
# coloured warning that is no JSON line into the log.
#
# The user `localserve` is uid 10001 in group 10001, the ids the exported manifests run the pods as.
#
# podman builds OCI images by default, and that format has no HEALTHCHECK: build with
# `podman build --format docker` (or BUILDAH_FORMAT=docker) to keep it.
#
# Fast rebuilds: the dependencies are installed from pyproject.toml alone, in a layer of their
# own, before the source is copied; a change to the code reinstalls only localserve itself
# (`pip install --no-deps`). pip's cache is a build cache mount, never a layer.
#
# No VOLUME: this image is meant to be extended (`FROM localserve`, see the README), and a VOLUME
# would discard what a derived image writes there and give each `docker run` an anonymous volume.
# Mount one yourself to keep the cache: `-v localserve-cache:/var/cache/localserve`.
#
# Built and run in CI by scripts/image.sh (podman, on a stand-in for python:3.12-slim).

ARG VARIANT=gpu

# One base for every variant: CUDA 12 and cuDNN 9 come as pip wheels with onnxruntime-gpu's
# [cuda,cudnn] extras and tensorflow[and-cuda] (one copy, shared by both), so the GPU variant needs
# no nvidia/cuda base. The NVIDIA Container Toolkit mounts the host's driver where these say.
FROM python:3.12-slim AS base-gpu
RUN python -m venv /opt/venv
ENV LOCALSERVE_EXTRAS=gpu,tensorflow-gpu,s3,cortex,grpc \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

FROM python:3.12-slim AS base-cpu
RUN python -m venv /opt/venv
ENV LOCALSERVE_EXTRAS=onnx,tensorflow,s3,cortex,grpc

# Lean: ONNX models and Python predictors only, no TensorFlow (`--build-arg VARIANT=cpu-onnx`).
FROM python:3.12-slim AS base-cpu-onnx
RUN python -m venv /opt/venv
ENV LOCALSERVE_EXTRAS=onnx,s3,cortex,grpc

FROM base-${VARIANT} AS final
ARG VARIANT
LABEL org.opencontainers.image.title="localserve" \
      org.opencontainers.image.description="Serve ABEJA Platform and Cortex model handlers locally, as the platform would (${VARIANT} variant)." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LOCALSERVE_CACHE_DIR=/var/cache/localserve \
    LOCALSERVE_HOST=0.0.0.0 \
    LOCALSERVE_PORT=8888 \
    LOCALSERVE_GRPC_PORT=8081 \
    LOCALSERVE_HIDE_ERRORS=1 \
    ORT_DISABLE_TELEMETRY=1

# 1. The dependencies, from pyproject.toml alone (no package yet, so an empty localserve is
#    built, then removed; README.md, which pyproject.toml names, is an empty stand-in here so that
#    editing it does not reinstall everything). `env -u PIP_NO_CACHE_DIR`: pip ignores that
#    variable's value.
COPY pyproject.toml /tmp/localserve-deps/
RUN --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    touch /tmp/localserve-deps/README.md \
    && env -u PIP_NO_CACHE_DIR pip install "/tmp/localserve-deps[${LOCALSERVE_EXTRAS}]" \
    && pip uninstall --yes --quiet localserve \
    && rm -rf /tmp/localserve-deps \
    && groupadd --system --gid 10001 localserve \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/localserve --shell /usr/sbin/nologin localserve \
    && mkdir -p /mnt/project /var/cache/localserve \
    && chown localserve:localserve /mnt/project /var/cache/localserve

# 2. localserve itself.
COPY . /tmp/localserve-src
RUN --mount=type=cache,target=/root/.cache/pip,sharing=locked \
    env -u PIP_NO_CACHE_DIR pip install --no-deps /tmp/localserve-src \
    && rm -rf /tmp/localserve-src

USER localserve
WORKDIR /mnt/project
EXPOSE 8888 8081

HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('LOCALSERVE_PORT', '8888'), timeout=4)"]

ENTRYPOINT ["localserve"]
# --system-deps: the project's dependencies.sh runs at container start, as on Cortex (it needs
# `docker run --user root` when it installs system packages with apt-get).
CMD ["serve", "--project", "/mnt/project", "--system-deps"]
