#!/usr/bin/env bash
# The GPU benchmark suite of issue 3: SpMM (u_mul_e, sum) and SDDMM (dot) at F = 16..256 on
#   kron21   Kronecker/R-MAT scale 21, edge factor 16 (Graph500 a=.57 b=c=.19)
#   reddit   uniform random graph shaped like Reddit: 232,965 vertices, ~114M edges
#   products R-MAT shaped like ogbn-products: 2^21 vertices, ~124M raw edges (edge factor 59)
#   cora, citeseer, pubmed, amazon, coauthor, notredame  (the real graphs of $DATA_DIR:
#            ../shared/data; skipped with a note when absent; notredame is directed)
# Each case is checked against cpu_ref on sampled rows, then timed (median of REPS CUDA-event
# timings after warm-up) for the strategies in $STRATEGIES and cuSPARSE (best algorithm), in one
# process. JSON per graph goes to $RESULTS; a summary table is printed last.
# Usage: bench/gpu_suite.sh [graph ...]   (default: all)
set -uo pipefail
source "$(dirname "$0")/common.sh"
# Under the device tool ($OUT set) the JSON files travel as one archive ($OUT/bench-json.tgz):
# only a few files come back from $OUT.
RESULTS="${RESULTS:-${OUT:+$(mktemp -d)}}"
RESULTS="${RESULTS:-$ROOT/build/bench}"
DIMS="${DIMS:-16,32,64,128,256}"
REPS="${REPS:-20}"
STRATEGIES="${STRATEGIES:-auto,gnnone}"  # auto: what users get (the summary checks it)
mkdir -p "$RESULTS"
graphs=("$@")
[ ${#graphs[@]} -gt 0 ] || graphs=(kron21 reddit products cora citeseer pubmed amazon coauthor notredame)

status=0
for g in "${graphs[@]}"; do
  spec=$(suite_spec "$g")
  if ! file=$(suite_graph "$g"); then
    case "$spec" in
      rmat:*|er:*) echo "FAILED $g: could not generate $spec"; status=1 ;;
      *) echo "SKIPPED $g: $spec not found" ;;
    esac
    continue
  fi
  strat_args=()
  IFS=, read -ra ss <<<"$STRATEGIES"
  for s in "${ss[@]}"; do strat_args+=(--strategy "$s"); done
  label=$(suite_label "$g")
  for k in spmm sddmm; do
    echo "== $k on $g ($spec)"
    "$SPGNN" bench "$k" --graph "$file" --name "$label" --dim "$DIMS" "${strat_args[@]}" \
      --reps "$REPS" --format json > "$RESULTS/$k-$label.json" || status=1
  done
done
python3 "$ROOT/bench/summarize.py" "$RESULTS"/*.json || status=1
[ -n "${OUT:-}" ] && tar czf "$OUT/bench-json.tgz" -C "$RESULTS" . && echo "JSON: $OUT/bench-json.tgz"
exit $status
