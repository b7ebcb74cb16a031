#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs ctest. Exits non-zero on any
# failure. GPU tests (label gpu) report SKIPPED on machines without a GPU.
set -euo pipefail
source "$(dirname "$0")/setup.sh"
spgnn_install_deps
spgnn_build
cd "$BUILD_DIR"
set +e
ctest --output-on-failure -j "$(nproc)" --timeout 900 2>&1 | tee ctest.log
rc=${PIPESTATUS[0]}
set -e
total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' ctest.log | tail -1)
failed=$(sed -n 's/.*, \([0-9]*\) tests failed out of.*/\1/p' ctest.log | tail -1)
skipped=$(grep -c '\*\*\*Skipped\|Not Run' ctest.log || true)
total=${total:-0}; failed=${failed:-0}
echo "tests: $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
exit "$rc"
