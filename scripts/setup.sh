#!/usr/bin/env bash
# Sourced by run.sh and test.sh: installs what is missing (Debian/Ubuntu packages via apt, a newer
# CMake via pip when the system one is too old), then configures and builds into $BUILD_DIR.
set -euo pipefail

SPGNN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$SPGNN_ROOT/build}"
BUILD_TYPE="${BUILD_TYPE:-Release}"

spgnn_install_deps() {
  local pkgs=(g++ make cmake libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev
              libzstd-dev zlib1g-dev libopenblas-dev python3 python3-pip)
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

spgnn_build() {
  local extra=()
  # CI and the quick start build for one GPU generation to keep nvcc time down; set
  # CMAKE_CUDA_ARCHITECTURES to override (the library's own default is 80;90).
  extra+=("-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES:-90}")
  cmake -S "$SPGNN_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "${extra[@]}" \
        ${SPGNN_CMAKE_ARGS:-} >/dev/null
  cmake --build "$BUILD_DIR" -j "$(nproc)" "$@"
}
