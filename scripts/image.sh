#!/usr/bin/env bash
# Build the Docker image with podman and run the documentation's `docker` lines against it
# (docs/tutorials/docker-gpu.md, docs/tutorials/kubernetes-kserve.md, docs/reference/deployment.md).
#
#   scripts/image.sh            # stand-in base, build, every case, then the GPU image; exit 1 when a case fails
#                               # (LOCALSERVE_IMAGE_GPU=0: not the GPU image, for a machine short of disk)
#   scripts/image.sh base       # only the stand-in base image (python:3.12-slim)
#   scripts/image.sh build      # the stand-in base and the CPU images (cpu, and the lean cpu-onnx)
#   scripts/image.sh gpu        # the stand-in base and the GPU image (README's `docker build -t localserve .`),
#                               # run on this machine without a GPU: --allow-cpu-fallback
#   scripts/image.sh kube       # the stand-in base, the cpu image, and only the `podman kube play` case
#
# Docker Hub is out of reach here, so the Dockerfile's CPU base (`FROM python:X.Y-slim`) is replaced
# by a stand-in with its layout: Debian from `debootstrap` (minbase) and, in /usr/local, a CPython of
# the same X.Y copied from this machine (found as .ci/run finds its Pythons: pythonX.Y on PATH, then
# pyenv), pip installed by ensurepip. It is tagged docker.io/library/python:X.Y-slim, so the
# UNCHANGED Dockerfile builds on it. The rootfs is cached in
# ${XDG_CACHE_HOME:-~/.cache}/localserve-image (remove that folder to start over); the CA
# certificates this machine trusts beyond Debian's (/usr/local/share/ca-certificates, e.g. a
# TLS-terminating proxy's) and a pip.conf naming the system bundle are added on top at every run.
#
# podman, not Docker: its CLI is Docker's, so the README's lines run verbatim through
# `docker() { podman "$@"; }`. What these machines need, found by trying (all in a containers.conf
# this script writes and points CONTAINERS_CONF at): runc, since crun 1.8 refuses the hybrid cgroup
# layout; open-file and process limits below the machine's ceilings. Every Cortex case runs twice:
# with a seccomp profile equivalent to Docker's default (scripts/seccomp_docker.py derives it from
# podman's: no unshare, mount or setns without CAP_SYS_ADMIN, so /mnt/project cannot be a mount
# namespace) and with podman's own default (which allows them).
#
# Needs root (debootstrap, chroot, rootful podman) and: podman buildah debootstrap runc uidmap catatonit
# (.ci/install-system-deps installs them; podman 4.3's `kube play` builds its pause image with catatonit).
# Every step prints its time; the summary lists each case.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/localserve-image
SUITE=${LOCALSERVE_IMAGE_SUITE:-bookworm}
MIRROR=${LOCALSERVE_IMAGE_MIRROR:-http://deb.debian.org/debian}
IMAGE=localserve:cpu
GRACEFUL=30 # serve's default --graceful-timeout
START=$SECONDS
WORK=$(mktemp -d "${TMPDIR:-/tmp}/localserve-image.XXXXXX")
CONTAINERS=()
KUBE_DIR="" # the folder of a `podman kube play` still up
cleanup() {
    local id
    for id in "${CONTAINERS[@]}"; do podman rm -f "$id" >/dev/null 2>&1 || true; done
    if [ -n "$KUBE_DIR" ]; then (cd "$KUBE_DIR" && podman kube down k8s.yaml) >/dev/null 2>&1 || true; fi
    # The images a rebuild left untagged (a GPU image is 7.4 GB): repeated runs must not fill the disk.
    podman image prune -f >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

say() { printf '\n==> %s  (%ds)\n' "$*" "$((SECONDS - START))"; }
die() {
    echo "image.sh: $*" >&2
    exit 1
}
docker() { podman "$@"; }

for tool in podman debootstrap runc chroot curl catatonit; do
    command -v "$tool" >/dev/null || die "$tool is missing; run .ci/install-system-deps (Debian: podman buildah debootstrap runc uidmap curl catatonit)"
done
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and rootful podman)"

# The CPU stage's base, read from the Dockerfile: `FROM python:3.12-slim AS base-cpu`.
FROM_NAME=$(awk 'toupper($1) == "FROM" && tolower($3) == "as" && $4 == "base-cpu" {print $2}' Dockerfile)
[[ "$FROM_NAME" =~ ^python:([0-9]+\.[0-9]+)-slim$ ]] || die "the Dockerfile's base-cpu stage starts FROM '$FROM_NAME'; this script makes a stand-in for python:X.Y-slim only"
PY_VERSION=${BASH_REMATCH[1]}

find_python() { # as .ci/run: pythonX.Y on PATH, then pyenv's
    local candidate
    for candidate in "python$1" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/"python$1"; do
        if "$candidate" -c 'import sys' >/dev/null 2>&1; then
            command -v "$candidate" || echo "$candidate"
            return 0
        fi
    done
}

cat >"$WORK/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$WORK/containers.conf"

make_rootfs() { # make_rootfs TAR PYTHON: debootstrap + that CPython in /usr/local, as a tar
    local tar=$1 python=$2 dir=$WORK/rootfs prefix version
    prefix=$("$python" -c 'import sys; print(sys.base_prefix)')
    version=$PY_VERSION
    say "stand-in rootfs: debootstrap $SUITE + CPython $("$python" -V 2>&1 | cut -d' ' -f2) from $prefix"
    # The run-time libraries of CPython's extension modules (ssl, sqlite3, ctypes, readline, ...).
    debootstrap --variant=minbase \
        --include=ca-certificates,netbase,tzdata,libssl3,libffi8,libsqlite3-0,libbz2-1.0,liblzma5,zlib1g,libreadline8,libncursesw6,libgdbm6,libuuid1,libexpat1,libtirpc3 \
        "$SUITE" "$dir" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 || {
        tail -n 20 "$WORK/debootstrap.log" >&2
        die "debootstrap $SUITE from $MIRROR failed (log above)"
    }
    mkdir -p "$dir/usr/local/bin" "$dir/usr/local/lib" "$dir/usr/local/include"
    cp -a "$prefix/bin/python$version" "$dir/usr/local/bin/"
    cp -a "$prefix"/lib/libpython3*.so* "$dir/usr/local/lib/"
    tar -C "$prefix/lib" --exclude="python$version/test" --exclude="python$version/site-packages" \
        --exclude=__pycache__ -cf - "python$version" | tar -C "$dir/usr/local/lib" -xf -
    mkdir -p "$dir/usr/local/lib/python$version/site-packages"
    cp -a "$prefix/include/python$version" "$dir/usr/local/include/"
    ln -s "python$version" "$dir/usr/local/bin/python3"
    ln -s python3 "$dir/usr/local/bin/python"
    # Build-time paths of the copied interpreter (used when a sdist compiles) now point at /usr/local.
    # (text files only: the .so files hold the path in their debug information, and sed would break them).
    rm -f "$dir/usr/local/lib/python$version"/config-*/libpython*.a
    sed -i "s#$prefix#/usr/local#g" "$dir/usr/local/lib/python$version"/_sysconfigdata_*.py \
        "$dir/usr/local/lib/python$version"/config-*/{Makefile,python-config.py}
    chroot "$dir" /sbin/ldconfig
    chroot "$dir" /usr/local/bin/python3 -m ensurepip --default-pip >/dev/null
    chroot "$dir" /usr/local/bin/python3 -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, venv, ensurepip' ||
        die "the stand-in's Python lacks a standard module (see above)"
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    mkdir -p "$(dirname "$tar")"
    tar -C "$dir" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    rm -rf "$dir"
}

make_base() { # the stand-in, tagged docker.io/library/python:X.Y-slim
    local python full tar key began=$SECONDS
    python=$(find_python "$PY_VERSION")
    [ -n "$python" ] || die "no Python $PY_VERSION here (the Dockerfile's $FROM_NAME); install it (pyenv install $PY_VERSION) so that the stand-in base can be made"
    full=$("$python" -c 'import platform; print(platform.python_version())')
    key="$SUITE-python$full"
    tar=$CACHE/rootfs-$key.tar
    if [ -s "$tar" ]; then
        say "stand-in rootfs: cached ($tar)"
    else
        make_rootfs "$tar" "$python"
    fi
    if ! podman image exists "localhost/localserve-standin:$key"; then
        podman import --quiet \
            --change "ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin" \
            --change "ENV LANG=C.UTF-8" --change "ENV PYTHON_VERSION=$full" --change 'CMD ["python3"]' \
            "$tar" "localhost/localserve-standin:$key" >/dev/null
    fi
    mkdir -p "$WORK/base/ca"
    cp /usr/local/share/ca-certificates/*.crt "$WORK/base/ca/" 2>/dev/null || true
    cat >"$WORK/base/Containerfile" <<EOF
FROM localhost/localserve-standin:$key
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null 2>&1 && printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > /etc/pip.conf
EOF
    podman build --quiet -t "docker.io/library/$FROM_NAME" "$WORK/base" >/dev/null
    say "stand-in base docker.io/library/$FROM_NAME ready in $((SECONDS - began)) s (Debian $SUITE, Python $full)"
}

make_base
[ "${1:-}" = base ] && exit 0

# --- the image, built as the README says -----------------------------------------------------------

# The documentation's lines, taken from it at run time. They name the GPU image `localserve` and pass
# `--gpus all`; the CPU image is `localserve:cpu`, with no GPU to pass. Port 8888 is used when free,
# another free port otherwise (the machine is shared).
readme_line() { # readme_line REGEX: the first line (or `...` span) of the Docker pages matching it
    python3 - "$1" <<'PY'
import re, sys
text = "\n".join(open(p, encoding="utf-8").read() for p in ("docs/tutorials/docker-gpu.md", "docs/tutorials/kubernetes-kserve.md", "docs/reference/deployment.md"))
for line in [*text.splitlines(), *re.findall(r"`([^`\n]+)`", text)]:
    if re.search(sys.argv[1], line.strip()):
        print(line.strip())
        break
else:
    sys.exit(f"the Docker pages of docs/ have no line matching {sys.argv[1]!r}")
PY
}
readme_curl() { # the docs' predict request (the curl block after "In another terminal:")
    python3 - <<'PY'
import re
text = "\n".join(open(p, encoding="utf-8").read() for p in ("docs/tutorials/docker-gpu.md", "docs/tutorials/kubernetes-kserve.md", "docs/reference/deployment.md")).split("In another terminal:", 1)[1]
block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
print(re.search(r"curl -s http://localhost:8888/iris/predict.*?\n(?=curl|\Z)", block + "\n", re.S).group(0).strip())
PY
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=8888
if ! python3 -c 'import socket; socket.socket().bind(("0.0.0.0", 8888))' 2>/dev/null; then PORT=$(free_port); fi
GRPC_PORT=8081
if ! python3 -c 'import socket; socket.socket().bind(("0.0.0.0", 8081))' 2>/dev/null; then GRPC_PORT=$(free_port); fi
for_cpu() { # a README line, for the CPU image on $PORT (and gRPC on $GRPC_PORT)
    sed -e 's/ --gpus all//' -e 's/ localserve\( \|$\)/ localserve:cpu\1/' -e "s/-p 8888:8888/-p $PORT:8888/" \
        -e "s/-p 8081:8081/-p $GRPC_PORT:8081/" -e "s#localhost:8888#localhost:$PORT#g" <<<"$1"
}
# A gRPC call with curl (HTTP/2 without TLS): ModelReady for iris, its message framed by hand
# (a 5-byte prefix, then field 1 "iris"); the answer's message is `08 01`, ready = true.
GRPC_READY="printf '\\0\\0\\0\\0\\6\\n\\4iris' | curl -s --http2-prior-knowledge -H 'content-type: application/grpc'"
GRPC_READY+=" -H 'te: trailers' --data-binary @- http://localhost:$GRPC_PORT/inference.GRPCInferenceService/ModelReady"
GRPC_READY+=" | od -An -tx1 | tr -s ' \\n' ' '"

export BUILDAH_FORMAT=docker # podman's default OCI format drops HEALTHCHECK
build_image() {
    local line began=$SECONDS
    line=$(for_cpu "$(readme_line '^docker build -t localserve:cpu ')")
    say "\$ $line"
    eval "$line" >"$WORK/build.log" 2>&1 || {
        tail -n 40 "$WORK/build.log" >&2
        die "the image did not build (log above)"
    }
    BUILD_SECONDS=$((SECONDS - began))
    say "built $IMAGE in $BUILD_SECONDS s, $(podman image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%.2f GB", $1 / 1e9}')"
}
gpu_image() { # the GPU variant, built as the README says and run here without a GPU
    local line began=$SECONDS dir out status=0
    line=$(readme_line '^docker build -t localserve \.$')
    say "\$ $line"
    # buildah skips the stages it thinks unused before it applies an ARG's default in `FROM
    # base-${VARIANT}`, and then misses base-gpu (Docker's BuildKit does not): keep every stage.
    eval "${line/docker build/docker build --skip-unused-stages=false}" >"$WORK/build-gpu.log" 2>&1 || {
        tail -n 40 "$WORK/build-gpu.log" >&2
        die "the GPU image did not build (log above)"
    }
    say "built localserve (GPU) in $((SECONDS - began)) s, $(podman image inspect --format '{{.Size}}' localserve | awk '{printf "%.2f GB", $1 / 1e9}')"
    podman run --rm --entrypoint python localserve -c \
        'import onnxruntime, tensorflow; print("onnxruntime", onnxruntime.__version__, onnxruntime.get_available_providers()); print("tensorflow", tensorflow.__version__)'
    dir=$WORK/projects/iris-gpu
    mkdir -p "$WORK/projects" && cp -r handlers_examples/iris_onnx "$dir" && chmod -R a+rX "$dir"
    printf '  compute: {gpu: 1}\n' >>"$dir/cortex.yaml"
    say "\$ docker run --rm -v \"\$PWD\":/mnt/project localserve run --input sample.json --allow-cpu-fallback  (compute: {gpu: 1}, no GPU here)"
    out=$(cd "$dir" && podman run --rm -v "$PWD":/mnt/project localserve run --input sample.json --allow-cpu-fallback 2>"$WORK/gpu-run.err") || status=$?
    tail -n 5 "$WORK/gpu-run.err" >&2
    [ "$status" = 0 ] && [[ "$out" == *'"class_label":"iris-setosa"'* ]] || die "the GPU image did not answer on the CPU: exit $status, $out"
    echo "image.sh: the GPU image answered: $out"
}
if [ "${1:-}" = gpu ]; then
    gpu_image
    exit 0
fi
build_image
LEAN=localserve:cpu-onnx
build_lean() { # the lean variant (no TensorFlow), from the README's line
    local line began=$SECONDS
    line=$(readme_line '^docker build -t localserve:cpu-onnx ')
    say "\$ $line"
    eval "$line" >"$WORK/build-lean.log" 2>&1 || {
        tail -n 40 "$WORK/build-lean.log" >&2
        die "the cpu-onnx image did not build (log above)"
    }
    LEAN_SECONDS=$((SECONDS - began))
    say "built $LEAN in $LEAN_SECONDS s, $(podman image inspect --format '{{.Size}}' "$LEAN" | awk '{printf "%.2f GB", $1 / 1e9}')"
}
[ "${1:-}" = kube ] || build_lean
[ "${1:-}" = build ] && exit 0

# --- the cases -------------------------------------------------------------------------------------

SUMMARY=()
FAILED=0
record() { # record STATUS NAME DETAIL
    SUMMARY+=("$(printf '%-4s %-58s %s' "$1" "$2" "$3")")
    if [ "$1" != ok ]; then FAILED=$((FAILED + 1)); fi
    printf '%s: %s %s\n' "$1" "$2" "$3"
}

project() { # project NAME|/PATH: a copy of handlers_examples/NAME (or of PATH) that uid 10001 can read, as a user's folder
    local src=handlers_examples/$1 dir
    if [[ "$1" == /* ]]; then src=$1; fi
    dir=$WORK/projects/$(basename "$1")
    rm -rf "$dir"
    mkdir -p "$WORK/projects"
    cp -r "$src" "$dir"
    chmod -R a+rX "$dir"
    echo "$dir"
}

conf_for() { # conf_for PROFILE: the containers.conf for that seccomp profile (docker or podman)
    local conf=$WORK/containers-$1.conf
    cp "$WORK/containers.conf" "$conf"
    if [ "$1" = docker ]; then
        python3 "$ROOT/scripts/seccomp_docker.py" >"$WORK/seccomp-docker.json"
        sed -i "s#^\[containers\]#[containers]\nseccomp_profile = \"$WORK/seccomp-docker.json\"#" "$conf"
    fi
    echo "$conf"
}

SERVER_PID=""
SERVER_ID=""
start_server() { # start_server DIR LOG COMMAND: the command in DIR, in the background; its container in SERVER_ID
    local dir=$1 log=$2 line=$3 deadline=$((SECONDS + 60))
    (cd "$dir" && eval "$line") >"$log" 2>&1 &
    SERVER_PID=$!
    SERVER_ID=""
    while [ -z "$SERVER_ID" ]; do
        SERVER_ID=$(podman ps -q --no-trunc --filter "ancestor=localhost/${ANCESTOR:-$IMAGE}" | head -n 1)
        if [ -n "$SERVER_ID" ]; then CONTAINERS+=("$SERVER_ID"); fi
        if ! kill -0 "$SERVER_PID" 2>/dev/null && [ -z "$SERVER_ID" ]; then return 1; fi
        if [ "$SECONDS" -ge "$deadline" ]; then return 1; fi
        sleep 0.2
    done
}
wait_ready() { # wait_ready: /readyz answers 200 from the host within 180 s, while the container lives
    local deadline=$((SECONDS + 180))
    until curl -sf -o /dev/null "http://127.0.0.1:$PORT/readyz"; do
        if ! kill -0 "$SERVER_PID" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then return 1; fi
        sleep 0.5
    done
}
stop_server() { # stop_server: SIGTERM (podman stop), then the seconds it took in STOP_SECONDS, the exit status in STOP_STATUS
    local began=$SECONDS
    podman stop --time $((GRACEFUL + 30)) "$SERVER_ID" >/dev/null 2>&1 || true
    STOP_STATUS=0
    wait "$SERVER_PID" || STOP_STATUS=$?
    STOP_SECONDS=$((SECONDS - began))
}

serve_case() { # serve_case NAME PROFILE PROJECT RUN_LINE CHECK_COMMAND EXPECTED [extra checks: health sigterm]
    local name=$1 profile=$2 example=$3 line=$4 check=$5 expected=$6 extra=${7:-} dir log answer
    dir=$(project "$example")
    log=$WORK/$(tr -c 'a-z0-9\n' _ <<<"$name").log
    say "$name [$profile seccomp]: \$ $line"
    CONTAINERS_CONF=$(conf_for "$profile")
    export CONTAINERS_CONF
    if ! start_server "$dir" "$log" "$line" || ! wait_ready; then
        tail -n 30 "$log" >&2
        record FAIL "$name [$profile]" "not ready on port $PORT (log above)"
        [ -n "$SERVER_ID" ] && podman rm -f "$SERVER_ID" >/dev/null 2>&1
        wait "$SERVER_PID" 2>/dev/null || true
        return 0
    fi
    answer=$(cd "$dir" && eval "$check" 2>&1) || true
    if [[ "$answer" == *"$expected"* ]]; then
        record ok "$name [$profile]" "answer: ${answer:0:80}"
    else
        record FAIL "$name [$profile]" "answer: ${answer:0:300}; expected it to contain $expected"
    fi
    if [[ "$extra" == *health* ]]; then
        local status
        podman healthcheck run "$SERVER_ID" >/dev/null 2>&1 || true
        status=$(podman inspect --format '{{.State.Healthcheck.Status}}' "$SERVER_ID" 2>&1)
        if [ "$status" = healthy ]; then record ok "HEALTHCHECK [$profile]" "$status"; else record FAIL "HEALTHCHECK [$profile]" "status: $status"; fi
    fi
    stop_server
    if [[ "$extra" == *sigterm* ]]; then
        # Exit status 0: localserve drained and returned; 143 would mean that SIGTERM killed it.
        if [ "$STOP_SECONDS" -lt "$GRACEFUL" ] && [ "$STOP_STATUS" = 0 ]; then
            record ok "SIGTERM ends it [$profile]" "in ${STOP_SECONDS} s (graceful timeout ${GRACEFUL} s), exit status $STOP_STATUS"
        else
            tail -n 10 "$log" >&2
            record FAIL "SIGTERM ends it [$profile]" "took ${STOP_SECONDS} s (graceful timeout ${GRACEFUL} s), exit status $STOP_STATUS"
        fi
    fi
}

run_case() { # run_case NAME PROFILE PROJECT LINE EXPECTED: a one-shot command and its stdout
    local name=$1 profile=$2 dir out status=0
    dir=$(project "$3")
    say "$name [$profile seccomp]: \$ $4"
    CONTAINERS_CONF=$(conf_for "$profile")
    export CONTAINERS_CONF
    out=$(cd "$dir" && timeout 300 bash -c "docker() { podman \"\$@\"; }; $4" 2>"$WORK/run.err") || status=$?
    if [ "$status" = 0 ] && [[ "$out" == *"$5"* ]]; then
        record ok "$name [$profile]" "stdout: ${out:0:80}"
    else
        tail -n 20 "$WORK/run.err" >&2
        record FAIL "$name [$profile]" "exit status $status, stdout: ${out:0:200}"
    fi
}

IRIS='"class_label":"iris-setosa"'

PROJECT_IMAGE=localhost/localserve-ci-project:iris
build_project_image() { # build_project_image DIR LOG: $PROJECT_IMAGE from DIR, as the docs' steps 1 and 2 build it
    local dir=$1 log=$2
    (cd "$dir" && docker run --rm -v "$PWD":/mnt/project "$IMAGE" export dockerignore >.dockerignore)
    python3 - "$dir/Dockerfile" <<'PY'
import re, sys
text = "\n".join(open(p, encoding="utf-8").read() for p in ("docs/tutorials/docker-gpu.md", "docs/tutorials/kubernetes-kserve.md", "docs/reference/deployment.md"))
body = re.search(r"cat > Dockerfile <<'DOCKERFILE'\n(.*?)\nDOCKERFILE\n", text, re.S).group(1)
open(sys.argv[1], "w").write(re.sub(r"^FROM localserve$", "FROM localserve:cpu", body, flags=re.M) + "\n")
PY
    if ! (cd "$dir" && podman build -q -t "$PROJECT_IMAGE" .) >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        return 1
    fi
}

# The README's "Try the manifests with podman": `podman kube play` of what `export kubernetes` writes
# for the project image starts the Deployment's pod (its ConfigMap mounted, the image's user, the
# read-only root and the emptyDirs as podman applies them) and the pod answers on 8888 at its own
# address (the manifests publish no port); every line it logs is JSON; `podman kube down` ends it.
kube_play_case() {
    local name="podman kube play of export kubernetes (README): the pod answers on 8888" dir log line answer
    local id="" lines bad deadline IP
    dir=$(project iris_onnx)
    log=$WORK/kube-play.log
    say "$name [docker seccomp]"
    CONTAINERS_CONF=$(conf_for docker)
    export CONTAINERS_CONF
    if ! build_project_image "$dir" "$log"; then
        record FAIL "$name" "the project image did not build (log above)"
        return 0
    fi
    # The README's lines; `localserve export` is the image's (this machine's Python need not have localserve).
    line=$(readme_line '^localserve export kubernetes --image registry.example/iris:1 --name iris > k8s.yaml$')
    line="docker run --rm -v \"\$PWD\":/mnt/project $IMAGE ${line#localserve }"
    line=${line/registry.example\/iris:1/$PROJECT_IMAGE}
    say "\$ $line"
    (cd "$dir" && eval "$line") 2>>"$log" || {
        tail -n 20 "$log" >&2
        record FAIL "$name" "export kubernetes failed (log above)"
        return 0
    }
    KUBE_DOWN=$(readme_line '^podman kube down k8s.yaml')
    KUBE_DIR=$dir
    for line in "$(readme_line '^podman kube play k8s.yaml$')" "$(readme_line '^podman pod ps --filter label=')"; do
        say "\$ $line"
        if ! (cd "$dir" && eval "$line") >>"$log" 2>&1; then
            tail -n 20 "$log" >&2
            record FAIL "$name" "\`$line\` failed (log above)"
            kube_down
            return 0
        fi
    done
    line=$(readme_line '^IP=\$\(podman inspect ')
    say "\$ $line"
    IP=$(cd "$dir" && eval "$line" && printf '%s' "$IP") 2>>"$log" || IP=""
    id=$(podman ps -q --filter label=localserve.dev/api=iris | head -n 1)
    deadline=$((SECONDS + 180))
    until [ -n "$IP" ] && curl -sf -o /dev/null "http://$IP:8888/readyz"; do
        if [ "$SECONDS" -ge "$deadline" ] || [ "$(podman inspect --format '{{.State.Running}}' "$id" 2>&1)" != true ]; then
            podman logs "$id" 2>&1 | tail -n 30 >&2
            record FAIL "$name" "the pod (container ${id:0:12}, address '$IP') was not ready on 8888 within 180 s"
            kube_down
            return 0
        fi
        sleep 0.5
    done
    line=$(readme_line '^curl -s http://\$IP:8888/predict ')
    say "\$ $line"
    answer=$(cd "$dir" && eval "$line" 2>&1) || true
    if [[ "$answer" == *"$IRIS"* ]]; then
        record ok "$name" "at $IP: ${answer:0:60}"
    else
        record FAIL "$name" "answer: ${answer:0:300}"
    fi
    # Its log is JSON, line by line (a library's stray line, e.g. ONNX Runtime's, would break a log shipper).
    lines=$(podman logs "$id" 2>&1)
    bad=$(python3 -c 'import json, sys
for line in sys.stdin:
    try:
        json.loads(line)
    except ValueError:
        print(repr(line[:200]))' <<<"$lines")
    if [ -z "$bad" ]; then
        record ok "podman kube play: the pod's log is JSON" "$(wc -l <<<"$lines") lines"
    else
        record FAIL "podman kube play: the pod's log is JSON" "not JSON: $bad"
    fi
    kube_down || record FAIL "$name: $KUBE_DOWN" "failed (log: $log)"
}
kube_down() { # the README's `podman kube down` line, in the case's folder
    local status=0
    say "\$ $KUBE_DOWN"
    (cd "$KUBE_DIR" && eval "$KUBE_DOWN") >>"$WORK/kube-play.log" 2>&1 || status=$?
    KUBE_DIR=""
    podman rmi -f "$PROJECT_IMAGE" >/dev/null 2>&1 || true
    return "$status"
}
finish() { # the summary, and the exit status: 1 when a case failed
    local built="$IMAGE built in ${BUILD_SECONDS} s"
    if [ -n "${LEAN_SECONDS:-}" ]; then built+=", $LEAN in ${LEAN_SECONDS} s"; fi
    say "summary ($built)"
    printf '%s\n' "${SUMMARY[@]}"
    if [ "$FAILED" -ne 0 ]; then
        echo "image.sh: $FAILED case(s) failed in $((SECONDS - START)) s" >&2
        exit 1
    fi
    echo "image.sh: every case passed in $((SECONDS - START)) s"
    exit 0
}

if [ "${1:-}" = kube ]; then
    kube_play_case
    finish
fi

# The built image's OCI labels (the title and version pyproject.toml gives) and its HEALTHCHECK kept.
label() { podman image inspect --format "{{index .Config.Labels \"org.opencontainers.image.$2\"}}" "$1"; }
VERSION=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
for image in "$IMAGE" "$LEAN"; do
    seen="$(label "$image" title) $(label "$image" version), healthcheck: $(podman image inspect --format '{{if .Config.Healthcheck}}yes{{end}}' "$image")"
    if [ "$seen" = "localserve $VERSION, healthcheck: yes" ]; then record ok "OCI labels, HEALTHCHECK in $image" "$seen"; else record FAIL "OCI labels, HEALTHCHECK in $image" "$seen"; fi
done

SERVE=$(for_cpu "$(readme_line '^docker run --rm --gpus all -p 8888:8888 -v "\$PWD":/mnt/project localserve$')")
RUN_INPUT=$(for_cpu "$(readme_line '^docker run --rm -v "\$PWD":/mnt/project localserve run --input sample.json$')")
CURL=$(for_cpu "$(readme_curl)")
for profile in docker podman; do
    serve_case "Cortex iris_onnx: serve, README curl" "$profile" iris_onnx "$SERVE" "$CURL" "$IRIS" health,sigterm
    run_case "Cortex iris_onnx: run --input sample.json" "$profile" iris_onnx "$RUN_INPUT" "$IRIS"
done
serve_case "Cortex iris_onnx: gRPC on 8081 (README), ModelReady with curl" docker iris_onnx \
    "$(for_cpu "$(readme_line '^docker run --rm --gpus all -p 8888:8888 -p 8081:8081 -v "\$PWD":/mnt/project localserve$')")" \
    "$GRPC_READY" "00 00 00 00 02 08 01"
serve_case "Cortex iris_onnx: read-only mount (:ro)" docker iris_onnx \
    "$(for_cpu "$(readme_line '^docker run --rm -p 8888:8888 -v "\$PWD":/mnt/project:ro localserve:cpu$')")" "$CURL" "$IRIS"
# An ABEJA project: no config file; the arguments after the image name replace the CMD, so the
# address to listen on comes from the image's environment (LOCALSERVE_HOST), not from the CMD.
ABEJA_PREDICT="curl -s http://localhost:$PORT/ -H 'Content-Type: application/json' -d @request.json"
serve_case "ABEJA json_tax: serve --handler main:handler" docker json_tax \
    "$(for_cpu "$(readme_line '^docker run --rm -p 8888:8888 -v "\$PWD":/mnt/project localserve serve --handler main:handler$')")" \
    "$ABEJA_PREDICT" '"total":108.0' sigterm
# The port moved through the environment: the server and the HEALTHCHECK follow LOCALSERVE_PORT.
serve_case "ABEJA json_tax: -e LOCALSERVE_PORT=9000 -p $PORT:9000" docker json_tax \
    "docker run --rm -e LOCALSERVE_PORT=9000 -p $PORT:9000 -v \"\$PWD\":/mnt/project $IMAGE serve --handler main:handler" \
    "$ABEJA_PREDICT" '"total":108.0' health
run_case "Cortex iris_onnx on $LEAN: run --input sample.json" docker iris_onnx \
    "docker run --rm -v \"\$PWD\":/mnt/project $LEAN run --input sample.json" "$IRIS"
run_case "ABEJA json_tax: run --input request.json" docker json_tax \
    "$(for_cpu 'docker run --rm -v "$PWD":/mnt/project localserve run --handler main:handler --input request.json')" '"total":108.0'

# What Cortex gave user code, in the container with no namespaces (Docker's seccomp profile): the
# config read from /mnt/project, the packaged view as the working directory (.cortexignore'd files
# absent), and another API of the project called at http://api-<name>:8888.
platform_project() { # platform_project DIR: two APIs, `caller` calling `words`, and an ignored file
    mkdir -p "$1"
    printf '{"k": 1}\n' >"$1/config.json"
    printf 'not packaged\n' >"$1/secret.txt"
    printf 'secret.txt\n' >"$1/.cortexignore"
    printf '{"text": "hi"}\n' >"$1/payload.json"
    cat >"$1/cortex.yaml" <<'YAML'
- {kind: RealtimeAPI, name: words, predictor: {type: python, path: words.py}}
- {kind: RealtimeAPI, name: caller, predictor: {type: python, path: caller.py}}
YAML
    cat >"$1/words.py" <<'PY'
class PythonPredictor:
    def __init__(self, config):
        pass

    def predict(self, payload):
        return {"upper": payload["text"].upper()}
PY
    cat >"$1/caller.py" <<'PY'
import json, os, urllib.request


class PythonPredictor:
    def __init__(self, config):
        with open("/mnt/project/config.json") as file:
            self.k = json.load(file)["k"]

    def predict(self, payload):
        request = urllib.request.Request(
            "http://api-words:8888/predict", data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as answer:
            words = json.load(answer)
        packaged = os.path.exists("config.json") and not os.path.exists("secret.txt")
        return {"k": self.k, "words": words, "packaged": packaged}
PY
}
platform_project "$WORK/platform"
run_case "Cortex: /mnt/project, the packaged view, api-<name>" docker "$WORK/platform" \
    "docker run --rm -v \"\$PWD\":/mnt/project $IMAGE run --api caller --input payload.json" \
    '{"k":1,"words":{"upper":"HI"},"packaged":true}'

# A project image as the Kubernetes tutorial builds it, run the way the exported
# Deployment runs it: its args, the config file where the ConfigMap goes, and the pod's
# "restricted" settings (uid 10001, read-only root with writable /tmp and cache, no capabilities,
# no privilege escalation).
project_image_case() {
    local name="Project image (README, FROM localserve) as the exported Deployment runs it" dir log line
    local project_image=$PROJECT_IMAGE args
    dir=$(project iris_onnx)
    log=$WORK/project-image.log
    say "$name [docker seccomp]"
    CONTAINERS_CONF=$(conf_for docker)
    export CONTAINERS_CONF
    if ! build_project_image "$dir" "$log"; then
        record FAIL "$name" "the project image did not build (log above)"
        return 0
    fi
    # The Deployment's container args, read by the image's own Python (PyYAML is in it).
    args=$(cd "$dir" && docker run --rm -v "$PWD":/mnt/project "$IMAGE" export kubernetes --image "$project_image" |
        podman run --rm -i --entrypoint python "$IMAGE" -c '
import shlex, sys, yaml
(deployment,) = [d for d in yaml.safe_load_all(sys.stdin) if d["kind"] == "Deployment"]
print(shlex.join(deployment["spec"]["template"]["spec"]["containers"][0]["args"]))')
    line="docker run --rm --read-only --tmpfs /tmp --tmpfs /var/cache/localserve --user 10001:10001"
    line+=" --cap-drop ALL --security-opt no-new-privileges -v \"\$PWD/cortex.yaml\":/etc/localserve/cortex.yaml:ro"
    line+=" -p $PORT:8888 $project_image $args"
    say "\$ $line"
    if ! ANCESTOR=${project_image#localhost/} start_server "$dir" "$log" "$line" || ! wait_ready; then
        tail -n 30 "$log" >&2
        record FAIL "$name" "not ready on port $PORT (log above)"
        [ -n "$SERVER_ID" ] && podman rm -f "$SERVER_ID" >/dev/null 2>&1
        wait "$SERVER_PID" 2>/dev/null || true
        return 0
    fi
    local answer
    answer=$(curl -s "http://localhost:$PORT/predict" -H 'Content-Type: application/json' -d @"$dir/sample.json" 2>&1) || true
    if [[ "$answer" == *"$IRIS"* ]]; then
        record ok "$name" "answer: ${answer:0:60}"
    else
        record FAIL "$name" "answer: ${answer:0:300}"
    fi
    stop_server
    [ "$STOP_STATUS" = 0 ] || record FAIL "$name: SIGTERM" "exit status $STOP_STATUS"
    podman rmi -f "$project_image" >/dev/null 2>&1 || true
}
project_image_case

kube_play_case

# The GPU variant last (README's `docker build -t localserve .`), run here without a GPU: cold about
# 15 min on the 2-core machine (4 GB of CUDA, cuDNN, TensorRT and TensorFlow wheels), about 3 min when
# pyproject.toml changed with pip's cache warm, seconds for a code change; the image takes about 7.4 GB
# of disk and its build more (LOCALSERVE_IMAGE_GPU=0 skips it; .ci/run does, as its disk ran out once).
if [ "${LOCALSERVE_IMAGE_GPU-1}" = 0 ]; then
    SUMMARY+=("$(printf '%-4s %-58s %s' skip "GPU image (localserve)" "LOCALSERVE_IMAGE_GPU=0")")
elif (gpu_image); then
    record ok "GPU image (localserve): built, iris answered on the CPU" "--allow-cpu-fallback, $(podman image inspect --format '{{.Size}}' localserve | awk '{printf "%.2f GB", $1 / 1e9}')"
else
    record FAIL "GPU image (localserve)" "did not build or did not answer (see above)"
fi

finish
