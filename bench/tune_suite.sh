#!/usr/bin/env bash
# The autotuner suite of issue 7, for the GPU machine (builds nothing). On the graphs of
# bench/gpu_suite.sh, for SpMM (u_mul_e, sum) and SDDMM (dot) at each width:
#   1. `spgnn tune --mode genetic` ranked by the prior (no cost model yet),
#   2. with EXHAUSTIVE=1, `--mode exhaustive --budget 600` on the graphs in $EXHAUSTIVE_GRAPHS
#      (the reference the genetic result must be within 5% of),
#   3. `spgnn tune --fit-model` on every timing stored so far (train / held-out Pearson),
#   4. `spgnn tune --mode genetic` again, now ranked by the fitted model.
# Every timing goes to the tuning cache in $CACHE (cleared first unless KEEP_CACHE=1), the same
# cache `auto` reads, so `spgnn bench --strategy auto` afterwards runs the tuned schedules.
# Prints one table: case, space size, genetic ms / tune s (both passes; rank2 = whether the second
# pass was ranked by the model), exhaustive ms, within 5%?, tuned vs best fixed strategy vs
# cuSPARSE; then the geo-means.
#
# Environment (all optional):
#   SPGNN=build/spgnn        the CLI (scripts/gpu-check.sh builds build/spgnn)
#   GRAPHS="kron21 reddit products cora citeseer pubmed"   DIMS=16,32,64,128,256   OPS="spmm sddmm"
#   BUDGET=0                 seconds per genetic tuning case (0 = none)
#   EXHAUSTIVE=0 EXHAUSTIVE_GRAPHS="cora citeseer pubmed" EXHAUSTIVE_BUDGET=600
#   CACHE=$RESULTS/tune-cache  KEEP_CACHE=0  RESULTS=${OUT:-build}/tune  SEED=1
#   VERIFY=1                 re-time the genetic and the exhaustive winner of each exhaustive
#                            case side by side in one `spgnn bench` process (VERIFY_REPS=200):
#                            the minimum over hundreds of noisy ~10 us timings is biased low, so
#                            the 5% comparison is also made on these fresh medians
#   DATA_DIR=../shared/data (or .data)  GRAPHS_DIR=/tmp/spgnn-graphs
#   DTYPE=f32                the features' dtype (f16, bf16: half problems have cache entries of
#                            their own and no cost model, so steps 3 and 4 are skipped)
set -uo pipefail
source "$(dirname "$0")/common.sh"
RESULTS="${RESULTS:-${OUT:-$ROOT/build}/tune}"
CACHE="${CACHE:-$RESULTS/tune-cache}"
GRAPHS="${GRAPHS:-kron21 reddit products cora citeseer pubmed}"
DIMS="${DIMS:-16,32,64,128,256}"
OPS="${OPS:-spmm sddmm}"
BUDGET="${BUDGET:-0}"
EXHAUSTIVE="${EXHAUSTIVE:-0}"
EXHAUSTIVE_GRAPHS="${EXHAUSTIVE_GRAPHS:-cora citeseer pubmed}"
EXHAUSTIVE_BUDGET="${EXHAUSTIVE_BUDGET:-600}"
SEED="${SEED:-1}"
DTYPE="${DTYPE:-f32}"
mkdir -p "$RESULTS" "$CACHE"
[ "${KEEP_CACHE:-0}" = 1 ] || rm -f "$CACHE/tuning.json" "$CACHE/measurements.json" "$CACHE/cost_model.json"
[ -x "$SPGNN" ] || { echo "tune_suite: $SPGNN not found (set SPGNN=path/to/spgnn)"; exit 2; }

status=0
t_start=$(date +%s)
tune() {  # pass graph op file mode [extra flags...]
  local pass=$1 g=$2 op=$3 file=$4 mode=$5; shift 5
  echo "== $pass: $op on $g ($mode)" >&2
  "$SPGNN" tune --graph "$file" --name "$g" --op "$op" --dim "$DIMS" --mode "$mode" \
    --cache "$CACHE/" --seed "$SEED" --dtype "$DTYPE" --format json "$@" > "$RESULTS/$pass-$op-$(suite_label "$g").json" \
    || { status=1; echo "FAILED: $pass $op $g" >&2; }
}

