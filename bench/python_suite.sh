#!/usr/bin/env bash
# The Python package's training speed (GPU): a PyG-style loop with spgnn.nn layers, eager and
# compiled, against PyG at its best and `spgnn train`, on two Reddit-sized graphs (the real
# Reddit is not in ../shared/data; n = 232,965 like Reddit, uniform random):
#   sym  er --n 232965 --avg-degree 246 --seed 1 --symmetrize   (~114.5M edges)
#   dir  er --n 232965 --avg-degree 489 --seed 1                (~113.8M edges, directed)
#   SPGNN=build/spgnn  PYTHONPATH=build/python  GRAPHS="sym dir"  EPOCHS=20
#   MODELS=gcn,gin,sage,gat  SKIP_PYG=1  SKIP_COMPILE=1  SKIP_GRAPH=1  OUT_JSON_DIR=dir for JSON
#   (SKIP_GRAPH: no spgnn.nn step captured in a CUDA graph and replayed)
#   SPLIT=mask|index   training nodes as a boolean mask (default) or an index tensor
#   MASK_COST=1        then bench/mask_cost.py on each graph (MODELS' first model): what the
#                      mask costs a step with spgnn.nn and with PyG, interleaved in one run
#   COMPILE_COST=1     then bench/compile_cost.py on each graph (MODELS): eager against compiled
#                      spgnn.nn, both splits, interleaved in one run
#   SKIP_SUITE=1       only the extra runs above (generates the graphs when missing)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SPGNN="${SPGNN:-$ROOT/build/spgnn}"
export PYTHONPATH="${PYTHONPATH:-$ROOT/build/python}"
WORK="${WORK:-/tmp/spgnn-python-suite}"
mkdir -p "$WORK"
extra=()
[ "${SKIP_PYG:-0}" = 1 ] && extra+=(--skip-pyg)
[ "${SKIP_COMPILE:-0}" = 1 ] && extra+=(--skip-compile)
[ "${SKIP_GRAPH:-0}" = 1 ] && extra+=(--skip-graph)
for g in ${GRAPHS:-sym dir}; do
  case "$g" in
    sym) gen=(--avg-degree 246 --symmetrize) ;;
    dir) gen=(--avg-degree 489) ;;
    *) echo "unknown graph '$g' (sym, dir)" >&2; exit 2 ;;
  esac
  f="$WORK/reddit-$g"
  if [ ! -f "$f.spg" ]; then
    "$SPGNN" generate er --n 232965 "${gen[@]}" --seed 1 -o "$f.spg" >&2
    "$SPGNN" convert "$f.spg" "$f.npy" >&2
  fi
  json=()
  [ -n "${OUT_JSON_DIR:-}" ] && json=(--json "$OUT_JSON_DIR/python-suite-$g-${SPLIT:-mask}.json")
  if [ "${SKIP_SUITE:-0}" != 1 ]; then
    python3 "$ROOT/bench/python_vs_pyg.py" --spgnn "$SPGNN" --graph "$f.npy" --graph-spg "$f.spg" \
      --name "reddit-$g" --epochs "${EPOCHS:-20}" --models "${MODELS:-gcn,gin,sage,gat}" \
      --split "${SPLIT:-mask}" \
      "${extra[@]}" "${json[@]}"
  fi
  if [ "${MASK_COST:-0}" = 1 ]; then
    first="${MODELS:-gcn}"
    python3 "$ROOT/bench/mask_cost.py" --graph "$f.npy" --models "${first%%,*}" \
      --steps "${EPOCHS:-20}"
  fi
  if [ "${COMPILE_COST:-0}" = 1 ]; then
    python3 "$ROOT/bench/compile_cost.py" --graph "$f.npy" --models "${MODELS:-gcn,gin,sage,gat}" \
      --steps "${EPOCHS:-20}"
  fi
done
