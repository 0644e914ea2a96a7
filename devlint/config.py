"""Project configuration: ``[tool.devlint]`` in ``pyproject.toml`` or a standalone
``devlint.toml`` (keys at the top level), found by walking up from the first path.

Glob patterns (``exclude``, ``extend-exclude``, ``per-file-ignores``) use .gitignore
semantics (``devlint.gitignore``), relative to the directory holding the config file (the project
root; the working directory when there is no config). ``.gitignore`` files (and
``.git/info/exclude``) are honoured inside a git repository, like git itself does.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional


from devlint import lazyre
from devlint import registry
from devlint.catalogue import TARGET_DEVICES
from devlint.gitignore import GitIgnoreSpec

CONFIG_NAMES = ("devlint.toml", "pyproject.toml")
SECTION = ("tool", "devlint")

# key -> (type description, validator)
KNOWN_KEYS = ("select", "extend-select", "ignore", "per-file-ignores", "exclude", "extend-exclude",
              "fix-style", "device-name", "respect-gitignore", "target-devices")
FIX_STYLES = ("cuda", "accelerator")


class ConfigError(ValueError):
    """A config problem; ``str()`` names the file, the line and the key."""

    def __init__(self, path: Path, line: Optional[int], key: Optional[str], problem: str) -> None:
        self.path, self.line, self.key, self.problem = path, line, key, problem
        where = f"{path}:{line}" if line else str(path)
        what = f"{key}: " if key else ""
        super().__init__(f"{where}: {what}{problem}")


@dataclass(frozen=True)
class Config:
    path: Optional[Path] = None  # the config file (None: defaults)
    root: Path = field(default_factory=Path.cwd)  # globs are relative to this directory
    select: Optional[tuple[str, ...]] = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    fix_style: Optional[str] = None
    device_name: Optional[str] = None
    respect_gitignore: bool = True
    # the devices the project's code is meant to run on (None: both cpu and cuda)
    target_devices: Optional[tuple[str, ...]] = None

    def codes(self) -> frozenset[str]:
        """The codes this configuration selects (before command-line options)."""
        return registry.resolve(self.select, self.extend_select, self.ignore, self.target_devices)


# ---------------------------------------------------------------------------------
# finding and reading
# ---------------------------------------------------------------------------------


def find_config(start: str | os.PathLike) -> Optional[Path]:
    """The nearest ``devlint.toml`` or ``pyproject.toml`` with a ``[tool.devlint]`` table,
    walking up from ``start`` (a file or a directory)."""
    p = Path(start).absolute()
    d = p if p.is_dir() else p.parent
    for directory in (d, *d.parents):
        standalone = directory / "devlint.toml"
        if standalone.is_file():
            return standalone
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file() and _has_section(pyproject):
            return pyproject
    return None


def _has_section(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if "devlint" not in text:
        return False
    data = _parse(pyproject, text)
    return isinstance(data.get("tool"), dict) and "devlint" in data["tool"]


_TOML_POS = lazyre.compile(r"\(at line (\d+), column \d+\)")


def _parse(path: Path, text: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = _TOML_POS.search(msg)
        line = int(m.group(1)) if m else (text.count("\n") + 1 if "end of document" in msg else None)
        raise ConfigError(path, line, None, f"invalid TOML: {_TOML_POS.sub('', msg).strip()}") from None


def load_config(path: str | os.PathLike) -> Config:
    """Read and validate one config file (raises :class:`ConfigError`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, None, None, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(path, None, None, "not valid UTF-8") from None
    data = _parse(path, text)
    if path.name == "pyproject.toml":
        table_path: tuple[str, ...] = SECTION
        table = data.get("tool", {}).get("devlint", {}) if isinstance(data.get("tool"), dict) else {}
        if not isinstance(table, dict):
            raise ConfigError(path, _key_line(text, ("tool",), "devlint"), "tool.devlint", "must be a table")
    else:
        table_path, table = (), data
    return _validate(path, text, table_path, table)


def _validate(path: Path, text: str, table_path: tuple[str, ...], table: dict) -> Config:
    prefix = ".".join(table_path)

    def err(key: str, problem: str, sub: tuple[str, ...] = ()) -> ConfigError:
        line = _key_line(text, table_path + sub, key) if key else None
        name = ".".join(sub + (key,)) if key else ""
        return ConfigError(path, line, f"[{prefix}] {name}" if prefix else name, problem)

    for key in table:
        if key not in KNOWN_KEYS:
            raise err(key, f"unknown key (known keys: {', '.join(KNOWN_KEYS)})")

    def str_list(key: str) -> tuple[str, ...]:
        v = table.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise err(key, "must be a list of strings")
        return tuple(v)

    def codes(key: str, sub: tuple[str, ...] = (), value: Any = None) -> tuple[str, ...]:
        v = str_list(key) if value is None else tuple(value)
        try:
            registry.resolve(v)
        except registry.SelectionError as exc:
            raise err(key, str(exc), sub) from None
        return v

    select = codes("select") if "select" in table else None
    pfi: list[tuple[str, tuple[str, ...]]] = []
    raw_pfi = table.get("per-file-ignores", {})
    if not isinstance(raw_pfi, dict):
        raise err("per-file-ignores", "must be a table of glob = [codes]")
    for glob, value in raw_pfi.items():
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise err(glob, "must be a list of rule codes", ("per-file-ignores",))
        pfi.append((glob, codes(glob, ("per-file-ignores",), value)))
    fix_style = table.get("fix-style")
    if fix_style is not None and fix_style not in FIX_STYLES:
        raise err("fix-style", f"must be one of {', '.join(repr(s) for s in FIX_STYLES)}, not {fix_style!r}")
    device_name = table.get("device-name")
    if device_name is not None and not (isinstance(device_name, str) and device_name.isidentifier()):
        raise err("device-name", f"{device_name!r} is not a Python identifier")
    gitignore = table.get("respect-gitignore", True)
    if not isinstance(gitignore, bool):
        raise err("respect-gitignore", "must be true or false")
    targets = None
    if "target-devices" in table:
        targets = str_list("target-devices")
        unknown = [t for t in targets if t not in TARGET_DEVICES]
        if not targets or unknown:
            raise err("target-devices", f"must be a non-empty list of {', '.join(map(repr, TARGET_DEVICES))}"
                      + (f", not {unknown[0]!r}" if unknown else ""))
    return Config(path=path, root=path.parent.absolute(), select=select,
                  extend_select=codes("extend-select"), ignore=codes("ignore"),
                  per_file_ignores=tuple(pfi), exclude=str_list("exclude"),
                  extend_exclude=str_list("extend-exclude"), fix_style=fix_style,
                  device_name=device_name, respect_gitignore=gitignore, target_devices=targets)


_HEADER = lazyre.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = lazyre.compile(r"""^\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_.-]+))\s*=""")


def _split_dotted(s: str) -> tuple[str, ...]:
    parts = re.findall(r"""\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*(?:\.|$)""", s)
    return tuple(a or b or c for a, b, c in parts)


def _key_line(text: str, table: tuple[str, ...], key: str) -> Optional[int]:
    """The 1-based line where ``key`` is set in ``table`` (best effort; tomllib keeps no
    positions). Falls back to the table's header line."""
    current: tuple[str, ...] = ()
    header_line = None
    for i, line in enumerate(text.splitlines(), 1):
        h = _HEADER.match(line)
        if h:
            current = _split_dotted(h.group(1))
            if current == table and header_line is None:
                header_line = i
            if current[: len(table) + 1] == table + (key,):
                return i
            continue
        k = _KEY.match(line)
        if k:
            name = k.group(1) if k.group(1) is not None else k.group(2) if k.group(2) is not None else k.group(3)
            full = current + _split_dotted(name) if k.group(3) else current + (name,)
            if full[: len(table) + 1] == table + (key,):
                return i
    return header_line


# ---------------------------------------------------------------------------------
# paths: exclusion and per-file ignores
# ---------------------------------------------------------------------------------


def _rel(path: str, root: Path) -> Optional[str]:
    try:
        rel = os.path.relpath(os.path.abspath(path), root)
    except ValueError:
        return None
    if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
        return None
    return Path(rel).as_posix()


class PathFilter:
    """Decides whether a path is excluded: config ``exclude``/``extend-exclude`` globs
    (relative to the project root) and .gitignore files inside a git repository.

    A pattern must match the path itself (ripgrep's and ruff's rule): the walk prunes every
    excluded directory it meets, so what a directory pattern would exclude below it is never
    reached. A directory given on the command line is walked even when it sits inside an
    ignored one (say, the installed torch package under a `~/.pyenv` checkout that ignores
    `/versions/`); ``--force-exclude`` checks its ancestors too (``ancestors=True``)."""

    def __init__(self, root: Path, patterns: tuple[str, ...] = (), respect_gitignore: bool = True) -> None:
        self.root = Path(root).absolute()
        self.spec = _gitignore_spec(patterns) if patterns else None
        self.respect_gitignore = respect_gitignore
        self._ignore_files: dict[str, Optional[GitIgnoreSpec]] = {}
        self._git_roots: dict[str, Optional[str]] = {}

    def excluded(self, path: str, is_dir: bool = False, ancestors: bool = False) -> bool:
        """True when ``path`` (or, with ``ancestors``, one of its directories) is excluded."""
        ap = os.path.abspath(path)
        if self._match_one(ap, is_dir):
            return True
        if ancestors:
            d = os.path.dirname(ap)
            while d and os.path.dirname(d) != d:
                if self._match_one(d, True):
                    return True
                d = os.path.dirname(d)
        return False

    def _match_one(self, ap: str, is_dir: bool) -> bool:
        if self.spec is not None:
            rel = _rel(ap, self.root)
            if rel is not None and self.spec.match_file(rel + "/" if is_dir else rel, parents=False):
                return True
        return self.respect_gitignore and self._gitignored(ap, is_dir)

    # .gitignore ----------------------------------------------------------------
    def _git_root(self, d: str) -> Optional[str]:
        if d in self._git_roots:
            return self._git_roots[d]
        parent = os.path.dirname(d)
        if os.path.exists(os.path.join(d, ".git")):
            root = d
        elif parent == d:
            root = None
        else:
            root = self._git_root(parent)
        self._git_roots[d] = root
        return root

    def _spec_for(self, d: str, git_root: str) -> Optional[GitIgnoreSpec]:
        if d not in self._ignore_files:
            lines: list[str] = []
            sources = [os.path.join(d, ".gitignore")]
            if d == git_root:
                sources.insert(0, os.path.join(d, ".git", "info", "exclude"))
            for src in sources:
                try:
                    with open(src, encoding="utf-8", errors="replace") as fh:
                        lines.extend(fh.read().splitlines())
                except OSError:
                    continue
            self._ignore_files[d] = _gitignore_spec(lines) if lines else None
        return self._ignore_files[d]

    def _gitignored(self, ap: str, is_dir: bool) -> bool:
        parent = os.path.dirname(ap)
        git_root = self._git_root(parent)
        if git_root is None or os.path.basename(ap) == ".git":
            return False
        d = parent
        while True:  # the deepest .gitignore with a matching pattern decides
            spec = self._spec_for(d, git_root)
            if spec is not None:
                rel = Path(os.path.relpath(ap, d)).as_posix()
                res = spec.check_file(rel + "/" if is_dir else rel, parents=False)
                if res.include is not None:
                    return bool(res.include)
            if d == git_root or os.path.dirname(d) == d:
                return False
            d = os.path.dirname(d)


class PerFileIgnores:
    def __init__(self, root: Path, entries: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
        self.root = Path(root).absolute()
        self.entries = [(_gitignore_spec([glob]), registry.resolve(codes))
                        for glob, codes in entries]

    def codes_for(self, path: str) -> frozenset[str]:
        if not self.entries:
            return frozenset()
        rel = _rel(path, self.root)
        if rel is None:
            rel = Path(path).name
        out: set[str] = set()
        for spec, codes in self.entries:
            if spec.match_file(rel):
                out |= codes
        return frozenset(out)


def _gitignore_spec(lines) -> GitIgnoreSpec:
    return GitIgnoreSpec.from_lines(lines)
