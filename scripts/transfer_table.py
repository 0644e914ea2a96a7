"""Host<->device traffic before vs after the fix, for the DL003, DL007 and DL008 fixtures.

    python scripts/transfer_table.py [--cuda] [--out transfers.md] [--jobs N]

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
from concurrent.futures import ThreadPoolExecutor, as_completed
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


def _row(case, cuda: bool):
    """(table row, fewer?) for one fixture: before.py and after.py measured in turn."""
    b = measure(case.before_path, cuda)
    a = measure(case.after_path, cuda)
    fewer = a[0] < b[0] or (a[0] == b[0] and a[1] < b[1])
    return (f"| {case.id} | {b[0]} | {a[0]} | {b[1]} | {a[1]} | {b[2]:.2f} | {a[2]:.2f} |"
            + ("" if fewer else " NOT FEWER")), fewer


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--out", default="-")
    ap.add_argument("--jobs", type=int, default=1,
                    help="fixtures measured at once (each program in its own process; the "
                         "counts are per process, only the wall times feel the sharing)")
    ns = ap.parse_args()
    unit = "memcpy HtoD+DtoH" if ns.cuda else "conversions (CPU count)"
    head = [f"| fixture | before: {unit} | after | before: syncs | after | wall before (s) | wall after (s) |",
            "|---|---|---|---|---|---|---|"]
    cases, rows = [], {}
    for case in discover_cases():
        if case.code not in CODES or not case.extra.get("fewer_transfers"):
            continue
        cases.append(case)
        if not ns.cuda and case.before == "crash":
            rows[case.id] = (f"| {case.id} | (before.py needs a GPU) | | | | | |", True)

    def write() -> None:  # after every row: a run cut off by a time limit keeps what it measured
        text = "\n".join(head + [rows[c.id][0] for c in cases if c.id in rows]) + "\n"
        if ns.out == "-":
            return
        Path(ns.out).write_text(text)

    todo = [c for c in cases if c.id not in rows]
    with ThreadPoolExecutor(max_workers=max(1, ns.jobs)) as pool:
        futures = {pool.submit(_row, c, ns.cuda): c for c in todo}
        for fut in as_completed(futures):
            rows[futures[fut].id] = fut.result()
            print(rows[futures[fut].id][0], file=sys.stderr, flush=True)  # progress, in the log
            write()
    write()
    if ns.out == "-":
        sys.stdout.write("\n".join(head + [rows[c.id][0] for c in cases]) + "\n")
    return 0 if all(rows[c.id][1] for c in cases) else 1


if __name__ == "__main__":
    raise SystemExit(main())
