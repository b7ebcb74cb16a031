#!/usr/bin/env bash
# Hardware counters of the SpMM/SDDMM kernels next to cuSPARSE's, for the cases where gnnone
# misses its target (docs/GPU_NOTES.md, "Profile"). Each case runs `spgnn bench` once (no
# warm-up, one timed run, no reference check) under Nsight Compute with the clocks left alone
# (--clock-control none, as the device notes ask), collecting a few metrics per kernel; then
# bench/ncu_summary.py prints one table.
#   SPGNN=build/spgnn  OUT_DIR=${OUT:-build}/ncu  GRAPHS_DIR=/tmp/spgnn-graphs  CASES="..."
#   DTYPE=f32 (or f16, bf16: the operands' dtype)
# A case is kernel:graph:F[:strategy] with graph a suite name of bench/common.sh (or a path/spec).
set -uo pipefail
source "$(dirname "$0")/common.sh"
OUT_DIR="${OUT_DIR:-${OUT:-$ROOT/build}/ncu}"
NCU="${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}"
CASES="${CASES:-sddmm:reddit:32 spmm:reddit:32 sddmm:kron21:32 spmm:kron21:32 spmm:citeseer:16 sddmm:citeseer:128 spmm:reddit:128:warp_vertex spmm:kron21:32:warp_vertex spmm:kron21:32:mergepath sddmm:reddit:32:shuffle}"
mkdir -p "$OUT_DIR"

wanted=(gpu__time_duration.sum
  dram__throughput.avg.pct_of_peak_sustained_elapsed
  lts__throughput.avg.pct_of_peak_sustained_elapsed
  l1tex__throughput.avg.pct_of_peak_sustained_active
  sm__throughput.avg.pct_of_peak_sustained_elapsed
  lts__t_sector_hit_rate.pct
  l1tex__t_sector_hit_rate.pct
  sm__warps_active.avg.pct_of_peak_sustained_active
  launch__registers_per_thread
  launch__grid_size
  sm__cycles_active.avg
  sm__cycles_active.max
  dram__bytes_read.sum
  lts__t_bytes.sum
  smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio
  smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio
  smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio)
# Keep only the metrics this ncu knows (an unknown name would fail the whole run).
"$NCU" --query-metrics > "$OUT_DIR/known.txt" 2>&1 || true
metrics=()
for m in "${wanted[@]}"; do
  base=${m%%.*}
  if grep -q "^$base\b" "$OUT_DIR/known.txt"; then metrics+=("$m"); else echo "ncu: no metric $base (skipped)"; fi
done
mlist=$(IFS=,; echo "${metrics[*]}")

status=0
for c in $CASES; do
  IFS=: read -r kernel g F strat <<<"$c"
  strat=${strat:-gnnone}
  file=$(suite_graph "$g") || file="$(suite_spec "$g")"
  tag="$kernel-$g-$F-${strat//[:=,]/_}-${DTYPE:-f32}"
  [ -e "$file" ] || { echo "SKIPPED $c: $file not found"; continue; }
  echo "== ncu $kernel $g F=$F ($strat vs cusparse)"
  "$NCU" --clock-control none --csv --metrics "$mlist" --launch-count 40 \
    --log-file "$OUT_DIR/$tag.csv" \
    "$SPGNN" bench "$kernel" --graph "$file" --name "$g" --dim "$F" --strategy "$strat" --dtype "${DTYPE:-f32}" \
    --warmup 0 --reps 1 --no-check --format json > "$OUT_DIR/$tag.out" 2> "$OUT_DIR/$tag.err" \
    || { status=1; tail -5 "$OUT_DIR/$tag.err"; }
done
python3 "$ROOT/bench/ncu_summary.py" "$OUT_DIR"/*.csv || status=1
exit $status
