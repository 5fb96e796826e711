#!/usr/bin/env bash
# The GPU tests and the GPU benchmark in one command, on a CUDA machine (benchmarks/README.md, "On a GPU").
#
#   scripts/gpu_bench.sh [--install | --bundle DIR] [images.py gpu options, e.g. --duration 4 --concurrency 1,16,64,128]
#
# 1. nvidia-smi must see a GPU (else exit 2, nothing run);
# 2. with --install: a venv .venv-gpu at the root of this checkout, localserve with its test extra, the CPU
#    onnxruntime replaced by onnxruntime-gpu (localserve[gpu] for CUDA 12 drivers, [gpu-cuda13] for 13+),
#    torch and torchvision (the ResNet-50 export) - needs PyPI;
#    with --bundle DIR (no network; DIR made by scripts/gpu_bundle.sh): its wheels and onnxruntime-gpu go
#    into DIR/site, first on PYTHONPATH, over a Python that has PyTorch (its CUDA libraries are put on
#    LD_LIBRARY_PATH); without either, the Python on PATH must already have them;
# 3. onnxruntime must offer the CUDA provider (else exit 3, with what to install; the tests then open sessions on it);
# 4. the tests marked gpu, in the files that have them (`pytest -m gpu`; the ONNX ones skip when CUDA cannot
#    run, and this script then fails; TensorFlow's runs where localserve[tensorflow-gpu] is installed);
# 5. `python benchmarks/images.py gpu --out $OUT/gpu.json` (OUT defaults to .), with the options given.
# Prints each step's time; exits non-zero at the first step that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.}
step() { printf '\n== %s  [%s]\n' "$1" "$(date -u +%H:%M:%S)"; }

step "GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || {
    echo "nvidia-smi sees no GPU: nothing to run here" >&2
    exit 2
}
PY=${PYTHON:-python3}
if [ "${1:-}" = "--install" ]; then
    shift
    step "install into .venv-gpu"
    cuda=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\)\..*/\1/p' | head -1)
    extra=gpu
    if [ "${cuda:-12}" -ge 13 ]; then extra=gpu-cuda13; fi
    "$PY" -m venv .venv-gpu
    PY=.venv-gpu/bin/python
    "$PY" -m pip install -q -e ".[test]"
    "$PY" -m pip uninstall -q -y onnxruntime   # the CPU build and onnxruntime-gpu share the module's files
    "$PY" -m pip install -q -e ".[$extra]" torch torchvision
elif [ "${1:-}" = "--bundle" ]; then
    bundle=$(cd "${2:?--bundle DIR}" && pwd)
    shift 2
    step "install $bundle into $bundle/site"
    got=$(cat "$bundle"/ort.tar.xz.* | sha256sum | cut -d' ' -f1)
    if [ "$got" != "$(cat "$bundle/ort.sha256")" ]; then
        echo "onnxruntime-gpu's parts do not add up (sha256 $got, not $(cat "$bundle/ort.sha256")): a part is missing or cut" >&2
        exit 5
    fi
    rm -rf "$bundle/site"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$bundle/site" "$bundle"/wheels/*.whl
    cat "$bundle"/ort.tar.xz.* | xz -d -T0 | tar -x -C "$bundle/site"
    export PYTHONPATH=$bundle/site${PYTHONPATH:+:$PYTHONPATH}
    purelib=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    cuda_libs=$( (ls -d "$purelib"/nvidia/*/lib 2>/dev/null || true) | tr "\n" ":")  # PyTorch's CUDA and cuDNN wheels
    export LD_LIBRARY_PATH=${cuda_libs}${LD_LIBRARY_PATH:-}
fi

step "onnxruntime's CUDA provider"
"$PY" - <<'PYEOF' || exit 3
import sys

try:
    import onnxruntime as ort
except ImportError as exc:
    sys.exit(f"onnxruntime is not installed ({exc}): pip install 'localserve[gpu]' (CUDA 12) or 'localserve[gpu-cuda13]'")
print("onnxruntime", ort.__version__, ort.get_available_providers())
if "CUDAExecutionProvider" not in ort.get_available_providers():
    sys.exit("this onnxruntime has no CUDA provider: pip uninstall onnxruntime, then pip install 'localserve[gpu]'")
PYEOF

step "tests marked gpu"
# Only the files that have them: collecting the whole suite imports what a GPU machine may not have.
mapfile -t gpu_files < <(grep -rl --include='test_*.py' 'pytest.mark.gpu' tests | sort)
"$PY" -m pytest -q -p no:randomly -n 0 -m gpu -rs "${gpu_files[@]}" | tee "$OUT/gpu-tests.txt"
if grep -q "SKIPPED.*test_onnx" "$OUT/gpu-tests.txt"; then
    echo "the ONNX GPU tests were skipped: CUDA does not run here (see their reasons above)" >&2
    exit 4
fi  # TensorFlow's GPU test runs only with localserve[tensorflow-gpu] installed (not by --install: gigabytes)

step "benchmarks/images.py gpu"
"$PY" benchmarks/images.py gpu --out "$OUT/gpu.json" "$@"
step "done"
