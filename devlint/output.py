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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _applies(d, unsafe: bool) -> bool:
    """What ``--fix`` (with ``--unsafe-fixes`` when ``unsafe``) applies: the same test as
    :func:`devlint.settings.applicable`, so the counts shown are the counts fixed."""
    return d.fix is not None and d.fixable and (d.fix.applicability.value == "safe" or unsafe)


class _Style:
    """ANSI styling, or none (``--color``, ``NO_COLOR``, ``FORCE_COLOR``)."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, **kw) -> str:
        return click.style(text, **kw) if self.color else text


def _line(d, mark: str, st: _Style) -> str:
    return f"{st(_location(d), bold=True)}: {mark}{st(d.code, fg='red', bold=True)} {d.message}\n"


def _snippet(d, lines: Optional[list], st: _Style) -> str:
    """The flagged source line(s) with carets under the finding (ruff's "full" format)."""
    if not lines or not 0 < d.line <= len(lines):
        return ""
    last = min(max(d.end_line, d.line), len(lines), d.line + 5)
    width = len(str(last))
    bar = st("|", fg="blue", bold=True)
    pad = " " * width
    out = [f"{pad} {bar}\n"]
    for n in range(d.line, last + 1):
        text = lines[n - 1].rstrip("\r\n")
        out.append(f"{st(str(n).rjust(width), fg='blue', bold=True)} {bar} {text.expandtabs(4)}\n")
        if n == d.line:
            first = lines[n - 1].rstrip("\r\n")
            lead = first[:max(d.column - 1, 0)].expandtabs(4)
            end = d.end_column - 1 if d.end_line == d.line else len(first)
            span = max(1, len(first[d.column - 1:max(end, d.column)].expandtabs(4)))
            out.append(f"{pad} {bar} {' ' * len(lead)}{st('^' * span + ' ' + d.code, fg='red', bold=True)}\n")
    out.append(f"{pad} {bar}\n")
    if d.fix is not None and d.fix.message:
        out.append(f"{pad} {st('=', fg='blue', bold=True)} {st('help', bold=True)}: {d.fix.message}\n")
    return "".join(out) + "\n"


def _summary(outcomes, out: TextIO, *, fix: bool, diff: bool, unsafe: bool, show_fixes: bool,
             errors, found: int, fixable: int, hidden: int, st: _Style) -> None:
    fixed = sum(o.fixed for o in outcomes) if fix or diff else 0
    total = found + fixed
    if diff:
        if total:
            out.write(f"Would fix {fixed} of {_plural(total, 'finding')} ({found} would remain).\n")
        elif not errors:
            out.write("All checks passed.\n")
        return
    if fix:
        changed = [o for o in outcomes if o.changed]
        if show_fixes and changed:
            out.write(f"Fixed {_plural(fixed, 'finding')}:\n")
            for o in changed:
                out.write(f"- {st(o.path, bold=True)}:\n")
                for code, n in sorted((o.fixes or {}).items()):
                    out.write(f"    {n} × {st(code, fg='red', bold=True)} ({_name(code)})\n")
        elif changed:
            for o in changed:
                out.write(f"Fixed {o.path} ({_plural(o.fixed, 'finding')}).\n")
    if total == 0:
        # a path that could not be read is no passed check (exit 2, the error on stderr)
        if not errors:
            out.write("All checks passed.\n")
        return
    if fix:
        out.write(f"Found {_plural(total, 'finding')} ({fixed} fixed, {found} remaining).\n")
        if hidden:
            out.write(f"{_plural(hidden, 'more finding')} fixable with --fix --unsafe-fixes.\n")
    else:
        extra = f", {hidden} more with --unsafe-fixes" if hidden else ""
        out.write(f"Found {_plural(found, 'finding')} ({fixable} fixable with --fix{extra}).\n")


def _name(code: str) -> str:
    from devlint.catalogue import BY_CODE

    info = BY_CODE.get(code)
    return info.name if info is not None else code


def _text(outcomes: list[FileOutcome], out: TextIO, *, fix: bool, diff: bool, unsafe: bool, color: bool,
          full: bool, quiet: bool = False, show_fixes: bool = False, errors=(), sources=None, **_) -> None:
    st = _Style(color)
    found = fixable = hidden = 0
    for o in outcomes:
        if diff and o.diff:
            out.write(_color_diff(o.diff) if color else o.diff)
        lines: dict = {}  # cell (None for a .py file) -> source lines
        for d in _sorted(o):
            found += 1
            mark = ""
            if d.fixable:
                if _applies(d, unsafe):
                    fixable += 1
                    mark = "[*] "
                else:
                    hidden += 1
            if diff:
                continue
            out.write(_line(d, mark, st))
            if full:
                if d.cell not in lines:
                    lines[d.cell] = sources(o.path, d.cell) if sources is not None else None
                out.write(_snippet(d, lines[d.cell], st))
    if not quiet:
        _summary(outcomes, out, fix=fix, diff=diff, unsafe=unsafe, show_fixes=show_fixes, errors=errors,
                 found=found, fixable=fixable, hidden=hidden, st=st)


@formatter("full")
def full(outcomes: list[FileOutcome], out: TextIO, **kw) -> None:
    """Each finding's line, then the source with carets under it (ruff's default)."""
    _text(outcomes, out, full=True, **kw)


@formatter("concise")
def concise(outcomes: list[FileOutcome], out: TextIO, **kw) -> None:
    """One line per finding: `path:line:col: [*] CODE message`."""
    _text(outcomes, out, full=False, **kw)


FORMATS["text"] = concise  # the name of the one-line format before `full` existed


def _color_diff(diff: str) -> str:
    out = []
    for line in diff.splitlines(keepends=True):
        body, eol = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")):]
        if line.startswith(("+++", "---")):
            out.append(click.style(body, bold=True) + eol)
        elif line.startswith("@@"):
            out.append(click.style(body, fg="cyan") + eol)
        elif line.startswith("+"):
            out.append(click.style(body, fg="green") + eol)
        elif line.startswith("-"):
            out.append(click.style(body, fg="red") + eol)
        else:
            out.append(line)
    return "".join(out)


def _json_item(d) -> dict:
    item = d.to_dict()
    item["docs"] = f"devlint rule {d.code}"
    return item


@formatter("json")
def json_format(outcomes: list[FileOutcome], out: TextIO, **_) -> None:
    items = [_json_item(d) for o in outcomes for d in _sorted(o)]
    json.dump(items, out, indent=2)
    out.write("\n")


@formatter("json-lines")
def json_lines(outcomes: list[FileOutcome], out: TextIO, **_) -> None:
    for o in outcomes:
        for d in _sorted(o):
            out.write(json.dumps(_json_item(d)) + "\n")


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
            # GitHub's endColumn is inclusive; ours is one past the end
            end_line, end_col = max(d.end_line, d.line), max(d.end_column - 1, 1)
            if end_line == d.line:
                end_col = max(end_col, d.column)
            out.write(f"::error file={_gh_prop(path)},line={d.line},col={d.column},endLine={end_line},"
                      f"endColumn={end_col},title={_gh_prop(f'devlint ({d.code})')}::"
                      f"{_gh_data(where + d.message)}\n")


# statistics --------------------------------------------------------------------------

def statistics(outcomes: list[FileOutcome], out: TextIO, as_json: bool, unsafe: bool, quiet: bool = False,
               errors=()) -> None:
    counts: dict[str, list] = {}
    for o in outcomes:
        for d in o.diagnostics:
            entry = counts.setdefault(d.code, [d.name, 0, 0])
            entry[1] += 1
            if _applies(d, unsafe):
                entry[2] += 1
    rows = sorted(counts.items(), key=lambda kv: (-kv[1][1], kv[0]))
    if as_json:
        json.dump([{"code": c, "name": n, "count": k, "fixable": f} for c, (n, k, f) in rows], out, indent=2)
        out.write("\n")
        return
    if not rows:
        if not quiet and not errors:
            out.write("All checks passed.\n")
        return
    width = max(len(str(k)) for _, (_, k, _) in rows)
    for code, (name, k, f) in rows:
        mark = "[*]" if f == k else "[-]" if f else "   "
        out.write(f"{k:>{width}}\t{code}\t{mark} {name}\n")
    if not quiet:
        total, fixable = sum(k for _, k, _ in counts.values()), sum(f for _, _, f in counts.values())
        out.write(f"Found {_plural(total, 'finding')} ({fixable} fixable with --fix).\n")


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

