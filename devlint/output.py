"""Output formatters: every format reads the same list of outcomes."""

from __future__ import annotations

import json
from typing import Callable, TextIO

import click

from devlint.runner import FileOutcome

FORMATS: dict[str, Callable] = {}


def formatter(name: str):
    def deco(fn):
        FORMATS[name] = fn
        return fn

    return deco


def _location(d) -> str:
    if d.cell is not None:
        return f"{d.filename}:cell {d.cell}:{d.line}:{d.column}"
    return f"{d.filename}:{d.line}:{d.column}"


@formatter("text")
def text(outcomes: list[FileOutcome], out: TextIO, *, fix: bool, diff: bool, unsafe: bool, color: bool) -> None:
    found = fixable = hidden = fixed = 0
    for o in outcomes:
        if diff and o.diff:
            out.write(o.diff)
        fixed += o.fixed
        for d in o.diagnostics:
            found += 1
            mark = ""
            if d.fix is not None and d.fixable:
                if d.fix.applicability.value == "safe" or unsafe:
                    fixable += 1
                    mark = "[*] "
                else:
                    hidden += 1
            if diff:
                continue
            loc = click.style(_location(d), bold=True) if color else _location(d)
            code = click.style(d.code, fg="red", bold=True) if color else d.code
            out.write(f"{loc}: {mark}{code} {d.message}\n")
    total = found + (fixed if fix or diff else 0)
    if total == 0:
        out.write("All checks passed.\n")
        return
    if diff:
        out.write(f"Would fix {fixed} of {total} findings ({found} would remain).\n")
    elif fix:
        out.write(f"Found {total} findings ({fixed} fixed, {found} remaining).\n")
    else:
        extra = f", {hidden} more with --unsafe-fixes" if hidden else ""
        out.write(f"Found {found} findings ({fixable} fixable with --fix{extra}).\n")


@formatter("json")
def json_format(outcomes: list[FileOutcome], out: TextIO, **_) -> None:
    items = [d.to_dict() for o in outcomes for d in o.diagnostics]
    json.dump(items, out, indent=2)
    out.write("\n")
