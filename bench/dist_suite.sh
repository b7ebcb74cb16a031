#!/usr/bin/env bash
# Full-graph training on several GPUs (issue 13): one process on one device against PARTS ranks
# launched by torchrun (NCCL on GPUs), for METIS and random partitions, on a Reddit-sized
# planted-partition dataset (n = 232,965 and ~114M edges like Reddit; 41 classes, 602 features;
# communities a partitioner can find, unlike a uniform random graph). Models as in the training
# suite: gcn 2x16, sage 4x256. Prints a table; the JSON results go to OUT_JSON_DIR.
#   SPGNN=build/spgnn  PYTHONPATH=build/python  N=232965 DEG=489  CLASSES=41  FEATURES=602
#   MODELS="sage gcn"  METHODS="metis random"  PARTS=2  EPOCHS=20  DEVICE=cuda (or cpu: gloo)
#   WORK=/tmp/spgnn-dist-suite  OUT_JSON_DIR=dir
#   STALE=1: each partitioned run again with --stale-halos (PipeGCN)
#   DTYPE=fp32|bf16|fp16: every run's --dtype (mixed precision; 2-byte halos)
#   IMBALANCE=1.05: the partitions' --imbalance (metis, ldg; a new value makes new partitions)
#   NO_OVERLAP=1: each partitioned run again with --no-overlap (the halo fetched first)
#   CUDA_GRAPH=1: the one-device run and each partitioned run again with --cuda-graph (the step
#                 captured once and replayed; "vs 1" then compares with the one-device graphed run)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SPGNN="${SPGNN:-$ROOT/build/spgnn}"
export PYTHONPATH="${PYTHONPATH:-$ROOT/build/python}"
PY="${PYTHON:-python3}"
N="${N:-232965}" DEG="${DEG:-489}" CLASSES="${CLASSES:-41}" FEATURES="${FEATURES:-602}"
PARTS="${PARTS:-2}" EPOCHS="${EPOCHS:-20}" DEVICE="${DEVICE:-cuda}"
WORK="${WORK:-/tmp/spgnn-dist-suite}"
OUT="${OUT_JSON_DIR:-$WORK/json}"
mkdir -p "$WORK" "$OUT"

ds="$WORK/planted-$N-$DEG"
if [ ! -d "$ds" ]; then
  t0=$(date +%s)
  "$SPGNN" generate planted --n "$N" --avg-degree "$DEG" --classes "$CLASSES" \
    --feature-dim "$FEATURES" --seed 1 -o "$ds" >&2
  echo "generated $ds in $(( $(date +%s) - t0 )) s" >&2
fi
IMB="${IMBALANCE:-1.05}"
# The default imbalance keeps the directory names of earlier runs; another one is in the name.
sfx() { if [ "$IMB" = 1.05 ]; then echo "$1"; else echo "$1$IMB"; fi; }
for method in ${METHODS:-metis random}; do
  p="$ds-$(sfx "$method")-$PARTS"
  if [ ! -d "$p" ]; then
    t0=$(date +%s)
    "$SPGNN" partition "$ds" -o "$p" --parts "$PARTS" --method "$method" --imbalance "$IMB" >&2
    echo "partitioned ($method, $PARTS parts) in $(( $(date +%s) - t0 )) s" >&2
  fi
done

