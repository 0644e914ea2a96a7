#!/usr/bin/env bash
# Verify the fixes on a real GPU: the CUDA half of the fixture harness plus the
# host<->device copy table for DL003/DL007/DL008. Run from the repository root on a
# machine with CUDA and torch (e.g. through the device tool):
#
#     bash scripts/verify_cuda.sh            # results under ${OUT:-verify-out}/
#
# Writes env.txt (GPU, driver, torch), pytest-cuda.log, transfers.md (the table) and
# exits non-zero if any CUDA check failed. On a machine without CUDA it stops at once.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-verify-out}
export PYTHONUNBUFFERED=1
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)" || {
  echo "verify_cuda: no CUDA device visible to torch; nothing verified" >&2; exit 3; }
mkdir -p "$out"
# devlint itself needs libcst and click; a machine without an index takes them as wheels in .whl/
if ! python3 -c "import libcst, click" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps .whl/*.whl || exit 4
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . || exit 4
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
  python3 -c "import torch; print('torch:', torch.__version__, 'cuda:', torch.version.cuda)"
} | tee "$out/env.txt"
status=0
# Each fixture is a subprocess that starts CUDA (seconds apiece): run them in parallel
# where pytest-xdist is installed, name every test in the log, and only collect the files
# that hold CUDA tests (collecting the whole suite is slow and runs nothing more).
par=""
python3 -c "import xdist" 2>/dev/null && par="-n ${VERIFY_JOBS:-8}"
cuda_files=$(grep -l "mark.cuda" tests/test_*.py)
python3 -m pytest -v -rfEs --durations=15 -p no:cacheprovider $par -m cuda $cuda_files 2>&1 | tee "$out/pytest-cuda.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
python3 scripts/transfer_table.py --cuda --out "$out/transfers.md" || status=1
cat "$out/transfers.md"
exit $status
