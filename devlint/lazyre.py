"""Regular expressions compiled when first used, not when their module is imported.

devlint's modules hold about a hundred module-level patterns; compiling them all at import
cost a warm-cache hook call ~25 ms of its ~65 ms in-process, most of them for questions that
call never asks. ``lazyre.compile`` takes the arguments of :func:`re.compile` and returns an
object with the compiled pattern's methods and attributes: the first access compiles it and
stores the bound methods on the object, so later calls cost what a compiled pattern's do.
"""

from __future__ import annotations

import re

_FORWARDED = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner",
              "pattern", "flags", "groups", "groupindex")


class LazyPattern:
    __slots__ = ("_source", "_flags") + _FORWARDED

    def __init__(self, source, flags: int = 0) -> None:
        self._source, self._flags = source, flags

    def __getattr__(self, name: str):
        # Reached only while a forwarded slot is still empty (or for a name no pattern has).
        if name.startswith("__"):  # a protocol probe (abc's __isabstractmethod__, copy, pickle)
            raise AttributeError(name)
        compiled = re.compile(self._source, self._flags)
        for attr in _FORWARDED:
            setattr(self, attr, getattr(compiled, attr))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazyre.compile({self._source!r}, {self._flags!r})"


def compile(source, flags: int = 0) -> LazyPattern:  # noqa: A001 (the name re uses)
    return LazyPattern(source, flags)
