"""Small syntax helpers over LibCST nodes shared by the facts, the value model and rules
(moved from ``devlint.facts``, which re-exports them)."""

from __future__ import annotations

from typing import Optional

import libcst as cst


def dotted(node: cst.CSTNode) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    # exact type tests: both are concrete classes, and isinstance() against LibCST's ABC
    # metaclass is slow on a miss (this runs for every call and attribute of a file)
    if type(node) is _NAME:
        return node.value
    parts = []
    while type(node) is _ATTRIBUTE:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is _NAME:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


_NAME, _ATTRIBUTE = cst.Name, cst.Attribute


def root_name(node: cst.CSTNode) -> Optional[str]:
    """The leftmost name of ``a.b[c].d(...)``, else None."""
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call):
            node = node.func
        else:
            return None


def string_value(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        try:
            v = node.evaluated_value
        except Exception:  # noqa: BLE001 - bytes/odd prefixes
            return None
        return v if isinstance(v, str) else None
    return None


def call_arg(call: cst.Call, pos: Optional[int], kw: Optional[str]) -> Optional[cst.Arg]:
    """The argument given by keyword ``kw`` or at position ``pos``."""
    i = 0
    for a in call.args:
        if a.keyword is not None:
            if kw is not None and a.keyword.value == kw:
                return a
        elif a.star:
            return None  # positions after *args are unknowable
        else:
            if pos is not None and i == pos:
                return a
            i += 1
    return None
