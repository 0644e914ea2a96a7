"""Paths -> the Python files to lint, in a stable order."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

SKIP_DIRS = frozenset({"__pycache__", "build", "dist", "node_modules", "site-packages",
                       "venv", "env", ".venv", ".git", ".hg", ".tox", ".nox", ".eggs"})
SUFFIXES = (".py", ".ipynb")


@dataclass(frozen=True)
class PathError:
    path: str
    problem: str
    warning: bool = False  # skipped on purpose (printed as a warning; the exit code is unaffected)

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def _skip_dir(entry: os.DirEntry) -> bool:
    name = entry.name
    if name in SKIP_DIRS or name.startswith(".") or name.endswith(".egg-info"):
        return True
    return os.path.exists(os.path.join(entry.path, "pyvenv.cfg"))  # a virtualenv


def discover(paths: list[str], skip=None) -> tuple[list[str], list[PathError]]:
    """Files given explicitly are always linted; directories are walked. ``skip(path, is_dir)``
    (config excludes, .gitignore) prunes what the walk finds."""
    files: list[str] = []
    errors: list[PathError] = []
    seen: set[str] = set()

    def add(p: str) -> None:
        key = os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            files.append(p)

    for raw in paths:
        try:
            st = os.stat(raw)
        except OSError as exc:
            errors.append(PathError(raw, _stat_problem(raw, exc)))
            continue
        if stat.S_ISDIR(st.st_mode):
            _walk(raw, add, errors, skip)
        elif stat.S_ISREG(st.st_mode):
            add(raw)
        else:
            errors.append(PathError(raw, "not a regular file or directory (a device, FIFO or socket)"))
    return files, errors


def _stat_problem(path: str, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno == errno.ENOENT:
        return "broken symlink" if os.path.islink(path) else "no such file or directory"
    if exc.errno == errno.ENOTDIR:
        return "not a directory (a file used as a directory in the path)"
    return f"cannot access: {exc.strerror or exc}"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _walk(root: str, add, errors: list[PathError], skip=None) -> None:
    """Walk ``root`` depth-first in name order. Symlinks are followed only while they stay
    inside the real tree of ``root``: a symlink loop, a link out of the tree and a broken
    link are skipped with a warning, so `--fix` never writes outside the tree it was given."""
    visited: set[str] = set()
    real_root = os.path.realpath(root)
    stack = [root]
    while stack:
        d = stack.pop()
        real = os.path.realpath(d)
        if real in visited:
            errors.append(PathError(d, "symlink loop (directory already visited through another path); skipped",
                                    warning=True))
            continue
        visited.add(real)
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            errors.append(PathError(d, f"cannot list directory: {exc.strerror or exc}"))
            continue
        subdirs = []
        for e in entries:
            try:
                if e.is_symlink():
                    try:
                        target = os.path.realpath(e.path, strict=True)
                    except OSError as exc:
                        if exc.errno == errno.ELOOP or e.name.endswith(SUFFIXES):
                            errors.append(PathError(e.path, _stat_problem(e.path, exc) + "; skipped",
                                                    warning=True))
                        continue
                    if not (e.is_dir() or e.name.endswith(SUFFIXES)) or (e.is_dir() and _skip_dir(e)):
                        continue
                    if not _inside(target, real_root):
                        errors.append(PathError(e.path, f"symlink out of the tree (to {target}); skipped",
                                                warning=True))
                        continue
                if e.is_dir():
                    if not _skip_dir(e) and not (skip and skip(e.path, True)):
                        subdirs.append(e.path)
                elif e.name.endswith(SUFFIXES) and e.is_file() and not (skip and skip(e.path, False)):
                    add(e.path)
            except OSError:
                continue
        stack.extend(reversed(subdirs))


def display_path(path: str) -> str:
    """Paths under the working directory are shown relative to it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def as_posix(path: str) -> str:
    return Path(path).as_posix()
