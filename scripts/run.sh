#!/usr/bin/env bash
# The main job on the built-in default: train a 2-layer GCN on the built-in planted-partition
# dataset (GPU when present, else CPU), then generate a graph, describe it and benchmark SpMM and
# SDDMM on it, each result checked against the float64 reference.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
spgnn_install_deps
spgnn_build --target spgnn_cli
SPGNN="$BUILD_DIR/spgnn"
OUT_DIR="${OUT_DIR:-$BUILD_DIR/run}"
mkdir -p "$OUT_DIR"
"$SPGNN" train --model gcn --dataset builtin --epochs 100 --save "$OUT_DIR/gcn-builtin.ckpt"
"$SPGNN" generate rmat --scale 16 --edge-factor 16 --seed 1 --symmetrize -o "$OUT_DIR/rmat16.spg"
"$SPGNN" info "$OUT_DIR/rmat16.spg"
"$SPGNN" bench spmm --graph "$OUT_DIR/rmat16.spg" --name rmat16 --dim 32,64 --strategy all
"$SPGNN" bench sddmm --graph "$OUT_DIR/rmat16.spg" --name rmat16 --dim 32,64 --strategy all
