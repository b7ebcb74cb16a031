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
note() { SUMMARY+=("$(printf '%-22s %s' "$1" "$2")"); }
fail() { status=1; note "$1" "FAIL $2"; }
stamp() { echo; echo "==== [$(date +%H:%M:%S)] $*"; }

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
      -DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu -DSPGNN_WITH_CUDA=ON \
      -DPython_EXECUTABLE="$(command -v python3)" \
      > "$LOG_DIR/configure.log" 2>&1; then
    # Keep going past a broken target so the GPU tests still build when they can.
    keep=(-k 0); grep -q 'CMAKE_MAKE_PROGRAM.*make' "$BUILD_DIR/CMakeCache.txt" && keep=(-k)
    if cmake --build "$BUILD_DIR" -j "$JOBS" -- "${keep[@]}" > "$LOG_DIR/build.log" 2>&1; then
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
if [ "$built" = 1 ] && [ "${SKIP_CTEST:-0}" != 1 ]; then
  stamp "ctest -L gpu"
  rx=(); [ -n "${CTEST_REGEX:-}" ] && rx=(-R "$CTEST_REGEX")
  (cd "$BUILD_DIR" && ctest -L gpu "${rx[@]}" --output-on-failure --timeout 900) \
    2>&1 | tee "$LOG_DIR/ctest.log"
  rc=${PIPESTATUS[0]}
  line=$(grep -E 'tests passed|tests failed' "$LOG_DIR/ctest.log" | tail -1)
  skipped=$(grep -c 'Skipped' "$LOG_DIR/ctest.log" || true)
  if [ "$rc" = 0 ]; then note "ctest -L gpu" "ok: $line (skipped: $skipped)"
  else fail "ctest -L gpu" "$line"; fi
  grep -E '^\[  (FAILED|PASSED) |^\[==========\] .* ran' "$LOG_DIR/ctest.log" | sort | uniq -c | head -20
fi

# ---- 4. compute-sanitizer ---------------------------------------------------------------------
sanitize() {  # tool
  local tool=$1 bin name log rc
  for bin in "${gpu_bins[@]}"; do
    name=$(basename "$bin")
    log="$LOG_DIR/$tool-$name.log"
    stamp "compute-sanitizer --tool $tool $name (SPGNN_TEST_QUICK=1)"
    gf=(); [ -n "${GTEST_FILTER:-}" ] && gf=(--gtest_filter="$GTEST_FILTER")
    local extra=()
    # cuSPARSE's own kernels report shared-memory hazards that are not ours to fix: racecheck
    # looks at spgnn's kernels only.
    [ "$tool" = racecheck ] && extra=(--racecheck-report=hazard --kernel-name-exclude kns=cusparse)
    SPGNN_TEST_QUICK=1 compute-sanitizer --tool "$tool" --error-exitcode 86 "${extra[@]}" \
      "$bin" "${gf[@]}" > "$log" 2>&1
    rc=$?
    tail -4 "$log"
    local summary
    summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)
    if [ "$rc" = 0 ]; then note "$tool $name" "ok: ${summary:-no summary line}"
    else fail "$tool $name" "rc=$rc ${summary}"; grep -m5 -E 'Invalid|Race|Error|FAILED' "$log"; fi
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
if [ "$built" = 1 ] && [ "${SKIP_BENCH:-0}" != 1 ]; then
  if [ -x bench/gpu_suite.sh ] || [ -f bench/gpu_suite.sh ]; then
    stamp "bench/gpu_suite.sh"
    SPGNN="$ROOT/$BUILD_DIR/spgnn" bash bench/gpu_suite.sh 2>&1 | tee "$LOG_DIR/bench.log"
    if [ "${PIPESTATUS[0]}" = 0 ]; then note bench "ok (table above, log $LOG_DIR/bench.log)"
    else fail bench "see $LOG_DIR/bench.log"; fi
  else
    note bench "skipped: bench/gpu_suite.sh not found"
  fi
fi

# ---- 6. further suites ------------------------------------------------------------------------
for extra in ${EXTRAS:-}; do
  if [ "$extra" = python ]; then
    stamp "pytest python/tests (GPU tests included)"
    if [ "$built" = 1 ] && [ -d "$BUILD_DIR/python/spgnn" ]; then
      pyargs=()
      [ -n "${PYTEST_K:-}" ] && pyargs=(-x -k "$PYTEST_K")
      (cd python/tests && PYTHONPATH="$ROOT/$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -q -rs \
         -p no:cacheprovider "${pyargs[@]}") 2>&1 | tee "$LOG_DIR/python.log"
      if [ "${PIPESTATUS[0]}" = 0 ]; then note python "ok: $(tail -1 "$LOG_DIR/python.log")"
      else fail python "$(tail -1 "$LOG_DIR/python.log")"; fi
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
  SPGNN="$ROOT/$BUILD_DIR/spgnn" PYTHONPATH="$ROOT/$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" bash "$script" 2>&1 \
    | tee "$LOG_DIR/$extra.log"
  if [ "${PIPESTATUS[0]}" = 0 ]; then note "$extra" "ok (log $LOG_DIR/$extra.log)"
  else fail "$extra" "see $LOG_DIR/$extra.log"; fi
done

# ---- summary ----------------------------------------------------------------------------------
{
  echo "==== gpu-check summary ($(date +%H:%M:%S))"
  for l in "${SUMMARY[@]}"; do echo "  $l"; done
  echo "  result: $([ $status = 0 ] && echo PASS || echo FAIL)"
} > "$LOG_DIR/summary.txt"
if [ -n "${OUT:-}" ]; then  # two files: the result device tool brings back at most eight
  cp "$LOG_DIR/summary.txt" "$OUT/gpu-check-summary.txt"
  tar czf "$OUT/gpu-check-logs.tgz" -C "$LOG_DIR" . 2>/dev/null
fi
echo
cat "$LOG_DIR/summary.txt"
exit $status