model_args() {
  case "$1" in
    gcn) echo "--model gcn --layers 2 --hidden 16" ;;
    sage) echo "--model sage --layers 4 --hidden 256" ;;
    gin) echo "--model gin --layers 5 --hidden 64" ;;
    gat) echo "--model gat --layers 5 --hidden 16 --heads 1" ;;
    *) echo "unknown model '$1' (gcn, sage, gin, gat)" >&2; exit 2 ;;
  esac
}
common=(--epochs "$EPOCHS" --eval-every "$EPOCHS" --device "$DEVICE" --dtype "${DTYPE:-fp32}")
for model in ${MODELS:-sage gcn}; do
  # shellcheck disable=SC2046
  "$PY" -m spgnn.train --dataset "$ds" $(model_args "$model") "${common[@]}" \
    --json "$OUT/dist-$model-1.json"
  if [ "${CUDA_GRAPH:-0}" = 1 ]; then
    # shellcheck disable=SC2046
    "$PY" -m spgnn.train --dataset "$ds" $(model_args "$model") "${common[@]}" --cuda-graph \
      --json "$OUT/dist-$model-1-graph.json"
  fi
  for method in ${METHODS:-metis random}; do
    pm="$(sfx "$method")"
    # shellcheck disable=SC2046
    OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}" "$PY" -m torch.distributed.run \
      --nproc-per-node "$PARTS" -m spgnn.train --dist "$ds-$pm-$PARTS" \
      $(model_args "$model") "${common[@]}" --json "$OUT/dist-$model-$pm-$PARTS.json"
    if [ "${NO_OVERLAP:-0}" = 1 ]; then
      # shellcheck disable=SC2046
      OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}" "$PY" -m torch.distributed.run \
        --nproc-per-node "$PARTS" -m spgnn.train --dist "$ds-$pm-$PARTS" --no-overlap \
        $(model_args "$model") "${common[@]}" --json "$OUT/dist-$model-$pm-noov-$PARTS.json"
    fi
    if [ "${CUDA_GRAPH:-0}" = 1 ]; then
      # shellcheck disable=SC2046
      OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}" "$PY" -m torch.distributed.run \
        --nproc-per-node "$PARTS" -m spgnn.train --dist "$ds-$pm-$PARTS" --cuda-graph \
        $(model_args "$model") "${common[@]}" --json "$OUT/dist-$model-$pm-graph-$PARTS.json"
    fi
    if [ "${STALE:-0}" = 1 ]; then
      # shellcheck disable=SC2046
      OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}" "$PY" -m torch.distributed.run \
        --nproc-per-node "$PARTS" -m spgnn.train --dist "$ds-$pm-$PARTS" --stale-halos \
        $(model_args "$model") "${common[@]}" --json "$OUT/dist-$model-$pm-stale-$PARTS.json"
    fi
  done
done

"$PY" - "$OUT" "$ds" "$PARTS" "$(sfx "")" <<'PYEOF'
import json, os, sys
out, ds, parts, imb = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rows = []
for f in sorted(os.listdir(out)):
    if f.startswith("dist-") and f.endswith(".json"):
        rows.append(json.load(open(os.path.join(out, f))))
one = {(r["model"], bool(r.get("cuda_graph"))): r for r in rows if r["ranks"] == 1}
print(f"| model | ranks | partition | ms/epoch | vs 1 | comm ms | halo fraction | sent MiB/epoch"
      " | memory MiB (max) | test acc |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for r in sorted(rows, key=lambda r: (r["model"], r["ranks"], r["dataset"])):
    ms = min(r["epoch_ms"])
    base = one.get((r["model"], bool(r.get("cuda_graph"))))
    vs = f"{min(base['epoch_ms']) / ms:.2f}x" if base else "-"
    method = "-" if r["ranks"] == 1 else os.path.basename(r["dataset"]).split("-")[-2]
    method += " stale" if r.get("stale_halos") else ""
    method += " no-overlap" if r["ranks"] > 1 and r.get("overlap") is False \
        and not r.get("stale_halos") else ""
    method += f" {r['dtype']}" if r.get("dtype", "fp32") != "fp32" else ""
    method += " cuda-graph" if r.get("cuda_graph") else ""
    comm = "-" if None in r["comm_ms"] else f"{min(r['comm_ms']):.2f}"
    print(f"| {r['model']} | {r['ranks']} | {method} | {ms:.2f} | {vs} | {comm} |"
          f" {max(r['halo_fraction']):.3f} | {max(r['sent_mib_per_epoch']):.1f} |"
          f" {max(r['memory_mib']):.0f} | {r['test_acc_mean']:.4f} |")
for method in ("metis", "random", "ldg", "range"):
    meta = f"{ds}-{method}{imb}-{parts}/meta.json"
    if os.path.exists(meta):
        m = json.load(open(meta))
        print(f"{method}: edge cut {m['edge_cut']:,} of {m['num_edges']:,} "
              f"({100 * m['edge_cut'] / max(1, m['num_edges']):.1f}%), halo volume "
              f"{m['halo_volume']:,} rows ({m['method']}{'; ' + m['note'] if m['note'] else ''})")
PYEOF
