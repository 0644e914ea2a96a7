"""Host<->device traffic before vs after the fix, for the DL003, DL007 and DL008 fixtures.

    python scripts/transfer_table.py [--cuda] [--out transfers.md]

Each fixture marked ``fewer_transfers`` runs before.py and after.py under
tests/transfer_counter.py. With
--cuda (on a GPU) the columns are torch.profiler's Memcpy HtoD/DtoH kernels and CUDA
synchronisations; without it, the conversions counted on CPU by the TorchFunctionMode.
Exits 1 when a fixed program does not do strictly fewer transfers.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures_lib import discover_cases  # noqa: E402
from transfer_counter import count_program  # noqa: E402

CODES = ("DL003", "DL007", "DL008")


def measure(path: Path, cuda: bool):
    t0 = time.perf_counter()
    proc, counts = count_program(path, cuda=cuda)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{path}: failed\n{proc.stderr[-2000:]}")
    if cuda:
        copies = counts["memcpy_htod"] + counts["memcpy_dtoh"]
        return copies, counts["syncs"], wall, proc.stdout
    return counts["conversions"], counts.get("syncs", 0), wall, proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--out", default="-")
    ns = ap.parse_args()
    unit = "memcpy HtoD+DtoH" if ns.cuda else "conversions (CPU count)"
    rows = [f"| fixture | before: {unit} | after | before: syncs | after | wall before (s) | wall after (s) |",
            "|---|---|---|---|---|---|---|"]
    ok = True
    for case in discover_cases():
        if case.code not in CODES or not case.extra.get("fewer_transfers"):
            continue
        if not ns.cuda and case.before == "crash":
            rows.append(f"| {case.id} | (before.py needs a GPU) | | | | | |")
            continue
        b = measure(case.before_path, ns.cuda)
        a = measure(case.after_path, ns.cuda)
        fewer = a[0] < b[0] or (a[0] == b[0] and a[1] < b[1])
        ok &= fewer
        rows.append(f"| {case.id} | {b[0]} | {a[0]} | {b[1]} | {a[1]} | {b[2]:.2f} | {a[2]:.2f} |"
                    + ("" if fewer else " NOT FEWER"))
    text = "\n".join(rows) + "\n"
    if ns.out == "-":
        sys.stdout.write(text)
    else:
        Path(ns.out).write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
