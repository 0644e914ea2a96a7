#!/usr/bin/env python
"""Score a devlint executable on the fixture suite: per rule, the expected findings
(case.toml `lines` of every before.py, traps included) found, missed, and the extra
findings (lines nobody expects: false alarms on traps and bug fixtures alike).

    python scripts/fixture_scores.py                      # the devlint on PATH
    python scripts/fixture_scores.py --devlint OTHER/bin/devlint --json out.json

Used for the before/after table in docs/notes/ (an older devlint run on today's fixtures).
A measurement, not a test: it asserts nothing."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devlint", default=shutil.which("devlint") or "devlint")
    ap.add_argument("--json", help="write the per-fixture results here")
    args = ap.parse_args()
    expected, found, extra, cases, traps_clean, traps = Counter(), Counter(), Counter(), Counter(), Counter(), Counter()
    rows = []
    for meta in sorted(FIXTURES.glob("DL*/*/case.toml")):
        case = tomllib.loads(meta.read_text())
        code = meta.parent.parent.name
        select = ",".join(case.get("select", [code]))
        want = set(case.get("lines", []))
        out = subprocess.run([args.devlint, "check", "--isolated", "--no-cache", "--select", select,
                              "--output-format", "json", "--exit-zero", str(meta.parent / "before.py")],
                             capture_output=True, text=True)
        try:
            got = {d["line"] for d in json.loads(out.stdout or "[]") if d["code"] == code}
        except json.JSONDecodeError:
            got = set()
            print(f"{meta.parent}: {out.stderr.strip()[:200]}", file=sys.stderr)
        cases[code] += 1
        expected[code] += len(want)
        found[code] += len(want & got)
        extra[code] += len(got - want)
        if not (meta.parent / "after.py").exists():
            traps[code] += 1
            traps_clean[code] += not got
        rows.append({"case": f"{code}/{meta.parent.name}", "expected": sorted(want), "got": sorted(got)})
    print("| rule | fixtures | expected findings | found | missed | extra findings | traps silent |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for code in sorted(cases):
        print(f"| {code} | {cases[code]} | {expected[code]} | {found[code]} | {expected[code] - found[code]} "
              f"| {extra[code]} | {traps_clean[code]}/{traps[code]} |")
    tot = lambda c: sum(c.values())  # noqa: E731
    print(f"| all | {tot(cases)} | {tot(expected)} | {tot(found)} | {tot(expected) - tot(found)} | {tot(extra)} "
          f"| {tot(traps_clean)}/{tot(traps)} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
