#!/usr/bin/env bash
# `auto`'s SpMM rules on regular dense rows (docs/STRATEGIES.md): every candidate schedule of the
# rules timed in one process per graph, op and dtype, `auto`'s own pick beside them, so a card can
# be checked against the rules (or the rules reset from it). Graphs: the Reddit shapes
# (directed and symmetric) and Erdős-Rényi graphs of average degree 70-300 (the rules' thresholds
# sit between them). Results are checked against the float64 oracle unless NO_CHECK=1.
#   SPGNN=build/spgnn  GRAPHS="dir sym er50k er80 er160 er300 er2m"  DIMS=16,32,44,64,96,128,256
#   OPS="copy_u u_mul_e"  DTYPES=f32 (or bf16, f16, "f32 bf16")  REDUCE=sum  REPS=10
#   RESULTS=build/bench-regular  (one JSON per graph, op and dtype; the table is printed at the end)
set -uo pipefail
source "$(dirname "$0")/common.sh"
RESULTS="${RESULTS:-${OUT:-$ROOT/build}/bench-regular}"
mkdir -p "$RESULTS"
SCHEDULES=(auto gnnone warp_vertex warp_vertex:step=1,split=-1
           warp_vertex:assign=1,split=-1 warp_vertex:assign=1,split=-1,warps=2)
check=()
[ "${NO_CHECK:-0}" = 1 ] && check=(--no-check)
status=0
for g in ${GRAPHS:-dir sym er50k er80 er160 er300 er2m}; do
  case "$g" in  # name -> spgnn generate er arguments
    dir) gen=(--n 232965 --avg-degree 489 --seed 1) ;;
    sym) gen=(--n 232965 --avg-degree 246 --seed 1 --symmetrize) ;;
    er50k) gen=(--n 50000 --avg-degree 200 --seed 6) ;;
    er80) gen=(--n 600000 --avg-degree 80 --seed 2) ;;
    er160) gen=(--n 400000 --avg-degree 160 --seed 3) ;;
    er300) gen=(--n 300000 --avg-degree 300 --seed 4) ;;
    er2m) gen=(--n 2000000 --avg-degree 70 --seed 5) ;;
    *) echo "regular_rows: unknown graph '$g' (dir sym er50k er80 er160 er300 er2m)" >&2; exit 2 ;;
  esac
  file="$GRAPHS_DIR/regular-$g.spg"
  if [ ! -f "$file" ]; then
    "$SPGNN" generate er "${gen[@]}" -o "$file" >&2 || { status=1; continue; }
  fi
  for op in ${OPS:-copy_u u_mul_e}; do
    for dt in ${DTYPES:-f32}; do
      echo "== $g: $op/${REDUCE:-sum} $dt" >&2
      args=()
      for s in "${SCHEDULES[@]}"; do args+=(-s "$s"); done
      "$SPGNN" bench spmm --graph "$file" --name "$g" --dim "${DIMS:-16,32,44,64,96,128,256}" \
        --op "$op" --reduce "${REDUCE:-sum}" --dtype "$dt" "${args[@]}" --reps "${REPS:-10}" \
        "${check[@]}" --format json > "$RESULTS/$g-$op-$dt.json" || status=1
    done
  done
done
python3 - "$RESULTS" <<'PY' || status=1
# One row per (graph, op, dtype, F): each schedule's median ms, `auto`'s pick, and the fastest.
import glob, json, os, sys
short = {"warp_vertex": "wv", "warp_vertex(split=-1,step=1)": "wv st1",
         "warp_vertex(assign=1,split=-1)": "wv a1", "warp_vertex(assign=1,split=-1,warps=2)": "wv a1 w2",
         "gnnone": "gnnone"}
cols = list(short.values())
print(f"{'graph':8} {'op':12} {'dtype':5} {'F':>4} " + " ".join(f"{c:>9}" for c in cols) +
      "  auto -> (ms)                 fastest")
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    with open(path) as f:
        rows = json.load(f)
    cases = {}
    for r in rows:
        if r.get("failed") or r.get("median_ms") is None:
            continue
        case = cases.setdefault((r["graph"], r["op"], r["dtype"], r["F"]), {"auto": None, "t": {}})
        if r.get("auto") and case["auto"] is None:
            case["auto"] = (r["strategy"], r["median_ms"])  # bench writes auto's own run first
        elif r["strategy"] in short:
            case["t"].setdefault(short[r["strategy"]], r["median_ms"])
    for (g, op, dt, F), c in sorted(cases.items()):
        t = c["t"]
        best = min(t, key=t.get) if t else "-"
        auto = f"{c['auto'][0]} ({c['auto'][1]:.3f})" if c["auto"] else "-"
        print(f"{g:8} {op:12} {dt:5} {F:>4} " +
              " ".join(f"{t[k]:9.3f}" if k in t else f"{'-':>9}" for k in cols) +
              f"  {auto:29} {best}")
PY
exit $status
