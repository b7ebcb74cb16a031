#!/usr/bin/env bash
# GPU benchmarks beyond the SpMM/SDDMM suite, in one run: MaxK (maxk + CBSR SpGEMM/SSpMM vs
# cuSPARSE SpMM at F = 256), GAT aggregation fused vs unfused, and training on the GPU: test
# accuracy over 5 seeds with the issue's settings (GCN Cora and CiteSeer, GAT Cora; each seed and
# the mean) and a SAGE run on the built-in dataset. Every kernel result is checked before timing.
#   SPGNN=build/spgnn  DATA_DIR=../shared/data (or .data)  GRAPHS_DIR=/tmp/spgnn-graphs
#   SKIP_BENCH=1 (accuracy runs only)  SEEDS="1 2 3 4 5"  DEVICE=cuda (cpu: try the script on the host)
set -uo pipefail
source "$(dirname "$0")/common.sh"
DEVICE="${DEVICE:-cuda}"
SEEDS="${SEEDS:-1 2 3 4 5}"
status=0

if [ "${SKIP_BENCH:-0}" != 1 ]; then
  REDDIT=$(suite_graph reddit) || status=1
  KRON21=$(suite_graph kron21) || status=1
  echo "== maxk"
  "$SPGNN" bench maxk -g "$REDDIT" --name reddit -g "$KRON21" --name kron21 \
    --reps 20 --warmup 5 || status=1
  echo "== gat (fused vs unfused, F = 32 per head)"
  "$SPGNN" bench gat -g "$KRON21" --name kron21 -g "$REDDIT" --name reddit \
    -g "$DATA_DIR/cora" --name cora -g "$DATA_DIR/pubmed-graph" --name pubmed --dim 32 --heads 1,4 \
    --reps 20 --warmup 5 || status=1
  echo "== gat as training runs it (attention dropout 0.5, the suite's widths)"
  "$SPGNN" bench gat -g "$REDDIT" --name reddit --dim 8,16 --heads 1,8 --dtype f32,bf16 \
    --attn-dropout 0.5 --reps 20 --warmup 5 || status=1
fi

# Test accuracy at the best validation epoch for each seed, then their mean and the issue's bar.
#   accuracy LABEL TARGET_PERCENT spgnn-train-arguments...
accuracy() {
  local label=$1 target=$2
  shift 2
  local accs="" seed out acc
  for seed in $SEEDS; do
    out=$("$SPGNN" train "$@" --seed "$seed" --device "$DEVICE" --format json 2>/dev/null)
    acc=$(printf '%s\n' "$out" | sed -n 's/^ *"test_acc": *\([0-9.eE+-]*\),*$/\1/p')
    if [ -z "$acc" ]; then
      echo "$label seed $seed: FAILED"
      status=1
      continue
    fi
    printf '%s seed %s: test accuracy %.2f%%  (%.3f ms/epoch)\n' "$label" "$seed" \
      "$(awk -v a="$acc" 'BEGIN { print 100 * a }')" \
      "$(printf '%s\n' "$out" | sed -n 's/^ *"ms_per_epoch": *\([0-9.eE+-]*\),*$/\1/p')"
    accs="$accs $acc"
  done
  [ -n "$accs" ] || return
  awk -v label="$label" -v target="$target" -v accs="$accs" 'BEGIN {
    n = split(accs, a, " "); s = 0
    for (i = 1; i <= n; ++i) s += a[i]
    m = 100 * s / n
    verdict = (m >= target) ? "met" : "MISSED"
    printf "%s: mean test accuracy %.2f%% over %d seeds (target >= %.1f%%: %s)\n", label, m, n, target, verdict
  }'
}

# A dataset folder with features: DATA_DIR/NAME, else ../shared/data/NAME, else .data/NAME (the
# copy carried to the GPU machine; x.npy may be gzip/zstd-compressed there).
dataset() {
  local d z
  for d in "$DATA_DIR/$1" "$ROOT/../shared/data/$1" "$ROOT/.data/$1"; do
    for z in "" .gz .zst; do
      [ -f "$d/x.npy$z" ] && { echo "$d"; return; }
    done
  done
}

echo "== training on the $DEVICE: test accuracy over seeds ($SEEDS), the issue's settings"
CORA=$(dataset cora)
CITESEER=$(dataset citeseer)
if [ -n "$CORA" ]; then
  accuracy "GCN Cora" 80.5 --model gcn --dataset "$CORA" --layers 2 --hidden 16 \
    --dropout 0.5 --lr 0.01 --weight-decay 5e-4 --epochs 200
else
  echo "SKIPPED GCN/GAT Cora: no cora/x.npy under $DATA_DIR, ../shared/data or .data"
fi
if [ -n "$CITESEER" ]; then
  accuracy "GCN CiteSeer" 69.5 --model gcn --dataset "$CITESEER" --layers 2 --hidden 16 \
    --dropout 0.5 --lr 0.01 --weight-decay 5e-4 --epochs 200
else
  echo "SKIPPED GCN CiteSeer: no citeseer/x.npy under $DATA_DIR, ../shared/data or .data"
fi
if [ -n "$CORA" ]; then
  accuracy "GAT Cora" 81.5 --model gat --dataset "$CORA" --layers 2 --hidden 8 --heads 8 \
    --dropout 0.6 --lr 0.005 --weight-decay 5e-4 --epochs 200
fi
"$SPGNN" train --model sage --dataset builtin --device "$DEVICE" --epochs 100 || status=1
exit $status
