""".gitignore-style pattern matching (exclude, extend-exclude, per-file-ignores, .gitignore).

devlint's runtime is libcst and click only, so this is the small part of gitignore
semantics devlint needs, matching ``pathspec.GitIgnoreSpec`` (tests compare the two):
``#`` comments and blank lines; ``!`` negation, the last matching pattern wins; a
pattern with a slash at its start or middle is anchored to the base directory, one
without matches at any depth; a trailing ``/`` matches directories only (and their
contents); ``*``, ``?`` and ``[...]`` never cross ``/``; ``**`` crosses directories; a
matching directory also matches everything below it; backslash escapes. Paths are
relative, ``/``-separated; a directory is passed with a trailing ``/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Optional


@dataclass(frozen=True)
class CheckResult:
    file: str
    include: Optional[bool]  # True: matched; False: re-included by a `!` pattern; None: no pattern
    index: Optional[int]  # the deciding pattern's line index


def _segment(seg: str) -> str:
    if seg and set(seg) == {"*"}:
        return "[^/]+"  # a whole name: `scripts/*` matches what is in `scripts/`, not `scripts/` itself
    out, i, n = [], 0, len(seg)
    while i < n:
        c = seg[i]
        if c == "\\" and i + 1 < n:
            out.append(re.escape(seg[i + 1]))
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = seg.find("]", i + 2 if i + 1 < n and seg[i + 1] in "!^" else i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = seg[i + 1:j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
                continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _strip_trailing_spaces(line: str) -> str:
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    return line


def compile_pattern(line: str) -> Optional[tuple[re.Pattern, bool]]:
    """(regex, negated) for one gitignore line, or None for blanks and comments."""
    line = _strip_trailing_spaces(line.rstrip("\n\r"))
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    segs = line.split("/")
    parts = []
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        if seg == "**":
            parts.append(".*" if last else "(?:.*/)?")
        else:
            parts.append(_segment(seg) + ("" if last else "/"))
    if segs == ["**"]:
        return re.compile("^.+$", re.S), negated
    if segs[0] == "**":
        anchored = True  # `**/x` already matches at any depth
    prefix = "" if anchored else "(?:.*/)?"
    if segs[-1] == "**":  # `dir/**`: everything below dir
        return re.compile(f"^{prefix}{''.join(parts[:-1])}.*$", re.S), negated
    body = "".join(parts)
    # `dm` marks a match through a parent directory (lower priority than the file itself)
    suffix = "(?P<dm>/).*" if dir_only else "(?:(?P<dm>/).*)?"
    return re.compile(f"^{prefix}{body}{suffix}$", re.S), negated


class GitIgnoreSpec:
    def __init__(self, patterns: list) -> None:
        self.patterns = patterns  # (index, regex, negated)

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> "GitIgnoreSpec":
        pats = []
        for i, line in enumerate(lines):
            c = compile_pattern(line)
            if c is not None:
                pats.append((i, *c))
        return cls(pats)

    def check_file(self, path: str, parents: bool = True) -> CheckResult:
        """The last pattern that matches the file itself decides; failing that, the last
        pattern that matches one of its parent directories (pathspec's GitIgnoreSpec rule).
        With ``parents=False`` only patterns that match the path itself count (a walk, which
        has already pruned the directories it went through, asks this way)."""
        include: Optional[bool] = None
        index: Optional[int] = None
        best = 0
        for i, rx, negated in reversed(self.patterns):
            m = rx.match(path)
            if m is None:
                continue
            # a match through a parent directory ranks below one of the path itself (a directory's
            # own trailing slash is itself)
            priority = 1 if m.groupdict().get("dm") and m.end("dm") < len(path) else 2
            # a directory is passed as `dir/`: its own trailing slash is not a parent match
            if priority == 1 and not parents and m.end("dm") < len(path):
                continue
            if priority > best:
                include, index, best = not negated, i, priority
            if priority == 2:
                break
        return CheckResult(path, include, index)

    def match_file(self, path: str, parents: bool = True) -> bool:
        return bool(self.check_file(path, parents).include)
