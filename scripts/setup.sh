#!/usr/bin/env bash
# Sourced by run.sh and test.sh: installs what is missing (Debian/Ubuntu packages via apt, a newer
# CMake via pip when the system one is too old, the Python test environment via pip), then
# configures and builds into $BUILD_DIR.
set -euo pipefail

SPGNN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$SPGNN_ROOT/build}"
BUILD_TYPE="${BUILD_TYPE:-Release}"
# The Python environment of the tests (torch, PyG, numpy, scipy, pytest, nanobind): one virtual
# environment, created on first use and reused (a fresh `pip install torch` downloads ~5 GB).
SPGNN_VENV="${SPGNN_VENV:-$BUILD_DIR/venv}"
# SPGNN_PY_REQS replaces the list, e.g. to test against the oldest torch the package supports
# (README, "Python"): its own SPGNN_VENV then, since a changed list reinstalls.
SPGNN_PY_REQS="${SPGNN_PY_REQS:-torch>=2.4 numpy scipy torch-geometric pytest pytest-xdist nanobind>=2.0}"

spgnn_install_deps() {
  local pkgs=(g++ make cmake libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev
              libzstd-dev zlib1g-dev libopenblas-dev libmetis-dev python3 python3-pip python3-venv
              python3-dev)
  local missing=()
  for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "spgnn: installing ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  # CMake >= 3.24 is required; Debian 12 has 3.25, older distributions get it from PyPI.
  local v
  v=$(cmake --version | head -1 | awk '{print $3}')
  if [ "$(printf '%s\n3.24\n' "$v" | sort -V | head -1)" != "3.24" ]; then
    echo "spgnn: cmake $v is too old, installing a newer one with pip" >&2
    python3 -m pip install --user -q "cmake>=3.24" || python3 -m pip install --user -q --break-system-packages "cmake>=3.24"
    export PATH="$HOME/.local/bin:$PATH"
  fi
}

# Creates (once) the test environment in $SPGNN_VENV; a stamp of the requirement list makes a
# changed list reinstall.
spgnn_python_env() {
  local stamp="$SPGNN_VENV/.spgnn-requirements"
  if [ -x "$SPGNN_VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$SPGNN_PY_REQS" ]; then
    return 0
  fi
  echo "spgnn: creating the Python test environment in $SPGNN_VENV (torch, torch-geometric, ...)" >&2
  # torch with its CUDA libraries takes ~6.2 GB installed, and pip holds the downloaded wheels
  # until the end: the disk's use peaked 8.7 GB above its start (measured 2026-11-28, torch
  # 2.15). Say so up front rather than let pip fail half-way with "No space left on device".
  local parent free_kb need_kb=$((9 * 1024 * 1024))
  parent="$(dirname "$SPGNN_VENV")"
  mkdir -p "$parent"
  free_kb=$(df -Pk "$parent" | awk 'NR == 2 {print $4}')
  if [ -n "$free_kb" ] && [ "$free_kb" -lt "$need_kb" ]; then
    echo "spgnn: the Python test environment needs about 9 GB free in $parent;" \
         "only $((free_kb / 1024)) MB are. Free some space, or set SPGNN_VENV to a folder" \
         "on a larger disk." >&2
    return 1
  fi
  python3 -m venv "$SPGNN_VENV"
  # --no-cache-dir: the environment is reused, so pip's wheel cache would only hold a second
  # copy of the same ~3 GB of wheels.
  # shellcheck disable=SC2086
  "$SPGNN_VENV/bin/python" -m pip install -q --no-cache-dir --disable-pip-version-check \
    $SPGNN_PY_REQS
  echo "$SPGNN_PY_REQS" > "$stamp"
}

# Configures and builds $BUILD_DIR (extra CMake arguments in SPGNN_CMAKE_ARGS, build arguments
# as "$@"). With the test environment present, the Python extension is built against it.
spgnn_build() {
  local dir="${SPGNN_BUILD_DIR_OVERRIDE:-$BUILD_DIR}"
  local extra=()
  # CI and the quick start build for one GPU generation to keep nvcc time down; set
  # CMAKE_CUDA_ARCHITECTURES to override (the library's own default is 80;90).
  extra+=("-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES:-90}")
  [ -x "$SPGNN_VENV/bin/python" ] && extra+=("-DPython_EXECUTABLE=$SPGNN_VENV/bin/python")
  # shellcheck disable=SC2086
  cmake -S "$SPGNN_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "${extra[@]}" \
        ${SPGNN_CMAKE_ARGS:-} >/dev/null
  cmake --build "$dir" -j "$(nproc)" "$@"
}
