#!/usr/bin/env bash
# Training speed suite (GPU): a Reddit-shaped graph (n = 232,965, ~114M directed edges, uniform
# random, symmetrised; the real Reddit is not in ../shared/data) with synthetic features (602) and
# labels (41), the issue's five models, spgnn vs PyG in the same run (bench/train_vs_pyg.py).
#   SPGNN=build/spgnn  N=232965  AVG_DEGREE=246  EPOCHS=20  MODELS=gcn,gin,gat,sage,sage-maxk
#   SKIP_PYG=1 to time spgnn only; PROFILE=1 to add spgnn's phase profile of each model (separate
#   runs after the timed ones); DEVICE=cpu runs spgnn on the host (to try the script without a GPU).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SPGNN="${SPGNN:-$ROOT/build/spgnn}"
WORK="${WORK:-/tmp/spgnn-train-suite}"
N="${N:-232965}"
AVG_DEGREE="${AVG_DEGREE:-246}"
mkdir -p "$WORK"
G="$WORK/reddit-shaped-$N-$AVG_DEGREE"
if [ ! -f "$G.spg" ]; then
  "$SPGNN" generate er --n "$N" --avg-degree "$AVG_DEGREE" --seed 1 --symmetrize -o "$G.spg"
  "$SPGNN" convert "$G.spg" "$G.npy"
fi
"$SPGNN" info "$G.spg" | head -5
extra=(); [ "${SKIP_PYG:-0}" = 1 ] && extra=(--skip-pyg)
[ "${PROFILE:-0}" = 1 ] && extra+=(--profile)
python3 "$ROOT/bench/train_vs_pyg.py" --spgnn "$SPGNN" --graph "$G.npy" --graph-spg "$G.spg" \
  --epochs "${EPOCHS:-20}" --models "${MODELS:-gcn,gin,gat,sage,sage-maxk}" \
  --device "${DEVICE:-cuda}" "${extra[@]}"
