"""Rule discovery and selection (codes, prefixes such as ``DL00``, or ``ALL``)."""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import TYPE_CHECKING, Iterable

from devlint import catalogue
from devlint.catalogue import BY_CODE, META, RULES, RuleInfo

if TYPE_CHECKING:
    from devlint.rule import Rule

PARSE_ERROR = catalogue.PARSE_ERROR


class SelectionError(ValueError):
    pass


@lru_cache(maxsize=1)
def all_rules() -> tuple[type["Rule"], ...]:
    """Every rule class of the catalogue, by code (importing them imports LibCST: callers
    that only need codes, names, defaults or prefilters read the catalogue instead)."""
    return tuple(_class(info) for info in RULES)


def _class(info: RuleInfo) -> type["Rule"]:
    from devlint.libcst_compat import require

    require()
    from devlint.rule import Rule

    mod = importlib.import_module(info.module)
    found = [o for o in vars(mod).values()
             if isinstance(o, type) and issubclass(o, Rule) and o.__dict__.get("code") == info.code]
    if len(found) != 1:
        raise RuntimeError(f"{info.module} defines {len(found)} rule classes for {info.code}, not one")
    return found[0]


def meta_rules() -> tuple[type["Rule"], ...]:
    """Codes the engine reports itself, outside the rule traversal (DL100, off by default)."""
    return tuple(_class(info) for info in META)


def info_by_code(code: str) -> RuleInfo | None:
    """A catalogue entry by code or name (``DL002``, ``hardcoded-cuda``)."""
    code = code.strip()
    return BY_CODE.get(code.upper()) or next((r for r in BY_CODE.values() if r.name == code.lower()), None)


def rule_by_code(code: str) -> type["Rule"] | None:
    info = info_by_code(code)
    return _class(info) if info is not None else None


def _expand(selector: str) -> set[str]:
    s = selector.strip().upper()
    if not s:
        return set()
    known = BY_CODE.values()
    codes = set(BY_CODE) - {PARSE_ERROR[0]}  # DL000 is named exactly, never by ALL or a prefix
    if s == "ALL":
        return codes
    named = {r.code for r in known if r.name.upper() == s}
    matched = {c for c in codes if c.startswith(s)} | named | ({PARSE_ERROR[0]} & {s})
    if not matched:
        raise SelectionError(f"unknown rule selector {selector.strip()!r} (see `devlint rules`)")
    return matched


def resolve(
    select: Iterable[str] | None = None,
    extend_select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    targets: Iterable[str] | None = None,
) -> frozenset[str]:
    """The selected codes: ``select`` (default: rules on by default, less those whose bug
    cannot happen on any of ``targets``, the config's `target-devices`) + ``extend_select``
    - ``ignore``."""
    if select is None:
        wanted = set(targets) if targets is not None else None
        chosen = {r.code for r in RULES if r.default_enabled and (wanted is None or wanted & set(r.targets))}
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
