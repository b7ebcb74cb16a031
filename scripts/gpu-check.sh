#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU from the repository root:
#   1. unpack the Debian packages in .deps/ under /opt/deps (the GPU machine has no registry;
#      fill .deps here with `sh ../shared/device/fetch-debs.sh` and, for METIS partitioning,
#      `sh ../shared/device/fetch-debs.sh libmetis-dev libmetis5`),
#   2. configure (Release, sm_90, CUDA on) and build,
#   3. ctest -L gpu,
#   4. the GPU test binaries again under compute-sanitizer memcheck and racecheck
#      (SPGNN_TEST_QUICK=1: reduced sweeps),
#   5. bench/gpu_suite.sh when it exists,
# then a compact summary. Every stage runs even when an earlier one failed (a build failure
# stops only the stages that need the binaries); the exit status is non-zero if any failed.
# Logs go to $BUILD_DIR/gpu-check/; when $OUT is set, the summary and a .tgz of the logs go there.
#
# Environment:
#   BUILD_DIR=build        build folder          CTEST_REGEX=...   ctest -R filter (also picks the
#   JOBS=16                build parallelism                        sanitized binaries)
#   SKIP_BUILD=1           reuse an existing build                  GTEST_FILTER=... for sanitizers
#   DEADLINE_S=N           seconds the whole check may take (default: none; 570 when $OUT is set,
#                          as on the device, whose calls end at 600 s): every stage runs under
#                          `timeout` of what is left, a stage that would start with under 10 s left
#                          is reported "not run: past the deadline", and the summary in $OUT is
#                          rewritten after every stage, so a check cut short still says how far it
#                          got
#   SKIP_CTEST=1  SKIP_SANITIZER=1  SKIP_MEMCHECK=1  SKIP_RACECHECK=1  SKIP_BENCH=1
#   CUDA_ARCH=90           CMAKE_CUDA_ARCHITECTURES
#   EXTRAS="half ncu tune extras train python pybench"   further suites after the benchmark, in that
#                          order: bench/half_suite.sh (float16/bfloat16 against float32 and
#                          cuSPARSE), bench/ncu_profile.sh, bench/tune_suite.sh, bench/gpu_extras.sh,
#                          bench/train_suite.sh, the Python package's tests (pytest, GPU tests
#                          included; PYTEST_K="expr" selects tests and stops at the first
#                          failure), bench/python_suite.sh (each logged; a failure fails the check)
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-16}"
CUDA_ARCH="${CUDA_ARCH:-90}"
LOG_DIR="$BUILD_DIR/gpu-check"
mkdir -p "$LOG_DIR"
declare -a SUMMARY=()
status=0
T0=$(date +%s)
DEADLINE_S="${DEADLINE_S:-$([ -n "${OUT:-}" ] && echo 570)}"
write_summary() {
  {
    echo "==== gpu-check summary ($(date +%H:%M:%S), $(( $(date +%s) - T0 )) s)"
    for l in "${SUMMARY[@]}"; do echo "  $l"; done
    echo "  result: $([ $status = 0 ] && echo PASS || echo FAIL)"
  } > "$LOG_DIR/summary.txt"
  [ -n "${OUT:-}" ] && cp "$LOG_DIR/summary.txt" "$OUT/gpu-check-summary.txt"
  return 0
}
note() { SUMMARY+=("$(printf '%-22s %s' "$1" "$2")"); write_summary; }
fail() { status=1; note "$1" "FAIL $2"; }
stamp() { echo; echo "==== [$(date +%H:%M:%S)] $*"; }
# Seconds left before DEADLINE_S (a large number when there is none).
left() {
  if [ -z "$DEADLINE_S" ]; then echo 1000000
  else echo $(( DEADLINE_S - ($(date +%s) - T0) )); fi
}
# Runs "$@" under what is left of the deadline; 124 when it ran out (or had no time to start).
limited() {
  local l; l=$(left)
  [ "$l" -ge 10 ] || return 124
  timeout --kill-after=5 "$l" "$@"
}
# " (cut short ...)" when exit status $1 is timeout's.
past_deadline() { if [ "$1" = 124 ] || [ "$1" = 137 ]; then echo " (cut short at the deadline, DEADLINE_S=$DEADLINE_S)"; fi; }
# Whether stage $1 may start; if not, it is reported as not run (a failure: the check is incomplete).
in_time() {
  [ "$(left)" -ge 10 ] && return 0
  fail "$1" "not run: past the deadline (DEADLINE_S=$DEADLINE_S)"; return 1
}

