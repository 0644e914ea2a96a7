#!/usr/bin/env bash
# Verify the fixes on a real GPU: the CUDA half of the fixture harness plus the
# host<->device copy table for DL003/DL007/DL008. Run from the repository root on a
# machine with CUDA and torch (e.g. through the device tool, 10 minutes a command):
#
#     bash scripts/verify_cuda.sh              # every chunk not yet passed, results under ${OUT:-verify-out}/
#     bash scripts/verify_cuda.sh DL002 DL005  # only these chunks
#     VERIFY_PLAN=1 bash scripts/verify_cuda.sh  # print the chunks and what is done; run nothing (no GPU needed)
#     VERIFY_PLAN=selection bash scripts/verify_cuda.sh  # each pytest chunk's -k expression
#
# The work is cut in chunks, one per rule directory of tests/fixtures (each a few minutes),
# `other` (the CUDA tests outside the fixture harness) and `transfers` (the copy table).
# Each chunk writes its log as it goes (chunks/<name>.log, full tracebacks and both outputs
# of a failed comparison: -vv --tb=long) and, at its end, chunks/<name>.status ("passed" or
# "failed: N"); a chunk whose status says passed is skipped by the next run, so a run cut
# off by a time limit resumes where it stopped. No new chunk starts once
# ${VERIFY_BUDGET:-480} seconds have gone, and each chunk is stopped after
# ${VERIFY_CHUNK_LIMIT:-480} seconds. summary.txt lists every chunk's status; the script
# exits 0 when every chunk has passed, 1 when one failed, 2 when some are still to run,
# 3 without CUDA.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-verify-out}
budget=${VERIFY_BUDGET:-480}
limit=${VERIFY_CHUNK_LIMIT:-480}
export PYTHONUNBUFFERED=1
start=$(date +%s)

all_chunks() {
  for d in tests/fixtures/DL*/; do basename "$d"; done
  echo other
  echo transfers
}
chunks=${*:-$(all_chunks)}

status_of() { [ -f "$out/chunks/$1.status" ] && cat "$out/chunks/$1.status" || echo "to run"; }

selection() {  # chunk -> the pytest -k expression of its CUDA tests
  case $1 in
    # every CUDA test no rule chunk selects (a test whose id names no fixture directory)
    other) echo "not ($(for d in tests/fixtures/DL*/; do printf '%s/ or ' "$(basename "$d")"; done | sed 's/ or $//'))" ;;
    *) echo "$1/" ;;
  esac
}

if [ "${VERIFY_PLAN:-}" = selection ]; then  # what each pytest chunk selects (tests/test_verification.py)
  for c in $chunks; do [ "$c" = transfers ] || printf '%s\t%s\n' "$c" "$(selection "$c")"; done
  exit 0
elif [ -n "${VERIFY_PLAN:-}" ]; then
  for c in $chunks; do echo "$c: $(status_of "$c")"; done
  exit 0
fi

python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)" || {
  echo "verify_cuda: no CUDA device visible to torch; nothing verified" >&2; exit 3; }
mkdir -p "$out/chunks"
# devlint itself needs libcst and click; a machine without an index takes them as wheels in .whl/
if ! python3 -c "import libcst, click" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps .whl/*.whl || exit 4
fi
# installed once (two runs started together, chunks in one and transfers in another, must not race)
python3 -c "import devlint.rules" 2>/dev/null || python3 -m pip install -q --no-deps --no-build-isolation -e . || exit 4
[ -f "$out/env.txt" ] || {
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
  python3 -c "import torch; print('torch:', torch.__version__, 'cuda:', torch.version.cuda)"
} | tee "$out/env.txt"

par=""
python3 -c "import xdist" 2>/dev/null && par="-n ${VERIFY_JOBS:-8}"
cuda_files=$(grep -l "mark.cuda" tests/test_*.py)

run_chunk() {  # name -> writes chunks/<name>.log and .status
  local c=$1 log="$out/chunks/$1.log" rc
  case $c in
    transfers)
      timeout "$limit" python3 scripts/transfer_table.py --cuda --jobs "${VERIFY_JOBS:-8}" --out "$out/transfers.md" >"$log" 2>&1
      rc=$? ;;
    *)
      timeout "$limit" python3 -m pytest -vv --tb=long -rfEs -p no:cacheprovider $par -m cuda \
        -k "$(selection "$c")" $cuda_files >"$log" 2>&1
      rc=$? ;;
  esac
  # pytest exits 5 when a chunk holds no CUDA test (a rule whose fixtures have none)
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ]; then
    echo passed >"$out/chunks/$c.status"
  elif [ "$rc" -eq 124 ]; then
    echo "timed out after ${limit}s" >"$out/chunks/$c.status"
  else
    echo "failed: $(grep -cE '^(FAILED|ERROR) ' "$log") (exit $rc)" >"$out/chunks/$c.status"
  fi
  echo "$c: $(status_of "$c")"
}

for c in $chunks; do
  if [ "$(status_of "$c")" = passed ]; then
    echo "$c: passed (earlier run)"
    continue
  fi
  if [ $(( $(date +%s) - start )) -ge "$budget" ]; then
    echo "$c: not started (time budget of ${budget}s spent; run again to resume)"
    continue
  fi
  run_chunk "$c"
done

for c in $(all_chunks); do echo "$c: $(status_of "$c")"; done >"$out/summary.txt"
cat "$out/summary.txt"
[ -f "$out/transfers.md" ] && cat "$out/transfers.md"
if grep -qvE ': passed$' "$out/summary.txt"; then
  grep -qE ': (failed|timed out)' "$out/summary.txt" && exit 1
  exit 2
fi
exit 0
