#!/usr/bin/env bash
# Half precision (issue 12): SpMM (u_mul_e, sum) and SDDMM (dot) in float32, float16 and
# bfloat16 at F = 64, 128, 256 on the large suite (kron21, kron21sym, reddit, products;
# bench/common.sh) and the real graphs, `auto` against cuSPARSE in the same dtype, every result
# checked against the float64 oracle on its own rounded inputs. JSON per graph and kernel goes to
# $RESULTS; the summary (bench/summarize_dtype.py) prints bf16/fp16 over float32 and over
# cuSPARSE, with geo-means.
# Usage: bench/half_suite.sh [graph ...]   (suite names, specs or files; default: kron21
#        kron21sym reddit products cora citeseer pubmed)
set -uo pipefail
source "$(dirname "$0")/common.sh"
RESULTS="${RESULTS:-${OUT:-$ROOT/build}/bench-half}"
DIMS="${DIMS:-64,128,256}"
REPS="${REPS:-20}"
mkdir -p "$RESULTS"
graphs=("$@")
[ ${#graphs[@]} -gt 0 ] || graphs=(kron21 kron21sym reddit products cora citeseer pubmed)
status=0
for g in "${graphs[@]}"; do
  spec=$(suite_spec "$g")
  if ! file=$(suite_graph "$g"); then
    echo "SKIPPED $g: $spec not found"
    continue
  fi
  label=$(suite_label "$g")
  for k in spmm sddmm; do
    echo "== $k on $g ($spec), f32/f16/bf16"
    "$SPGNN" bench "$k" --graph "$file" --name "$label" --dim "$DIMS" --dtype all --reps "$REPS" \
      --format json > "$RESULTS/$k-$label.json" || status=1
  done
done
python3 "$ROOT/bench/summarize_dtype.py" "$RESULTS"/*.json || status=1
exit $status
