#!/usr/bin/env bash
# What scripts/gpu_bench.sh --bundle installs on a CUDA machine without network, made here (with PyPI).
#
#   scripts/gpu_bundle.sh DIR [--python 3.12] [--part-mb 58]
#
# The machine must already have Python X.Y with numpy, onnx, Pillow, PyYAML, httpx, click, tqdm,
# pathspec, msgpack, prometheus_client, pytest, pytest-xdist, pytest-timeout, torch and torchvision
# (a PyTorch image has them all). DIR gets:
# - wheels/: the rest of localserve's dependencies and LitServe with its own (the benchmark's peer),
#   for CPython X.Y on manylinux x86-64, each named, none resolved (so nothing of the machine's is replaced);
# - ort.tar.xz.a, .b, ...: onnxruntime-gpu's wheel (CUDA 13 builds, 1.28+) unpacked, tarred, compressed
#   with xz and split into parts of at most --part-mb MiB: the wheel is 255 MB (1.31), 204 MB this way,
#   and a machine that takes files through a capped transfer takes one part at a time;
# - ort.sha256: the parts' checksum, together.
# Seen working on 2026-11-26: an H100 with PyTorch 2.11 (cu130) and Python 3.12, no network.
set -euo pipefail
dir=${1:?usage: scripts/gpu_bundle.sh DIR [--python 3.12] [--part-mb 58]}
shift
py=3.12
part_mb=58
while [ $# -gt 0 ]; do
    case $1 in
    --python) py=$2; shift 2 ;;
    --part-mb) part_mb=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
tag=cp${py/./}
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_26_x86_64 manylinux_2_17_x86_64 \
    manylinux2014_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$p")
done
download() {
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
        "${platforms[@]}" -d "$1" "${@:2}"
}
mkdir -p "$dir/wheels"
# localserve's own (pyproject.toml's bounds), and uvicorn[standard]'s websockets
download "$dir/wheels" "starlette>=0.37" "uvicorn>=0.54,<0.55" "httptools>=0.9,<0.10" "orjson>=3.9" \
    "python-multipart>=0.0.9" "python-dotenv>=1.0" "swagger-ui-py>=23.9" "watchfiles>=0.21" websockets
# LitServe, the image benchmark's peer, with what it imports
download "$dir/wheels" litserve fastapi pydantic pydantic-core typing-inspection annotated-types annotated-doc \
    pyzmq opentelemetry-api importlib-metadata
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
download "$tmp" "onnxruntime-gpu>=1.28"
wheel=$(ls "$tmp"/onnxruntime_gpu-*-"$tag"-*.whl)
mkdir "$tmp/unpacked"
python3 -m zipfile -e "$wheel" "$tmp/unpacked"
rm -f "$dir"/ort.tar.xz.*
tar -C "$tmp/unpacked" -cf - . | xz -T0 -6 | split -b "${part_mb}M" -a 1 - "$dir/ort.tar.xz."
cat "$dir"/ort.tar.xz.* | sha256sum | cut -d' ' -f1 >"$dir/ort.sha256"
echo "$(basename "$wheel") -> $(ls "$dir"/ort.tar.xz.* | wc -l) parts of at most ${part_mb} MiB; $(ls "$dir/wheels" | wc -l) wheels"
du -sh "$dir"/wheels "$dir"/ort.tar.xz.*