declare -A FILES=()
for g in $GRAPHS; do
  if f=$(suite_graph "$g"); then FILES[$g]=$f; else echo "SKIPPED $g: $(suite_spec "$g") not found"; fi
done

for g in "${!FILES[@]}"; do
  for op in $OPS; do tune genetic1 "$g" "$op" "${FILES[$g]}" genetic --budget "$BUDGET" --no-model; done
done
if [ "$EXHAUSTIVE" = 1 ]; then
  for g in $EXHAUSTIVE_GRAPHS; do
    [ -n "${FILES[$g]:-}" ] || continue
    for op in $OPS; do tune exhaustive "$g" "$op" "${FILES[$g]}" exhaustive --budget "$EXHAUSTIVE_BUDGET"; done
  done
fi
if [ "$DTYPE" = f32 ]; then
  echo "== fit-model" >&2
  "$SPGNN" tune --fit-model --cache "$CACHE/" --seed "$SEED" | tee "$RESULTS/fit-model.txt" || status=1
  for g in "${!FILES[@]}"; do
    for op in $OPS; do tune genetic2 "$g" "$op" "${FILES[$g]}" genetic --budget "$BUDGET"; done
  done
fi
echo "== suite wall time: $(( $(date +%s) - t_start )) s"

FILE_MAP=""
for g in "${!FILES[@]}"; do FILE_MAP+="$g=${FILES[$g]};"; done
SPGNN="$SPGNN" FILE_MAP="$FILE_MAP" VERIFY="${VERIFY:-0}" VERIFY_REPS="${VERIFY_REPS:-200}" \
python3 - "$RESULTS" <<'EOF' || status=1
import glob, json, math, os, sys
from collections import defaultdict

res = sys.argv[1]
runs = defaultdict(dict)  # (op, graph, F) -> pass -> case
for path in sorted(glob.glob(os.path.join(res, "*.json"))):
    name = os.path.basename(path)
    pass_ = name.split("-")[0]
    if pass_ not in ("genetic1", "exhaustive", "genetic2"):
        continue
    try:
        with open(path) as f:
            cases = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"tune_suite: skipping {path}: {e}")
        continue
    for c in cases:
        runs[(c["op"], c["graph"], c["F"])][pass_] = c

def ms(c):
    return c["best"]["ms"] if c and c["best"]["ms"] is not None else None

