#!/usr/bin/env bash
# GPU benchmarks beyond the SpMM/SDDMM suite, in one run: MaxK (maxk + CBSR SpGEMM/SSpMM vs
# cuSPARSE SpMM at F = 256), GAT aggregation fused vs unfused, and training on the GPU (Cora
# accuracy and ms/epoch; the built-in dataset). Every kernel result is checked before timing.
#   SPGNN=build/spgnn  DATA_DIR=../shared/data (or .data)  GRAPHS_DIR=/tmp/spgnn-graphs
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SPGNN="${SPGNN:-$ROOT/build/spgnn}"
DATA_DIR="${DATA_DIR:-$ROOT/../shared/data}"
[ -d "$DATA_DIR" ] || DATA_DIR="$ROOT/.data"
GRAPHS_DIR="${GRAPHS_DIR:-/tmp/spgnn-graphs}"
mkdir -p "$GRAPHS_DIR"
status=0
[ -f "$GRAPHS_DIR/reddit.spg" ] || "$SPGNN" generate er --n 232965 --avg-degree 489 --seed 1 -o "$GRAPHS_DIR/reddit.spg" || status=1
[ -f "$GRAPHS_DIR/kron21.spg" ] || "$SPGNN" generate rmat --scale 21 --edge-factor 16 --seed 1 -o "$GRAPHS_DIR/kron21.spg" || status=1

echo "== maxk"
"$SPGNN" bench maxk -g "$GRAPHS_DIR/reddit.spg" --name reddit -g "$GRAPHS_DIR/kron21.spg" --name kron21 \
  --reps 20 --warmup 5 || status=1
echo "== gat (fused vs unfused, F = 32 per head)"
"$SPGNN" bench gat -g "$GRAPHS_DIR/kron21.spg" --name kron21 -g "$GRAPHS_DIR/reddit.spg" --name reddit \
  -g "$DATA_DIR/cora" --name cora -g "$DATA_DIR/pubmed-graph" --name pubmed --dim 32 --heads 1,4 \
  --reps 20 --warmup 5 || status=1
echo "== training on the GPU"
if [ -f "$DATA_DIR/cora/x.npy" ]; then
  "$SPGNN" train --model gcn --dataset "$DATA_DIR/cora" --device cuda --eval-every 1 || status=1
  "$SPGNN" train --model gat --dataset "$DATA_DIR/cora" --hidden 8 --heads 8 --dropout 0.6 --lr 0.005 --device cuda || status=1
else
  echo "SKIPPED cora training: $DATA_DIR/cora/x.npy not found"
fi
"$SPGNN" train --model sage --dataset builtin --device cuda --epochs 100 || status=1
exit $status
