#!/usr/bin/env bash
# Training speed suite (GPU): two Reddit-shaped graphs (n = 232,965, uniform random; the real
# Reddit is not in ../shared/data), one symmetric and one directed of about the same edge count,
# each trained as given:
#   sym  er --avg-degree $AVG_DEGREE (246) --symmetrize   (~114.5M edges)
#   dir  er --avg-degree $DIR_AVG_DEGREE (489)            (~113.8M edges)
# with synthetic features (602) and labels (41), the issue's five models, spgnn vs PyG in the same
# run (bench/train_vs_pyg.py).
#   SPGNN=build/spgnn  GRAPHS="sym dir"  N=232965  EPOCHS=20  MODELS=gcn,gin,gat,sage,sage-maxk
#   DTYPES=bf16,f16,bf16+notf32,f32+tf32 also times spgnn in those precisions (ratio to its f32 run);
#   SKIP_PYG=1 to time spgnn only; PROFILE=1 to add spgnn's phase profile of each model (separate
#   runs after the timed ones); DEVICE=cpu runs spgnn on the host (to try the script without a GPU).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SPGNN="${SPGNN:-$ROOT/build/spgnn}"
WORK="${WORK:-/tmp/spgnn-train-suite}"
N="${N:-232965}"
mkdir -p "$WORK"
extra=(); [ "${SKIP_PYG:-0}" = 1 ] && extra=(--skip-pyg)
[ "${PROFILE:-0}" = 1 ] && extra+=(--profile)
[ -n "${DTYPES:-}" ] && extra+=(--dtypes "$DTYPES")
for g in ${GRAPHS:-sym dir}; do
  case "$g" in
    sym) deg="${AVG_DEGREE:-246}"; gen=(--avg-degree "$deg" --symmetrize) ;;
    dir) deg="${DIR_AVG_DEGREE:-489}"; gen=(--avg-degree "$deg") ;;
    *) echo "unknown graph '$g' (sym, dir)" >&2; exit 2 ;;
  esac
  G="$WORK/reddit-shaped-$g-$N-$deg"
  if [ ! -f "$G.spg" ]; then
    "$SPGNN" generate er --n "$N" "${gen[@]}" --seed 1 -o "$G.spg"
    "$SPGNN" convert "$G.spg" "$G.npy"
  fi
  echo "== $g"
  "$SPGNN" info "$G.spg" | head -5
  python3 "$ROOT/bench/train_vs_pyg.py" --spgnn "$SPGNN" --graph "$G.npy" --graph-spg "$G.spg" \
    --epochs "${EPOCHS:-20}" --models "${MODELS:-gcn,gin,gat,sage,sage-maxk}" \
    --device "${DEVICE:-cuda}" "${extra[@]}"
done
