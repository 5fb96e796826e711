# syntax=docker/dockerfile:1
#
# localserve: serve ABEJA Platform and Cortex handlers from one image.
#
#   docker build -t localserve .                          # GPU (CUDA 12 + cuDNN 9)
#   docker build -t localserve:cpu --build-arg VARIANT=cpu .
#   docker run --gpus all -p 8888:8888 -v "$PWD":/mnt/project localserve
#
# Versions, and why they fit together (checked on PyPI, 2025-2026 releases):
# - tensorflow[and-cuda] 2.18-2.21 is built for CUDA 12 and pulls its own CUDA 12 wheels
#   (nvidia-*-cu12 >= 12.5, nvidia-cudnn-cu12 >= 9.3, < 10).
# - onnxruntime-gpu 1.19-1.26 on PyPI is built for CUDA 12.x + cuDNN 9.x; from 1.27 on it
#   targets CUDA 13, so the `gpu` extra caps it at < 1.27. Both need Python >= 3.11
#   (onnxruntime-gpu 1.26, numpy 2.4), hence Ubuntu 24.04 (Python 3.12), not 22.04 (3.10).
# - The base image brings CUDA 12.8 and cuDNN 9 for onnxruntime; both runtimes then load
#   one libcudnn.so.9 (cuDNN keeps its ABI within a major version). Host driver: >= 570
#   for CUDA 12.8 (older 12.x drivers work through CUDA's minor-version compatibility).
#
# The `cortex` extra brings what Cortex's images had pre-installed for user code (boto3,
# requests, msgpack, numpy, dill; seeds 000 and 002).
#
# The ENTRYPOINT is the `localserve` command and the CMD its default arguments, so
# `docker run IMAGE` serves the project mounted at /mnt/project, and
# `docker run IMAGE run --input sample.json` or `docker run IMAGE --help` work as well.
# The image binds 0.0.0.0 and hides 500 texts (--hide-errors); set LOCALSERVE_API_KEY
# (`docker run -e LOCALSERVE_API_KEY=...`) to require `Authorization: Bearer <key>`.

ARG VARIANT=gpu

FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04 AS base-gpu
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv
ENV LOCALSERVE_EXTRAS=gpu,tensorflow-gpu,s3,cortex

FROM python:3.12-slim AS base-cpu
RUN python -m venv /opt/venv
ENV LOCALSERVE_EXTRAS=onnx,tensorflow,s3,cortex

FROM base-${VARIANT} AS final
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LOCALSERVE_CACHE_DIR=/var/cache/localserve

COPY . /tmp/localserve-src
RUN pip install "/tmp/localserve-src[${LOCALSERVE_EXTRAS}]" \
    && rm -rf /tmp/localserve-src \
    && useradd --system --uid 10001 --create-home --home-dir /home/localserve --shell /usr/sbin/nologin localserve \
    && mkdir -p /mnt/project /var/cache/localserve \
    && chown localserve:localserve /mnt/project /var/cache/localserve

# Models fetched from s3:// or https:// and the project's requirements.txt (installed by
# localserve at start-up) live here; mount a volume to keep them across containers.
VOLUME ["/var/cache/localserve"]
USER localserve
WORKDIR /mnt/project
EXPOSE 8888

HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8888/healthz', timeout=4)"]

ENTRYPOINT ["localserve"]
# --system-deps: the project's dependencies.sh runs at container start, as on Cortex (it needs
# `docker run --user root` when it installs system packages with apt-get).
CMD ["serve", "--project", "/mnt/project", "--host", "0.0.0.0", "--system-deps", "--hide-errors"]
