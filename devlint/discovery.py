"""Paths -> the Python files to lint, in a stable order."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SKIP_DIRS = frozenset({"__pycache__", "build", "dist", "node_modules", "site-packages",
                       "venv", "env", ".venv", ".git", ".hg", ".tox", ".nox", ".eggs"})
SUFFIXES = (".py", ".ipynb")


@dataclass(frozen=True)
class PathError:
    path: str
    problem: str

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
        if not os.path.lexists(raw):
            errors.append(PathError(raw, "no such file or directory"))
            continue
        if os.path.isdir(raw):
            _walk(raw, add, errors, skip)
        elif os.path.isfile(raw):
            add(raw)
        else:
            errors.append(PathError(raw, "not a regular file (broken symlink or special file)"))
    return files, errors


def _walk(root: str, add, errors: list[PathError], skip=None) -> None:
    visited: set[str] = set()
    stack = [root]
    while stack:
        d = stack.pop()
        real = os.path.realpath(d)
        if real in visited:
            continue  # a symlink loop
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
