"""Small syntax helpers over LibCST nodes (names, strings, call arguments), shared by
devlint.facts, devlint.analysis and the rules. No file facts here: pure functions of a node."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint import lazyre
from devlint.walk import children

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


def is_main_guard(stmt: cst.CSTNode) -> bool:
    """``if __name__ == "__main__":``."""
    if not isinstance(stmt, cst.If) or not isinstance(stmt.test, cst.Comparison):
        return False
    parts = [stmt.test.left] + [c.comparator for c in stmt.test.comparisons]
    return any(isinstance(p, cst.Name) and p.value == "__name__" for p in parts)


def is_library_module(module: cst.Module) -> bool:
    """No `if __name__ == "__main__":` block and no module-level call statement: code that is
    imported, never run. Such a module must not grow an import-time device global."""
    for s in module.body:
        if isinstance(s, cst.If) and isinstance(s.test, cst.Comparison):
            parts = [s.test.left] + [c.comparator for c in s.test.comparisons]
            if any(isinstance(p, cst.Name) and p.value == "__name__" for p in parts):
                return False
        if isinstance(s, (cst.For, cst.While, cst.With)):
            return False
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    return False
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call):
                    d = dotted(small.value.func) or ""
                    if not d.startswith(("typing.", "TypeVar", "logging.", "getLogger", "namedtuple", "collections.")):
                        return False
    return True


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
        raw = node.value
        q = raw[:1]
        if (q == "'" or q == '"') and len(raw) >= 2 and raw[-1] == q and "\\" not in raw and raw[:3] != q * 3:
            return raw[1:-1]  # a plain one-line literal: its text is its value (no literal_eval)
        try:
            v = node.evaluated_value
        except Exception:  # noqa: BLE001 - bytes/odd prefixes
            return None
        return v if isinstance(v, str) else None
    return None


_CUDA_LITERAL = lazyre.compile(r"cuda(:\d+)?")


def is_cuda_string(node: cst.CSTNode) -> bool:
    """``"cuda"``, ``"cuda:0"``, also spelled as an f-string with nothing to format (``f"cuda"``)."""
    v = string_value(node)
    if v is None and type(node) is cst.FormattedString and all(
            type(p) is cst.FormattedStringText for p in node.parts) and "b" not in node.prefix.lower():
        v = "".join(p.value for p in node.parts)
    return v is not None and _CUDA_LITERAL.fullmatch(v) is not None


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


def own_params(fn: cst.FunctionDef) -> tuple:
    """Every named parameter of ``fn`` (positional-only, ordinary, keyword-only; not ``*args``
    or ``**kwargs``)."""
    p = fn.params
    return (*p.posonly_params, *p.params, *p.kwonly_params)


def bound_names(target: cst.CSTNode) -> list:
    """The names an assignment or loop target binds: ``a``, ``(a, b)``, ``[a, *rest]``
    (nothing for ``a.x`` or ``a[i]``, which bind into an existing object)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in bound_names(el.value)]
    if isinstance(target, cst.StarredElement):
        return bound_names(target.value)
    return []


def names_read(expr: cst.CSTNode) -> set:
    """Names an expression reads (not attribute names, not keyword names, not nested scopes)."""
    out: set = set()
    stack = [expr]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            out.add(n.value)
        elif isinstance(n, cst.Attribute):
            stack.append(n.value)
        elif isinstance(n, cst.Arg):
            stack.append(n.value)
        elif not isinstance(n, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
            stack.extend(children(n, trivia=False))
    return out


def factory_takes_device(name: str, call: cst.Call) -> bool:
    """Whether ``torch.<name>(...)`` has an overload that takes ``device=`` here."""
    positional = sum(1 for a in call.args if a.keyword is None and not a.star)
    if name == "normal":  # normal(mean_tensor, std_tensor) follows its inputs' device
        return positional >= 3 or any(a.keyword is not None and a.keyword.value == "size" for a in call.args)
    if name == "as_tensor":
        return positional <= 1
    return True