def gm(v):
    v = [x for x in v if x and x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")

def fmt(x, d=4):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"

print()
hdr = (f"{'op':5} {'graph':9} {'F':>4} {'space':>6} {'gen1 ms':>9} {'s':>6} {'gen2 ms':>9} {'s':>6} {'rank2':>5} "
       f"{'exh ms':>9} {'<=5%':>5} {'fixed ms':>9} {'best fixed':>12} {'cusp ms':>9} "
       f"{'vs fixed':>8} {'vs cusp':>8}  tuned schedule")
print(hdr)
print("-" * len(hdr))
within, checked, over30 = 0, 0, 0
sp_tuned, sp_fixed = defaultdict(list), defaultdict(list)
per_strategy = defaultdict(lambda: defaultdict(list))  # op -> strategy -> [speedup vs cusparse]
for (op, graph, F), p in sorted(runs.items()):
    final = p.get("genetic2") or p.get("genetic1")
    if not final:
        continue
    t = ms(final)
    ex = ms(p.get("exhaustive"))
    ok = ""
    if ex is not None and t is not None:
        checked += 1
        good = t <= 1.05 * ex
        within += good
        ok = "yes" if good else "NO"
    over30 += sum(1 for q in ("genetic1", "genetic2") if q in p and p[q]["seconds"] > 30)
    fixed = final["best_fixed"]["ms"]
    cusp = final["baseline"]["ms"]
    vs_fixed = fixed / t if fixed and t else None
    vs_cusp = cusp / t if cusp and t else None
    if vs_cusp:
        sp_tuned[op].append(vs_cusp)
    # Each fixed strategy at its default schedule, timed in the same run (cuSPARSE: best alg).
    best = {}
    for c in final["candidates"]:
        if not c["baseline"] or c["ms"] is None:
            continue
        s = c["schedule"].split("(")[0]
        if "(" in c["schedule"] and s != "cusparse":
            continue
        best[s] = min(best.get(s, c["ms"]), c["ms"])
    if cusp:
        for s, v in best.items():
            per_strategy[op][s].append(cusp / v)
    g1, g2 = p.get("genetic1"), p.get("genetic2")
    print(f"{op:5} {graph:9} {F:>4} {final['space_size']:>6} {fmt(ms(g1)):>9} "
          f"{fmt(g1['seconds'] if g1 else None, 1):>6} {fmt(ms(g2)):>9} "
          f"{fmt(g2['seconds'] if g2 else None, 1):>6} "
          f"{('model' if g2 and g2['model_used'] else 'prior' if g2 else '-'):>5} "
          f"{fmt(ex):>9} {ok:>5} {fmt(fixed):>9} "
          f"{final['best_fixed']['strategy']:>12} {fmt(cusp):>9} {fmt(vs_fixed, 2):>7}x "
          f"{fmt(vs_cusp, 2):>7}x  {final['best']['schedule']}")
print()
for op in sorted(sp_tuned):
    print(f"geo-mean speedup over cuSPARSE, {op}: tuned auto {gm(sp_tuned[op]):.2f}x ({len(sp_tuned[op])} cases)")
    ranked = sorted(((gm(v), s, len(v)) for s, v in per_strategy[op].items()), reverse=True)
    for g, s, n in ranked:
        print(f"    fixed {s:12} {g:.2f}x ({n} cases)")
    if ranked:
        verdict = "beats" if gm(sp_tuned[op]) > ranked[0][0] else "does NOT beat"
        print(f"  tuned auto {verdict} the best single fixed strategy ({ranked[0][1]}, {ranked[0][0]:.2f}x)")
if checked:
    print(f"genetic within 5% of exhaustive: {within}/{checked} cases")
print(f"tuning runs over 30 s: {over30}")

if os.environ.get("VERIFY") == "1":
    import subprocess
    files = dict(kv.split("=", 1) for kv in os.environ["FILE_MAP"].split(";") if kv)
    def cli(sched):  # "name(k=v,k=v)" -> "name:k=v,k=v" (the --strategy syntax)
        return sched.replace("(", ":").rstrip(")")
    print()
    print("re-timed side by side (one spgnn bench process, median of "
          f"{os.environ['VERIFY_REPS']} runs): genetic winner vs exhaustive winner")
    print(f"{'op':5} {'graph':9} {'F':>4} {'genetic ms':>11} {'exh. ms':>9} {'<=5%':>5}  schedules")
    ok_n = n = 0
    for (op, graph, F), p in sorted(runs.items()):
        final = p.get("genetic2") or p.get("genetic1")
        ex = p.get("exhaustive")
        if not final or not ex or graph not in files:
            continue
        a, b = final["best"]["schedule"], ex["best"]["schedule"]
        strategies = [a] if a == b else [a, b]
        cmd = [os.environ["SPGNN"], "bench", op, "--graph", files[graph], "--name", graph,
               "--dim", str(F), "--reps", os.environ["VERIFY_REPS"], "--warmup", "20",
               "--format", "json"]
        for sch in strategies:
            cmd += ["--strategy", cli(sch)]
        try:
            rows = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        except (subprocess.CalledProcessError, json.JSONDecodeError) as e:
            print(f"{op:5} {graph:9} {F:>4} verify failed: {e}")
            continue
        t = {r["strategy"]: r["median_ms"] for r in rows if not r.get("failed")}
        ta, tb = t.get(a), t.get(b)
        if ta is None or tb is None:
            print(f"{op:5} {graph:9} {F:>4} verify: schedules not in bench output ({sorted(t)})")
            continue
        n += 1
        good = ta <= 1.05 * tb
        ok_n += good
        print(f"{op:5} {graph:9} {F:>4} {ta:>11.4f} {tb:>9.4f} {('yes' if good else 'NO'):>5}  {a}  |  {b}")
    if n:
        print(f"genetic within 5% of exhaustive (re-timed): {ok_n}/{n} cases")
EOF
exit $status
