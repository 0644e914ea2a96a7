"""Jupyter notebooks: lint and fix the code cells of an ``.ipynb`` file.

The code cells are joined into one Python module (so a device variable defined in
cell 1 is seen in cell 5, and a fix inserts it once), separated by marker comments.
The statement a timing line magic runs (``%timeit f(x.cuda())``, ``%time y = g(x)``) is
Python the notebook executes, so it is linted as such: the line becomes the statement itself,
tagged with a trailing comment, and the magic's prefix is put back after fixing (findings on
it are reported at their columns in the cell). Other IPython syntax (``%magic``, ``!shell``,
``x = !cmd``, ``obj?``, ``%%cell`` magics) is
never parsed as Python: each such line becomes a placeholder statement
(``import devlint_magic_<nonce>_<k>``: a statement valid at any indentation that, like
the magics that usually open a notebook, keeps the imports block together so a fix's
device variable goes after ``import torch``), and is put back verbatim after fixing. Findings are mapped back to
``cell N, line L`` (N counts every cell, markdown included, from 1).

A code cell in a section whose markdown heading names the notebook's settings (``# Setting``,
``## Hyperparameters``, ``### Configuration``) gets ``settings`` after its marker: the notebook
tells its reader to edit what those cells assign before running the rest
(``devlint.analysis.guards`` reads it).

``--fix`` rewrites only the ``source`` of the cells that changed and keeps outputs,
metadata and the file's JSON formatting (indent, key order, ASCII escaping, final
newline). A notebook whose formatting cannot be reproduced exactly is reported and left
unchanged rather than reformatted.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import json
import re
import tokenize
from dataclasses import replace

from devlint import lazyre
from devlint.diagnostic import Diagnostic


class NotebookError(ValueError):
    pass


SETTINGS_TAG = "settings"  # after a code cell's marker: the cell is in the notebook's settings section
_HEADING = lazyre.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", re.M)
# the words of a heading that names a settings section, whatever its numbering ("2. Settings")
_SETTINGS_WORDS = frozenset({
    "setting", "settings", "config", "configs", "configuration", "configurations", "parameters",
    "params", "hyperparameters", "hyper-parameters", "hparams", "options", "arguments", "constants",
})


def _settings_heading(cell: dict) -> "bool | None":
    """For a markdown cell: whether its last heading names a settings section (None: no heading,
    the section goes on). A heading is short (four words at most), as section titles are."""
    try:
        text = _source_text(cell)
    except NotebookError:
        return None
    headings = _HEADING.findall(text)
    if not headings:
        return None
    words = re.findall(r"[a-z][a-z-]*", headings[-1].lower())
    return 0 < len(words) <= 4 and any(w in _SETTINGS_WORDS for w in words)


_MAGIC_START = lazyre.compile(r"^\s*(?:[%!?/,;]|[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[!%])")
_HELP = lazyre.compile(r"^\s*[A-Za-z_][\w.\[\]()'\"]*\?{1,2}\s*$")
# `%timeit f(x)` / `%time y = f(x)` without options: the rest of the line is a Python statement
_TIMED = lazyre.compile(r"^([ \t]*)(%time(?:it)?[ \t]+)(?![-\s])(.*\S)[ \t]*$")


def _timed_statement(bare: str):
    """``(indent, prefix, statement)`` of a timing line magic whose rest is one simple Python
    statement on its own, else None."""
    m = _TIMED.match(bare)
    if m is None or m.group(3).endswith("\\"):
        return None
    try:
        tree = ast.parse(m.group(3))
    except (SyntaxError, ValueError):
        return None
    if len(tree.body) != 1 or isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                         ast.If, ast.For, ast.While, ast.With, ast.Try)):
        return None
    return m.group(1), m.group(2), m.group(3)


def _is_magic(line: str) -> bool:
    return bool(_MAGIC_START.match(line) or _HELP.match(line))


def _incomplete(buf: str) -> bool:
    """True while ``buf`` is an unfinished logical line (open bracket/string, ``\\``)."""
    try:
        for _ in tokenize.generate_tokens(io.StringIO(buf).readline):
            pass
    except tokenize.TokenError:
        return True
    except (SyntaxError, ValueError):
        return False
    return False


def _source_text(cell: dict) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        if not all(isinstance(s, str) for s in src):
            raise NotebookError("a cell's source is not text")
        return "".join(src)
    if not isinstance(src, str):
        raise NotebookError("a cell's source is not text")
    return src


# a `\\uXXXX` escape (not an escaped backslash followed by `u`): group 1 the backslash pairs before it
_ESCAPE = lazyre.compile(r"(?<!\\)((?:\\\\)*)\\u([0-9a-fA-F]{4})")


def _fold_escapes(text: str) -> str:
    return _ESCAPE.sub(lambda m: m.group(1) + "\\u" + m.group(2).lower(), text)


class Notebook:
    """One parsed notebook and its code cells as one Python module."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        try:
            self.text = raw.decode("utf-8")
            self.data = json.loads(self.text)
        except (UnicodeDecodeError, ValueError) as exc:
            raise NotebookError(f"not a valid notebook (invalid JSON: {exc})") from None
        if not isinstance(self.data, dict) or not isinstance(self.data.get("cells"), list):
            raise NotebookError("not a notebook in nbformat 4 (no `cells` list)")
        # deterministic (same notebook, same module: caches work), and no user text has it
        self.nonce = hashlib.sha256(raw).hexdigest()[:10]
        self.cells: list[dict] = self.data["cells"]
        self.python_kernel = self._is_python()
        self.code: list[tuple[int, str]] = []  # (index into cells, original source text)
        self.magics: list[str] = []
        self.shifts: dict[int, int] = {}  # Python line of a timed statement -> its magic prefix's width
        parts: list[str] = []
        self.starts: list[tuple[int, int, int]] = []  # (first python line, n lines, cell index)
        line = 1
        settings = False  # in a section whose heading names the notebook's settings
        for i, cell in enumerate(self.cells):
            if isinstance(cell, dict) and cell.get("cell_type") == "markdown":
                heading = _settings_heading(cell)
                settings = settings if heading is None else heading
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            text = _source_text(cell)
            if text.lstrip().startswith("%%"):
                continue  # a cell magic: the whole cell is not Python
            timed: dict = {}
            body = self._mask(text, timed)
            if body and not body.endswith("\n"):
                body += "\n"
            tag = f" {SETTINGS_TAG}" if settings else ""
            parts.append(f"{self._marker(len(self.code))}{tag}\n")
            line += 1
            self.shifts.update((line + k, width) for k, width in timed.items())
            n = body.count("\n")
            self.starts.append((line, n, i))
            line += n
            parts.append(body)
            self.code.append((i, text))
        self.python = "".join(parts).encode("utf-8")

    def _is_python(self) -> bool:
        meta = self.data.get("metadata") or {}
        lang = None
        if isinstance(meta, dict):
            info = meta.get("language_info")
            spec = meta.get("kernelspec")
            if isinstance(info, dict) and isinstance(info.get("name"), str):
                lang = info["name"]
            elif isinstance(spec, dict) and isinstance(spec.get("language"), str):
                lang = spec["language"]
        return lang is None or lang.lower() in ("python", "python3", "ipython", "ipython3")

    def _marker(self, k: int) -> str:
        return f"# devlint-cell-{self.nonce}-{k}"

    def _mask(self, text: str, timed: dict) -> str:
        out: list[str] = []
        buf = ""
        in_magic = False
        out_indent = ""
        for line in text.splitlines(keepends=True):
            bare = line.rstrip("\r\n")
            stmt = _timed_statement(bare) if not in_magic and not buf and bare.lstrip().startswith("%time") else None
            if stmt is not None:
                indent, prefix, code = stmt
                timed[len(out)] = len(prefix)
                out.append(f"{indent}{code}  # devlint-timed-{self.nonce}-{len(self.magics)}" + line[len(bare):])
                self.magics.append(bare)
                continue
            if in_magic or (not buf and _is_magic(bare)):
                indent = bare[: len(bare) - len(bare.lstrip())] if not in_magic else out_indent
                if not in_magic:
                    out_indent = indent
                out.append(f"{indent}import devlint_magic_{self.nonce}_{len(self.magics)}"
                           + line[len(bare):])
                self.magics.append(bare)
                in_magic = bare.endswith("\\")
                continue
            out.append(line)
            buf += line
            if not _incomplete(buf):
                buf = ""
        return "".join(out)

    # locations -------------------------------------------------------------------------
    def locate(self, line: int) -> tuple[int, int]:
        """Python line -> (cell number from 1, line in the cell from 1)."""
        best = self.starts[0] if self.starts else (1, 0, 0)
        for start in self.starts:
            if start[0] <= line:
                best = start
        first, n, idx = best
        return idx + 1, max(1, min(line - first + 1, max(n, 1)))

    def map_diagnostic(self, d: Diagnostic) -> Diagnostic:
        cell, line = self.locate(d.line)
        end_cell, end_line = self.locate(d.end_line)
        column = d.column + self.shifts.get(d.line, 0)  # (a timed statement sits after its `%timeit `)
        if end_cell != cell:
            end_line, end_col = line, column
        else:
            end_col = d.end_column + self.shifts.get(d.end_line, 0)
        return replace(d, cell=cell, line=line, column=column, end_line=end_line, end_column=end_col)

    # writing -----------------------------------------------------------------------------
    def new_sources(self, python: bytes) -> dict[int, str]:
        """Cell index -> new source text, for the cells a fix changed."""
        text = python.decode("utf-8")
        marker = re.compile(rf"^# devlint-cell-{self.nonce}-(\d+)(?: {SETTINGS_TAG})?\r?\n?", re.M)
        pieces = marker.split(text)
        head, rest = pieces[0], pieces[1:]
        ids = [int(x) for x in rest[0::2]]
        if ids != list(range(len(self.code))):
            raise NotebookError("a fix moved a cell boundary; notebook left unchanged")
        bodies = rest[1::2]
        if head and bodies:
            bodies[0] = head + bodies[0]
        magic = re.compile(rf"^([ \t]*)import devlint_magic_{self.nonce}_(\d+)$", re.M)
        used: list[int] = []

        def restore(m: re.Match) -> str:
            k = int(m.group(2))
            used.append(k)
            original = self.magics[k]
            if not original.startswith(m.group(1)) or original[len(m.group(1)):][:1] in (" ", "\t"):
                return m.group(1) + original.lstrip()
            return original

        timed = re.compile(rf"^([ \t]*)(.*?)  # devlint-timed-{self.nonce}-(\d+)$", re.M)

        def retime(m: re.Match) -> str:
            k = int(m.group(3))
            used.append(k)
            was = _TIMED.match(self.magics[k])
            if (m.group(1), m.group(2)) == (was.group(1), was.group(3)):
                return self.magics[k]  # untouched: the line as it was, trailing blanks and all
            line = f"{m.group(1)}{was.group(2)}{m.group(2)}"
            if _timed_statement(line) is None:  # (a fix that spread the statement over lines)
                raise NotebookError("a fix split the statement of a timing magic; notebook left unchanged")
            return line

        changed: dict[int, str] = {}
        for (idx, original), body in zip(self.code, bodies):
            new = timed.sub(retime, magic.sub(restore, body))
            if not original.endswith("\n") and new.endswith("\n"):
                new = new[:-1]
            if new != original:
                changed[idx] = new
        if sorted(used) != list(range(len(self.magics))):
            raise NotebookError("a fix moved an IPython magic line; notebook left unchanged")
        return changed

    def render(self, changed: dict[int, str]) -> bytes:
        """The notebook's bytes with the changed cells' sources, formatted like the input."""
        dump = self._dumper()
        for idx, src in changed.items():
            cell = self.cells[idx]
            if isinstance(cell.get("source"), list):
                cell["source"] = src.splitlines(keepends=True)
            else:
                cell["source"] = src
        return dump(self.data).encode("utf-8")

    def _dumper(self):
        """A serialiser that writes this notebook back byte for byte. ``\\u001B``-style
        escapes (uppercase hex, which Python's json never writes) are kept when the file
        uses them throughout; when it mixes cases, the notebook is written with standard
        JSON escaping (lowercase hex), the only difference from the input."""
        text = self.text
        trailing = text[len(text.rstrip("\r\n")):]
        m = re.match(r"\{\r?\n([ \t]+)", text)
        indents: list = [m.group(1) if m and "\t" in m.group(1) else len(m.group(1))] if m else [None]
        data = json.loads(text)
        escapes = {e for _, e in _ESCAPE.findall(text)}
        upper = bool(escapes) and all(e == e.upper() for e in escapes) and any(e != e.lower() for e in escapes)
        folded = _fold_escapes(text)
        standard = None
        for indent in indents:
            for ascii_ in (False, True):
                for seps in ((",", ": "), (", ", ": ")):
                    def dump(obj, indent=indent, ascii_=ascii_, seps=seps, upper=False):
                        body = json.dumps(obj, indent=indent, ensure_ascii=ascii_,
                                          separators=seps if indent is not None else None)
                        if upper:
                            body = _ESCAPE.sub(lambda m: m.group(1) + "\\u" + m.group(2).upper(), body)
                        if "\r\n" in trailing:
                            body = body.replace("\n", "\r\n")
                        return body + trailing
                    out = dump(data)
                    if out == text:
                        return dump
                    if upper and dump(data, upper=True) == text:
                        return functools.partial(dump, upper=True)
                    if standard is None and _fold_escapes(out) == folded:
                        standard = dump
        if standard is not None:
            return standard  # only the case of some \\u escapes differs: standard JSON escaping
        raise NotebookError("cannot rewrite without changing its JSON formatting; left unchanged")

    def cell_diff(self, display: str, changed: dict[int, str]) -> str:
        out = []
        for idx in sorted(changed):
            old = _source_text(self.cells[idx]).splitlines(keepends=True)
            new = changed[idx].splitlines(keepends=True)
            for seq in (old, new):
                if seq and not seq[-1].endswith("\n"):
                    seq[-1] += "\n"
            name = f"{display.lstrip('/')}:cell {idx + 1}"
            import difflib  # only --diff needs it (~13 ms to import)
            out.append("".join(difflib.unified_diff(old, new, f"a/{name}", f"b/{name}")))
        return "".join(out)
