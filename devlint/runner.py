"""Runs the engine over files: read bytes, lint or fix, write back atomically."""

from __future__ import annotations

import difflib
import os
import tempfile
from dataclasses import dataclass, field
from typing import Optional

from devlint.diagnostic import Diagnostic
from devlint.engine import Settings, fix_source, lint_source


@dataclass
class FileOutcome:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: Optional[str] = None  # a one-line problem: the file could not be linted or written
    fixed: int = 0
    diff: str = ""
    changed: bool = False
    new_source: Optional[bytes] = None  # the fixed source, when fixing

    def display_error(self) -> str:
        return f"{self.path}: {self.error}"


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def atomic_write(path: str, data: bytes, expected_old: bytes) -> None:
    """Write ``data`` over ``path`` via a temporary file in the same directory and a rename,
    keeping the permission bits; refuse when the file changed since it was read."""
    if read_bytes(path) != expected_old:
        raise OSError("file changed on disk while devlint was fixing it; not overwritten")
    st = os.stat(path)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".devlint-", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, st.st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    a = old.decode("utf-8", "replace").splitlines(keepends=True)
    b = new.decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"a/{path.lstrip('/')}", f"b/{path.lstrip('/')}"))


def process_file(path: str, display: str, settings: Settings, fix: bool = False,
                 diff: bool = False) -> FileOutcome:
    try:
        source = read_bytes(path)
    except OSError as exc:
        return FileOutcome(display, error=f"cannot read: {exc.strerror or exc}")
    if path.endswith(".ipynb"):
        from devlint.notebook import process_notebook_source
        return process_notebook_source(source, path, display, settings, fix=fix, diff=diff)
    return process_source(source, path, display, settings, fix=fix, diff=diff)


def process_source(source: bytes, path: Optional[str], display: str, settings: Settings,
                   fix: bool = False, diff: bool = False) -> FileOutcome:
    try:
        if not (fix or diff):
            return FileOutcome(display, lint_source(source, display, settings).diagnostics)
        out = fix_source(source, display, settings)
    except RecursionError:
        return FileOutcome(display, error="too deeply nested to analyse")
    res = FileOutcome(display, out.remaining, fixed=out.fixed)
    if not out.converged:
        res.error = "fixes did not converge; file left unchanged" if out.source == source else \
            "fixes did not converge within the round limit"
    if out.source != source:
        res.changed = True
        if diff:
            res.diff = unified_diff(display, source, out.source)
        elif fix and path is not None:
            try:
                atomic_write(path, out.source, source)
            except OSError as exc:
                return FileOutcome(display, out.initial, error=f"cannot write: {exc.strerror or exc}")
    res.new_source = out.source
    return res
