#!/usr/bin/env bash
# The main job on the built-in default: generate a graph, describe it, benchmark SpMM and SDDMM
# on it (GPU when present, else CPU), each result checked against the float64 reference.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
spgnn_install_deps
spgnn_build --target spgnn_cli
SPGNN="$BUILD_DIR/spgnn"
OUT_DIR="${OUT_DIR:-$BUILD_DIR/run}"
mkdir -p "$OUT_DIR"
"$SPGNN" generate rmat --scale 16 --edge-factor 16 --seed 1 --symmetrize -o "$OUT_DIR/rmat16.spg"
"$SPGNN" info "$OUT_DIR/rmat16.spg"
"$SPGNN" bench spmm --graph "$OUT_DIR/rmat16.spg" --name rmat16 --dim 32,64 --strategy all
"$SPGNN" bench sddmm --graph "$OUT_DIR/rmat16.spg" --name rmat16 --dim 32,64 --strategy all
