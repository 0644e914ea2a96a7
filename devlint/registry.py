"""Rule discovery and selection (codes, prefixes such as ``DL00``, or ``ALL``)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import Iterable

from devlint.rule import Rule

PARSE_ERROR = ("DL000", "parse-error")


class SelectionError(ValueError):
    pass


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class in ``devlint.rules`` (the repository's ``rules/``), by code."""
    import devlint.rules as pkg

    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and obj.code:
                if obj.code in found and found[obj.code] is not obj:
                    raise RuntimeError(f"two rules claim {obj.code}")
                found[obj.code] = obj
    return tuple(found[c] for c in sorted(found))


def meta_rules() -> tuple[type[Rule], ...]:
    """Codes the engine reports itself, outside the rule traversal (DL100, off by default)."""
    from devlint.suppression import UnusedNoqa

    return (UnusedNoqa,)


def rule_by_code(code: str) -> type[Rule] | None:
    code = code.upper()
    return next((r for r in (*all_rules(), *meta_rules()) if r.code == code or r.name == code.lower()), None)


def _expand(selector: str) -> set[str]:
    s = selector.strip().upper()
    if not s:
        return set()
    known = (*all_rules(), *meta_rules())
    codes = {r.code for r in known}
    if s == "ALL":
        return codes
    named = {r.code for r in known if r.name.upper() == s}
    matched = {c for c in codes if c.startswith(s)} | named
    if not matched:
        raise SelectionError(f"unknown rule selector {selector.strip()!r} (see `devlint rules`)")
    return matched


def resolve(
    select: Iterable[str] | None = None,
    extend_select: Iterable[str] = (),
    ignore: Iterable[str] = (),
) -> frozenset[str]:
    """The selected codes: ``select`` (default: rules on by default) + ``extend_select`` - ``ignore``."""
    if select is None:
        chosen = {r.code for r in all_rules() if r.default_enabled}
    else:
        chosen = set()
        for s in select:
            chosen |= _expand(s)
    for s in extend_select:
        chosen |= _expand(s)
    for s in ignore:
        chosen -= _expand(s)
    return frozenset(chosen)


def split_codes(values: Iterable[str]) -> list[str]:
    """``["DL001,DL002", "DL003"]`` -> ``["DL001", "DL002", "DL003"]``."""
    out: list[str] = []
    for v in values:
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return out
