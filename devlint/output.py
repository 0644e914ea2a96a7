"""Output formatters: every format reads the same list of outcomes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional, TextIO
from urllib.parse import quote

import click

from devlint.runner import FileOutcome

FORMATS: dict[str, Callable] = {}


def formatter(name: str):
    def deco(fn):
        FORMATS[name] = fn
        return fn

    return deco


def _sorted(o: FileOutcome) -> list:
    return sorted(o.diagnostics, key=lambda d: d.sort_key())


def _location(d) -> str:
    if d.cell is not None:
        return f"{d.filename}:cell {d.cell}:{d.line}:{d.column}"
    return f"{d.filename}:{d.line}:{d.column}"


@formatter("concise")
def concise(outcomes: list[FileOutcome], out: TextIO, *, fix: bool, diff: bool, unsafe: bool, color: bool,
         **_) -> None:
    found = fixable = hidden = fixed = 0
    for o in outcomes:
        if diff and o.diff:
            out.write(o.diff)
        fixed += o.fixed
        for d in _sorted(o):
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
    items = [d.to_dict() for o in outcomes for d in _sorted(o)]
    json.dump(items, out, indent=2)
    out.write("\n")


@formatter("json-lines")
def json_lines(outcomes: list[FileOutcome], out: TextIO, **_) -> None:
    for o in outcomes:
        for d in _sorted(o):
            out.write(json.dumps(d.to_dict()) + "\n")


# GitHub Actions workflow commands ------------------------------------------------------

def _gh_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(s: str) -> str:
    return _gh_data(s).replace(":", "%3A").replace(",", "%2C")


@formatter("github")
def github(outcomes: list[FileOutcome], out: TextIO, **_) -> None:
    for o in outcomes:
        for d in _sorted(o):
            where = f"cell {d.cell}, line {d.line}: " if d.cell is not None else ""
            path = Path(d.filename).as_posix()
            out.write(f"::error file={_gh_prop(path)},line={d.line},col={d.column},"
                      f"title={_gh_prop(f'devlint ({d.code})')}::{_gh_data(where + d.message)}\n")


# statistics --------------------------------------------------------------------------

def statistics(outcomes: list[FileOutcome], out: TextIO, as_json: bool, unsafe: bool) -> None:
    counts: dict[str, list] = {}
    for o in outcomes:
        for d in o.diagnostics:
            entry = counts.setdefault(d.code, [d.name, 0, 0])
            entry[1] += 1
            if d.fixable and (d.fix.applicability.value == "safe" or unsafe):
                entry[2] += 1
    rows = sorted(counts.items(), key=lambda kv: (-kv[1][1], kv[0]))
    if as_json:
        json.dump([{"code": c, "name": n, "count": k, "fixable": f} for c, (n, k, f) in rows], out, indent=2)
        out.write("\n")
        return
    if not rows:
        out.write("All checks passed.\n")
        return
    width = max(len(str(k)) for _, (_, k, _) in rows)
    for code, (name, k, f) in rows:
        mark = "[*]" if f == k else "[-]" if f else "   "
        out.write(f"{k:>{width}}\t{code}\t{mark} {name}\n")


# SARIF 2.1.0 ----------------------------------------------------------------------------

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _sarif_rules(codes) -> list[dict]:
    from devlint import registry

    rules = []
    for code in codes:
        if code == registry.PARSE_ERROR[0]:
            rules.append({
                "id": code, "name": registry.PARSE_ERROR[1],
                "shortDescription": {"text": "the file could not be parsed"},
                "fullDescription": {"text": "devlint could not parse (or decode) the file, so it was not checked."},
                "help": {"text": "Fix the syntax error or exclude the file.",
                         "markdown": "Fix the syntax error or exclude the file."},
                "defaultConfiguration": {"level": "error"},
            })
            continue
        r = registry.rule_by_code(code)
        if r is None:
            continue
        docs = r.docs()
        rules.append({
            "id": r.code, "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": r.doc_section("What it does") or r.summary},
            "help": {"text": docs or r.summary, "markdown": docs or r.summary},
            "defaultConfiguration": {"level": "error"},
            "properties": {"tags": ["pytorch", "device-placement"], "defaultEnabled": r.default_enabled},
        })
    return rules


def _artifact(filename: str, root: Path) -> dict:
    p = Path(filename).absolute()
    try:
        rel = p.relative_to(root)
    except ValueError:
        return {"uri": p.as_uri()}
    return {"uri": quote(rel.as_posix()), "uriBaseId": "%SRCROOT%"}


@formatter("sarif")
def sarif(outcomes: list[FileOutcome], out: TextIO, *, root: Optional[Path] = None, select=(),
          errors=(), **_) -> None:
    from devlint import __version__

    root = (root or Path.cwd()).absolute()
    codes = sorted({"DL000", *select} | {d.code for o in outcomes for d in o.diagnostics})
    rules = _sarif_rules(codes)
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for o in outcomes:
        for d in _sorted(o):
            where = f"cell {d.cell}, line {d.line}: " if d.cell is not None else ""
            res = {
                "ruleId": d.code,
                "level": "error",
                "message": {"text": where + d.message},
                "locations": [{"physicalLocation": {
                    "artifactLocation": _artifact(d.filename, root),
                    "region": {"startLine": d.line, "startColumn": d.column,
                               "endLine": max(d.end_line, d.line), "endColumn": max(d.end_column, 1)},
                }}],
            }
            if d.code in index:
                res["ruleIndex"] = index[d.code]
            props = {}
            if d.cell is not None:
                props["cell"] = d.cell
            if d.fix is not None:
                props["fix"] = d.fix.to_dict()
            if props:
                res["properties"] = props
            results.append(res)
    notes = [{"level": "error", "message": {"text": str(e)}} for e in errors]
    run = {
        "tool": {"driver": {"name": "devlint", "version": __version__, "semanticVersion": __version__,
                            "rules": rules}},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": root.as_uri().rstrip("/") + "/"}},
        "columnKind": "unicodeCodePoints",
        "invocations": [{"executionSuccessful": not notes, "toolExecutionNotifications": notes}],
        "results": results,
    }
    json.dump({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, out, indent=2)
    out.write("\n")


FORMATS["text"] = concise
