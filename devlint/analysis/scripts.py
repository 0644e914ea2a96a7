"""Is a file a script that trains or evaluates, or a library module (DL010)?

* ``is_main_guard(stmt)``: ``if __name__ == "__main__":``;
* ``trains(body)``: an optimizer step, a loss backward or a loop (nested scopes included);
* ``smoke_test_library(module)``: a module of classes/functions whose only feeding code is a
  ``__main__`` block that runs a model once (a shape smoke test), with no training anywhere.
"""

from __future__ import annotations

import libcst as cst

from devlint.walk import nodes


def is_main_guard(stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.If) or not isinstance(stmt.test, cst.Comparison):
        return False
    parts = [stmt.test.left] + [c.comparator for c in stmt.test.comparisons]
    return any(isinstance(p, cst.Name) and p.value == "__name__" for p in parts)


def trains(body: cst.CSTNode) -> bool:
    """An optimizer step, a loss backward or a loop: the code trains or evaluates."""
    for n in nodes(body, into_scopes=True):
        if isinstance(n, (cst.For, cst.While)):
            return True
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("backward", "step"):
            return True
    return False


def smoke_test_library(module: cst.Module) -> bool:
    """Classes/functions plus a ``__main__`` block that only runs a model once on a random input."""
    defs = [s for s in module.body if isinstance(s, (cst.ClassDef, cst.FunctionDef))]
    if not defs:
        return False
    rest = [s for s in module.body if not isinstance(s, (cst.ClassDef, cst.FunctionDef, cst.SimpleStatementLine))]
    mains = [s for s in rest if is_main_guard(s)]
    if not mains or len(mains) != len(rest):
        return False
    # module-level simple statements: only imports, constants, docstrings (no model is fed there)
    for s in module.body:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    return False
    return not any(trains(m.body) for m in mains) and not any(
        trains(d.body) for d in defs if isinstance(d, cst.FunctionDef))
