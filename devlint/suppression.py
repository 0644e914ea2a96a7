"""Suppressions: ``# noqa`` comments, file-level ``# devlint: noqa``, baselines, the
unused-suppression report (DL100) and ``--add-noqa``.

Comments are found with :mod:`tokenize`, so ``"# noqa"`` inside a string never counts.
A suppressed finding is dropped inside the engine, before the fix loop: it is neither
reported nor fixed.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tokenize
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Optional

from devlint import lazyre
from devlint.diagnostic import Diagnostic
from devlint.rule import Rule

if TYPE_CHECKING:
    from devlint.settings import Settings

_CODE = r"[A-Za-z]+[0-9]+"
_CODES = rf"(?P<codes>{_CODE}(?:[\s,]+{_CODE})*)"
LINE_NOQA = lazyre.compile(rf"#\s*noqa\b(?:\s*:\s*{_CODES})?", re.I)
FILE_NOQA = lazyre.compile(rf"^#\s*devlint\s*:\s*noqa\b(?:\s*:\s*{_CODES})?", re.I)
_CODE_RE = lazyre.compile(_CODE)
UNSUPPRESSIBLE = frozenset({"DL000"})  # a file that cannot be parsed is never silently skipped


class UnusedNoqa(Rule):
    """
    ## What it does
    Reports `# noqa: DLxxx` comments and `# devlint: noqa[: DLxxx]` file directives that
    suppress nothing: no finding of the named (and selected) rule is reported there.

    ## Why is this bad?
    A stale suppression hides the next real bug on that line. Once a finding is fixed
    its `# noqa` should go too.

    ## Example
    ```python
    x = torch.ones(2).to(device)  # noqa: DL002
    ```

    ## Use instead
    ```python
    x = torch.ones(2).to(device)
    ```

    ## Fix safety
    No fix: delete the code (or the comment) by hand. Only codes of selected devlint
    rules are judged; a bare `# noqa` and codes of other tools (`E501`) are never
    reported, since other linters may rely on them. Off by default: select `DL100`.
    """

    code = "DL100"
    # name, summary, default and prefilter: devlint/catalogue.py
    VALID = ["import torch\nx = torch.ones(2).cuda()  # noqa: DL002\n"]
    INVALID = []


@dataclass
class Directive:
    line: int  # 1-based
    column: int  # 1-based, of the `#`
    end_column: int  # 1-based, one past the end of the comment
    codes: Optional[tuple[str, ...]]  # None: bare (suppresses everything)
    file_level: bool
    used: set = field(default_factory=set)


def scan(source: bytes) -> list[Directive]:
    """Every suppression directive in ``source`` (comments only, never strings)."""
    out: list[Directive] = []
    for line, col, text, own_line in _comments(source):
        m = FILE_NOQA.match(text) if own_line else None
        if m is not None:
            out.append(Directive(line, col + 1, col + len(text) + 1, _codes(m), True))
            continue
        m = LINE_NOQA.search(text)
        if m is not None:
            out.append(Directive(line, col + 1, col + len(text) + 1, _codes(m), False))
    return out


def _codes(m: re.Match) -> Optional[tuple[str, ...]]:
    c = m.group("codes")
    return tuple(x.upper() for x in _CODE_RE.findall(c)) if c else None


# Comments and string literals in one left-to-right scan: a `#` inside a string is eaten by
# the string, a quote inside a comment by the comment. Linear, and far cheaper than
# `tokenize` (pure Python on 3.11); it agrees with `tokenize` on every file of the torch
# sources (tests/test_suppression.py). Only files that mention `noqa` are scanned.
_LEXEME = lazyre.compile(
    rb"(?P<comment>#[^\r\n]*)"
    rb'|"""(?:[^"\\]|\\(?:\r\n|.)|"(?!""))*"""'
    rb"|'''(?:[^'\\]|\\(?:\r\n|.)|'(?!''))*'''"
    rb'|"(?:[^"\\\r\n]|\\(?:\r\n|.))*"'
    rb"|'(?:[^'\\\r\n]|\\(?:\r\n|.))*'",
    re.S,
)


def _comments(source: bytes):
    """(line, column, text, whether the comment is alone on its line) for every comment."""
    line, pos = 1, 0  # the line number of offset `pos`
    for m in _LEXEME.finditer(source):
        if m.lastgroup != "comment":
            continue
        start = m.start()
        line += source.count(b"\n", pos, start)
        pos = start
        prefix = source[source.rfind(b"\n", 0, start) + 1:start]
        text = m.group().decode("utf-8", "replace").rstrip("\r")
        yield line, len(prefix.decode("utf-8", "replace")), text, not prefix.strip()


def line_hash(text: str) -> str:
    """The baseline key of a source line: its text without surrounding whitespace."""
    return hashlib.sha256(text.strip().encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _lines(source: bytes) -> list[str]:
    return source.decode("utf-8", "replace").splitlines()


def suppress(source: bytes, filename: str, diags: list[Diagnostic], reports: list, settings: "Settings"):
    """Drop suppressed findings (``# noqa``, file directives, baseline) and add DL100."""
    want_unused = "DL100" in settings.select
    baseline = getattr(settings, "baseline", frozenset())
    if (not diags and not want_unused) or (b"noqa" not in source and not baseline):
        return diags, reports
    directives = scan(source) if b"noqa" in source else []
    by_line: dict[int, list[Directive]] = {}
    file_level = [d for d in directives if d.file_level]
    for d in directives:
        if not d.file_level:
            by_line.setdefault(d.line, []).append(d)
    lines = _lines(source) if baseline else []
    keep_d, keep_r = [], []
    for i, diag in enumerate(diags):
        if diag.code in UNSUPPRESSIBLE or not _suppressed(diag, by_line, file_level, lines, baseline):
            keep_d.append(diag)
            if reports:
                keep_r.append(reports[i])
    if want_unused and directives:
        extra = unused(directives, settings.select, filename)
        keep_d.extend(extra)
    return keep_d, keep_r


def _suppressed(diag: Diagnostic, by_line, file_level, lines, baseline) -> bool:
    # a finding that stands for others on the same expression (`Diagnostic.also`) is
    # suppressed by any of its codes
    codes = diag.codes
    hit = False
    for d in (*file_level, *by_line.get(diag.line, ())):
        if d.codes is None:
            d.used.add(diag.code)
            hit = True
            continue
        named = [c for c in codes if c in d.codes]
        if named:
            d.used.update(named)
            hit = True
    if not hit and baseline and 0 < diag.line <= len(lines):
        h = line_hash(lines[diag.line - 1])
        hit = any((c, h) in baseline for c in codes)
    return hit


def unused(directives: list[Directive], selected: Iterable[str], filename: str) -> list[Diagnostic]:
    selected = set(selected)
    out = []
    for d in directives:
        if d.codes is None:
            if not d.file_level or d.used:
                continue  # a bare `# noqa` may belong to another linter
            msg = "`# devlint: noqa` suppresses nothing in this file"
        else:
            stale = [c for c in d.codes if c.startswith("DL") and c in selected and c not in d.used]
            if not stale:
                continue
            what = "file directive" if d.file_level else "`# noqa`"
            msg = f"unused {what} code{'s' if len(stale) > 1 else ''}: {', '.join(stale)}"
        out.append(Diagnostic(UnusedNoqa.code, UnusedNoqa.name, msg, filename,
                              d.line, d.column, d.line, d.end_column, None))
    return out


# ---------------------------------------------------------------------------------
# baseline files
# ---------------------------------------------------------------------------------

BASELINE_VERSION = 1


class BaselineError(ValueError):
    pass


def baseline_entries(path_key: str, source_lines: list[str], diags: list[Diagnostic]) -> list[dict]:
    out = []
    for d in diags:
        text = source_lines[d.line - 1] if 0 < d.line <= len(source_lines) else ""
        e = {"path": path_key, "code": d.code, "hash": line_hash(text)}
        if d.cell is not None:
            e["cell"] = d.cell
        out.append(e)
    return out


def write_baseline(path: str, entries: list[dict]) -> None:
    entries = sorted({json.dumps(e, sort_keys=True) for e in entries if e["code"] not in UNSUPPRESSIBLE})
    data = {"devlint-baseline": BASELINE_VERSION, "findings": [json.loads(e) for e in entries]}
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")


def read_baseline(path: str) -> dict[str, frozenset]:
    """path key -> frozenset of (code, line hash)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read baseline: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BaselineError(f"{path}: not a devlint baseline (invalid JSON: {exc})") from None
    if not isinstance(data, dict) or data.get("devlint-baseline") != BASELINE_VERSION \
            or not isinstance(data.get("findings"), list):
        raise BaselineError(f"{path}: not a devlint baseline (version {BASELINE_VERSION})")
    out: dict[str, set] = {}
    for e in data["findings"]:
        if not (isinstance(e, dict) and all(isinstance(e.get(k), str) for k in ("path", "code", "hash"))):
            raise BaselineError(f"{path}: malformed baseline entry {e!r}")
        out.setdefault(e["path"], set()).add((e["code"], e["hash"]))
    return {k: frozenset(v) for k, v in out.items()}


# ---------------------------------------------------------------------------------
# --add-noqa
# ---------------------------------------------------------------------------------


def add_noqa(source: bytes, diags: list[Diagnostic]) -> tuple[bytes, int, int]:
    """Append ``# noqa: CODE`` to each finding's line (merging into an existing ``# noqa:``
    comment). Returns (new source, lines changed, findings that could not be suppressed
    because their line ends inside a string or a backslash continuation)."""
    want: dict[int, list[str]] = {}
    for d in diags:
        if d.code in UNSUPPRESSIBLE:
            continue
        codes = want.setdefault(d.line, [])
        if d.code not in codes:
            codes.append(d.code)
    if not want:
        return source, 0, 0
    ends = _commentable_lines(source)
    if ends is None:
        return source, 0, sum(len(v) for v in want.values())
    existing = {}
    for line, col, text, _own in _comments(source):
        existing[line] = (col, text)
    lines = source.splitlines(keepends=True)
    changed = skipped = 0
    for lineno, codes in sorted(want.items()):
        if lineno not in ends or lineno > len(lines):
            skipped += len(codes)
            continue
        raw = lines[lineno - 1]
        body = raw.rstrip(b"\r\n")
        eol = raw[len(body):]
        found = existing.get(lineno)
        if found is not None:
            col, text = found
            m = LINE_NOQA.search(text)
            start = _byte_col(body, col)
            comment = body[start:].decode("utf-8")
            if m is not None and m.group("codes"):
                have = [c.upper() for c in _CODE_RE.findall(m.group("codes"))]
                add = [c for c in codes if c not in have]
                new_comment = comment[:m.end("codes")] + ", " + ", ".join(add) + comment[m.end("codes"):]
            elif m is not None:
                continue  # a bare `# noqa` already suppresses everything
            else:
                new_comment = comment.rstrip() + "  # noqa: " + ", ".join(codes)
            body = body[:start] + new_comment.encode("utf-8")
        else:
            body = body.rstrip() + b"  # noqa: " + ", ".join(codes).encode()
        lines[lineno - 1] = body + eol
        changed += 1
    new = b"".join(lines)
    if _code_tokens(new) != _code_tokens(source):
        return source, 0, sum(len(v) for v in want.values())  # never change code
    return new, changed, skipped


def _byte_col(line: bytes, char_col: int) -> int:
    return len(line.decode("utf-8")[:char_col].encode("utf-8"))


def _commentable_lines(source: bytes) -> Optional[set[int]]:
    """Lines whose end is outside any string and not continued with a backslash."""
    rows: set[int] = set()
    try:
        for tok in tokenize.tokenize(io.BytesIO(source).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT):
                rows.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    return rows


def _code_tokens(source: bytes) -> Optional[list]:
    try:
        return [(t.type, t.string) for t in tokenize.tokenize(io.BytesIO(source).readline)
                if t.type not in (tokenize.COMMENT, tokenize.NL)]
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
