#!/usr/bin/env bash
# Installs NVIDIA's perf_analyzer (Triton's load generator) into a cache folder and prints the path of
# a launcher that runs it: `$(scripts/perf_analyzer.sh) -m iris -u 127.0.0.1:8888 -i http`.
#
# Why not `pip install perf-analyzer`: its wheel is tagged manylinux_2_38, so pip on Debian 12 (glibc
# 2.36) picks a placeholder without the binary, and the binary needs glibc 2.38 and GLIBCXX_3.4.32.
# So: the real wheel is unpacked with `pip install --platform manylinux_2_38_x86_64 --target`, Debian
# 13's (trixie) libc6, libstdc++6 and libgcc-s1 are fetched with `apt-get download` under a private
# apt state and sources list (nothing is installed system-wide, no root needed) and unpacked beside it
# with `dpkg -x`, and the launcher starts the binary through trixie's own dynamic loader with those
# libraries first (libz, libssl and libcrypto still come from the system).
#
# Idempotent: a finished install (its launcher) is reused; a failed one leaves nothing behind.
# Exit 0 with the launcher's path on stdout; otherwise a message on stderr and exit 1.
# Settings: PERF_ANALYZER_VERSION (the wheel's version), PERF_ANALYZER_DIR (the cache folder,
# default ${XDG_CACHE_HOME:-~/.cache}/localserve-perf-analyzer), PYTHON (the pip to use).
set -euo pipefail

VERSION=${PERF_ANALYZER_VERSION:-2.60.0}
SUITE=trixie
MIRROR=http://deb.debian.org/debian
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
ROOT=${PERF_ANALYZER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/localserve-perf-analyzer}
PYTHON=${PYTHON:-python3}
DIR=$ROOT/$VERSION
LAUNCHER=$DIR/perf_analyzer

fail() {
    echo "perf_analyzer.sh: $*" >&2
    exit 1
}

if [ -x "$LAUNCHER" ]; then
    echo "$LAUNCHER"
    exit 0
fi
[ "$(uname -m)" = x86_64 ] || fail "perf_analyzer's wheel is built for x86_64 only; this machine is $(uname -m)"
command -v apt-get >/dev/null 2>&1 || fail "needs apt-get and dpkg (Debian or Ubuntu) to fetch Debian $SUITE's C libraries"
[ -r "$KEYRING" ] || fail "needs Debian's archive keyring at $KEYRING (package debian-archive-keyring) to check $SUITE's packages"

mkdir -p "$ROOT"
WORK=$(mktemp -d "$ROOT/.install.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# 1. The wheel itself, for the platform it is really built for (with a pip of a throwaway venv when
#    the interpreter has none, as Debian's python3 without python3-pip).
PIP=("$PYTHON" -m pip)
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
    "$PYTHON" -m venv "$WORK/venv" >&2 || fail "$PYTHON has no pip and cannot make a venv with one"
    PIP=("$WORK/venv/bin/python" -m pip)
fi
"${PIP[@]}" install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --no-compile --only-binary=:all: \
    --platform manylinux_2_38_x86_64 --target "$WORK/wheel" "perf-analyzer==$VERSION" >&2 ||
    fail "pip could not download perf-analyzer==$VERSION for manylinux_2_38_x86_64 (no network, or no such version)"
BINARY=$WORK/wheel/perf_analyzer/bin/perf_analyzer
[ -f "$BINARY" ] || fail "the perf-analyzer $VERSION wheel has no perf_analyzer/bin/perf_analyzer"

# 2. trixie's C and C++ runtime, with a private apt configuration: the system's sources, lists and
#    preferences are never read or written.
APT=$WORK/apt
mkdir -p "$APT/etc/sources.list.d" "$APT/etc/preferences.d" "$APT/etc/apt.conf.d" "$APT/lists/partial" \
    "$APT/archives/partial" "$WORK/debs"
echo "deb [signed-by=$KEYRING] $MIRROR $SUITE main" >"$APT/etc/sources.list"
: >"$APT/status"
APT_OPTIONS=(
    -o "Dir::Etc=$APT/etc"
    -o "Dir::Etc::Parts=$APT/etc/apt.conf.d"
    -o "Dir::State=$APT"
    -o "Dir::State::Lists=$APT/lists"
    -o "Dir::State::status=$APT/status"
    -o "Dir::Cache=$APT"
    -o "Dir::Cache::archives=$APT/archives"
    -o "APT::Architecture=amd64"
    -o "APT::Architectures=amd64"
    -o "APT::Sandbox::User=$(id -un)"
    -o "Debug::NoLocking=1"
)
apt-get "${APT_OPTIONS[@]}" -qq update >&2 || fail "apt-get could not read Debian $SUITE's package lists from $MIRROR (no network?)"
(cd "$WORK/debs" && apt-get "${APT_OPTIONS[@]}" -qq download libc6 libstdc++6 libgcc-s1 >&2) ||
    fail "apt-get could not download Debian $SUITE's libc6, libstdc++6 and libgcc-s1"
for deb in "$WORK"/debs/*.deb; do
    dpkg -x "$deb" "$WORK/root"
done
LOADER=$(find "$WORK/root" -name 'ld-linux-x86-64.so.2' -type f | head -n 1)
LIBS=$(dirname "$(find "$WORK/root" -name 'libstdc++.so.6' | head -n 1)")
[ -n "$LOADER" ] && [ -n "$LIBS" ] || fail "Debian $SUITE's packages hold no ld-linux-x86-64.so.2 or libstdc++.so.6"

# 3. The launcher: paths relative to itself, so the cache folder can move.
mkdir -p "$WORK/out"
mv "$WORK/wheel/perf_analyzer/bin/perf_analyzer" "$WORK/out/perf_analyzer.bin"
chmod +x "$WORK/out/perf_analyzer.bin"
mv "$WORK/root" "$WORK/out/root"
LOADER=${LOADER#"$WORK/"}
LIBS=${LIBS#"$WORK/"}
cat >"$WORK/out/perf_analyzer" <<EOF
#!/bin/sh
# perf_analyzer $VERSION through Debian $SUITE's loader and C libraries (made by localserve's scripts/perf_analyzer.sh).
HERE=\$(dirname "\$(readlink -f "\$0")")
exec "\$HERE/$LOADER" --library-path "\$HERE/$LIBS" "\$HERE/perf_analyzer.bin" "\$@"
EOF
chmod +x "$WORK/out/perf_analyzer"
"$WORK/out/perf_analyzer" --version >/dev/null 2>&1 || {
    "$WORK/out/perf_analyzer" --version 2>&1 | tail -n 5 >&2
    fail "the installed perf_analyzer does not start (above: what it said)"
}
rm -rf "$DIR"
mv "$WORK/out" "$DIR"
echo "$LAUNCHER"
