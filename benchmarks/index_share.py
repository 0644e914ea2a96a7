#!/usr/bin/env python
"""How much of a cold run the project index costs, timed inside one process.

    python benchmarks/index_share.py                # torch/{nn,optim,utils,cuda,distributed}, 3 rounds
    python benchmarks/index_share.py --rounds 5 src/

`bench.py` measures the index by running devlint twice, with and without it
(`DEVLINT_NO_PROJECT=1`), and subtracting. On a shared machine the same command varies by
10-30% from run to run, more than the index costs, so that difference can read anywhere from
-3% to +20%. This script instead runs devlint once per round, in a fresh process of its own (`--no-cache
--jobs 1`; the index keeps memos per process), and adds up the CPU time spent inside the index: every method of
`devlint.project.ProjectIndex`, the outermost call only. Both parts of the ratio come from
the same run, so a machine that is busier in one round slows both alike.

What it does not count: the rules' own extra work with the facts the index hands them
(a cross-file guard read, a project saver checked). Under cProfile that work is small
(docs/performance.md). A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import BASE_ENV, TORCH_DIRS, torch_dirs  # noqa: E402


def instrument() -> list:
    """Wrap every ProjectIndex method with a CPU timer of the outermost call; returns the
    accumulator [seconds, calls]."""
    import devlint.project as project

    spent = [0.0, 0]
    depth = [0]

    def wrap(fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            depth[0] += 1
            t = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    spent[0] += time.process_time() - t
                    spent[1] += 1
        return timed

    for name, fn in list(vars(project.ProjectIndex).items()):
        if inspect.isfunction(fn) and name != "__init__":
            setattr(project.ProjectIndex, name, wrap(fn))
    return spent


def one_round(paths: list) -> None:
    """One cold run in this process; prints `total spent calls` (the index keeps per-process
    memos, so every round needs a fresh process)."""
    spent = instrument()
    from click.testing import CliRunner

    from devlint.cli import main as cli

    t = time.process_time()
    result = CliRunner().invoke(cli, ["check", "--no-cache", "--jobs", "1", "--exit-zero", "-q", *paths])
    total = time.process_time() - t
    if result.exit_code != 0:
        sys.exit(f"devlint failed ({result.exit_code}): {result.output[-2000:]}")
    print(total, spent[0], spent[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="directories/files to lint (default: parts of the installed torch)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    paths = args.paths or torch_dirs(TORCH_DIRS)
    if os.environ.get("DEVLINT_NO_PROJECT") == "1":
        sys.exit("DEVLINT_NO_PROJECT=1 is set: there is no index to time")
    if args.one:
        one_round(paths)
        return
    shares = []
    for r in range(1, args.rounds + 1):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", *paths],
                             capture_output=True, text=True, env=BASE_ENV)
        if out.returncode != 0:
            sys.exit(out.stderr[-2000:] or out.stdout[-2000:])
        total, spent, calls = out.stdout.split()[-3:]
        total, spent = float(total), float(spent)
        rest = total - spent
        shares.append(spent / rest)
        print(f"  round {r}: {total:6.2f} s CPU, index {spent:5.2f} s in {calls} calls: "
              f"{100 * spent / total:4.1f}% of the run, +{100 * spent / rest:4.1f}% on top of the rest")
    median = statistics.median(shares)
    print(f"{'ok  ' if median <= 0.10 else 'MISS'} project index costs <= 10% on top of the rest of a cold run: "
          f"+{100 * median:.1f}% (median of {len(shares)}; spread {100 * min(shares):.1f}-{100 * max(shares):.1f}%)")


if __name__ == "__main__":
    main()