export PATH="/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="/opt/deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# ---- 1. dependencies ------------------------------------------------------------------------
stamp "unpacking .deps"
if ls .deps/*.deb >/dev/null 2>&1; then
  mkdir -p /opt/deps
  for f in .deps/*.deb; do dpkg -x "$f" /opt/deps || fail deps "dpkg -x $f"; done
  # libzstd-dev's CMake package names the versioned runtime library of libzstd1, which .deps may
  # not carry: point it at the system's copy (same soname) so find_package(zstd) succeeds.
  libdir=/opt/deps/usr/lib/x86_64-linux-gnu
  for lib in $(grep -ho 'libzstd\.so\.[0-9.]*[0-9]' "$libdir"/cmake/zstd/*.cmake 2>/dev/null | sort -u); do
    if [ ! -e "$libdir/$lib" ]; then
      sys=$(ls /usr/lib/x86_64-linux-gnu/libzstd.so.1* /lib/x86_64-linux-gnu/libzstd.so.1* 2>/dev/null | head -1)
      [ -n "$sys" ] && ln -sf "$sys" "$libdir/$lib" && echo "linked $libdir/$lib -> $sys"
    fi
  done
  note deps "ok ($(ls .deps/*.deb | wc -l) packages)"
else
  note deps "none in .deps/ (using the system's)"
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader | tee "$LOG_DIR/gpu.txt"

# ---- 2. configure + build ---------------------------------------------------------------------
built=1
[ -f "$BUILD_DIR/CMakeCache.txt" ] || [ "${SKIP_BUILD:-0}" != 1 ] || built=0
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  stamp "configure + build ($BUILD_DIR)"
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  [ -f "$BUILD_DIR/CMakeCache.txt" ] && gen=()
  t0=$(date +%s)
  if cmake -S . -B "$BUILD_DIR" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" -DCMAKE_PREFIX_PATH=/opt/deps/usr \
      -DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu -DSPGNN_WITH_CUDA=ON -DSPGNN_BUILD_GPU_TESTS=ON \
      -DPython_EXECUTABLE="$(command -v python3)" \
      > "$LOG_DIR/configure.log" 2>&1; then
    # Keep going past a broken target so the GPU tests still build when they can.
    keep=(-k 0); grep -q 'CMAKE_MAKE_PROGRAM.*make' "$BUILD_DIR/CMakeCache.txt" && keep=(-k)
    if limited cmake --build "$BUILD_DIR" -j "$JOBS" -- "${keep[@]}" > "$LOG_DIR/build.log" 2>&1; then
      note build "ok ($(( $(date +%s) - t0 )) s)"
    else
      fail build "see $LOG_DIR/build.log"
      grep -E 'error|Error' "$LOG_DIR/build.log" | head -20
    fi
  else
    fail configure "see $LOG_DIR/configure.log"; tail -20 "$LOG_DIR/configure.log"; built=0
  fi
fi

# The GPU test binaries (tests/gpu/test_*.cpp), filtered like ctest -R.
gpu_bins=()
for src in tests/gpu/test_*.cpp; do
  [ -e "$src" ] || continue
  name=$(basename "$src" .cpp)
  [[ "$name" == *_gpu ]] || name="${name}_gpu"  # tests/CMakeLists.txt's naming
  if [ -n "${CTEST_REGEX:-}" ] && ! [[ "$name" =~ $CTEST_REGEX ]]; then continue; fi
  if [ -x "$BUILD_DIR/tests/$name" ]; then gpu_bins+=("$BUILD_DIR/tests/$name")
  else fail "$name" "binary missing (build failed?)"; fi
done

# ---- 3. ctest -L gpu --------------------------------------------------------------------------
if [ "$built" = 1 ] && [ "${SKIP_CTEST:-0}" != 1 ] && in_time "ctest -L gpu"; then
  stamp "ctest -L gpu"
  rx=(); [ -n "${CTEST_REGEX:-}" ] && rx=(-R "$CTEST_REGEX")
  per_test=$(left); [ "$per_test" -gt 900 ] && per_test=900
  (cd "$BUILD_DIR" && limited ctest -L gpu "${rx[@]}" --output-on-failure --timeout "$per_test") \
    2>&1 | tee "$LOG_DIR/ctest.log"
  rc=${PIPESTATUS[0]}
  line=$(grep -E 'tests passed|tests failed' "$LOG_DIR/ctest.log" | tail -1)
  skipped=$(grep -c 'Skipped' "$LOG_DIR/ctest.log" || true)
  if [ "$rc" = 0 ]; then note "ctest -L gpu" "ok: $line (skipped: $skipped)"
  else fail "ctest -L gpu" "$line$(past_deadline "$rc")"; fi
  grep -E '^\[  (FAILED|PASSED) |^\[==========\] .* ran' "$LOG_DIR/ctest.log" | sort | uniq -c | head -20
fi

# ---- 4. compute-sanitizer ---------------------------------------------------------------------
sanitize() {  # tool
  local tool=$1 bin name log rc
  for bin in "${gpu_bins[@]}"; do
    name=$(basename "$bin")
    log="$LOG_DIR/$tool-$name.log"
    in_time "$tool $name" || continue
    stamp "compute-sanitizer --tool $tool $name (SPGNN_TEST_QUICK=1)"
    gf=(); [ -n "${GTEST_FILTER:-}" ] && gf=(--gtest_filter="$GTEST_FILTER")
    local extra=()
    # cuSPARSE's own kernels report shared-memory hazards that are not ours to fix: racecheck
    # looks at spgnn's kernels only.
    [ "$tool" = racecheck ] && extra=(--racecheck-report=hazard --kernel-name-exclude kns=cusparse)
    SPGNN_TEST_QUICK=1 limited compute-sanitizer --tool "$tool" --error-exitcode 86 "${extra[@]}" \
      "$bin" "${gf[@]}" > "$log" 2>&1
    rc=$?
    tail -4 "$log"
    local summary
    summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)
    if [ "$rc" = 0 ]; then note "$tool $name" "ok: ${summary:-no summary line}"
    else fail "$tool $name" "rc=$rc ${summary}$(past_deadline "$rc")"; grep -m5 -E 'Invalid|Race|Error|FAILED' "$log"; fi
  done
}
if [ "$built" = 1 ] && [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  if command -v compute-sanitizer >/dev/null; then
    [ "${SKIP_MEMCHECK:-0}" != 1 ] && sanitize memcheck
    [ "${SKIP_RACECHECK:-0}" != 1 ] && sanitize racecheck
  else
    fail sanitizer "compute-sanitizer not found"
  fi
fi

# ---- 5. benchmark suite -----------------------------------------------------------------------
if [ "$built" = 1 ] && [ "${SKIP_BENCH:-0}" != 1 ] && in_time bench; then
  if [ -x bench/gpu_suite.sh ] || [ -f bench/gpu_suite.sh ]; then
    stamp "bench/gpu_suite.sh"
    SPGNN="$ROOT/$BUILD_DIR/spgnn" limited bash bench/gpu_suite.sh 2>&1 | tee "$LOG_DIR/bench.log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" = 0 ]; then note bench "ok (table above, log $LOG_DIR/bench.log)"
    else fail bench "see $LOG_DIR/bench.log$(past_deadline "$rc")"; fi
  else
    note bench "skipped: bench/gpu_suite.sh not found"
  fi
fi

# ---- 6. further suites ------------------------------------------------------------------------
for extra in ${EXTRAS:-}; do
  in_time "$extra" || continue
  if [ "$extra" = python ]; then
    stamp "pytest python/tests (GPU tests included)"
    if [ "$built" = 1 ] && [ -d "$BUILD_DIR/python/spgnn" ]; then
      pyargs=()
      [ -n "${PYTEST_K:-}" ] && pyargs=(-x -k "$PYTEST_K")
      (cd python/tests && PYTHONPATH="$ROOT/$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" limited python3 -m pytest -q -rs \
         -p no:cacheprovider "${pyargs[@]}") 2>&1 | tee "$LOG_DIR/python.log"
      rc=${PIPESTATUS[0]}
      if [ "$rc" = 0 ]; then note python "ok: $(tail -1 "$LOG_DIR/python.log")"
      else fail python "$(tail -1 "$LOG_DIR/python.log")$(past_deadline "$rc")"; fi
    else
      fail python "not run: no build or no Python extension in $BUILD_DIR/python"
    fi
    continue
  fi
  case "$extra" in
    half) script=bench/half_suite.sh ;;
    ncu) script=bench/ncu_profile.sh ;;
    tune) script=bench/tune_suite.sh ;;
    extras) script=bench/gpu_extras.sh ;;
    train) script=bench/train_suite.sh ;;
    pybench) script=bench/python_suite.sh ;;
    *) fail "extra $extra" "unknown (expected half, ncu, tune, extras, train, python, pybench)"; continue ;;
  esac
  if [ "$built" != 1 ] || [ ! -f "$script" ]; then fail "$extra" "not run (no build or no $script)"; continue; fi
  stamp "$script"
  SPGNN="$ROOT/$BUILD_DIR/spgnn" PYTHONPATH="$ROOT/$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" limited bash "$script" 2>&1 \
    | tee "$LOG_DIR/$extra.log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" = 0 ]; then note "$extra" "ok (log $LOG_DIR/$extra.log)"
  else fail "$extra" "see $LOG_DIR/$extra.log$(past_deadline "$rc")"; fi
done

# ---- summary ----------------------------------------------------------------------------------
write_summary
if [ -n "${OUT:-}" ]; then  # two files: the result device tool brings back at most eight
  tar czf "$OUT/gpu-check-logs.tgz" -C "$LOG_DIR" . 2>/dev/null
fi
echo
cat "$LOG_DIR/summary.txt"
exit $status
