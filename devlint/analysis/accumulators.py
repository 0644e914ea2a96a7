"""Loop accumulators: ``total += x.item()`` / ``losses.append(x.item())`` (DL008's fix), and
small tree queries over a loop body (does it contain a node, how often is a name read).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.walk import children

_ARITH = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


def contains(tree: cst.CSTNode, target: cst.CSTNode) -> bool:
    stack = [tree]
    while stack:
        n = stack.pop()
        if n is target:
            return True
        stack.extend(children(n, trivia=False))
    return False


def count_name(tree: cst.CSTNode, name: str) -> int:
    n = 0
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Name) and node.value == name:
            n += 1
        stack.extend(children(node, trivia=False))
    return n


def arith_path(expr: cst.BaseExpression, call: cst.Call) -> bool:
    """``expr`` is ``call`` or arithmetic (+ - * /) with ``call`` as an operand."""
    if expr is call:
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _ARITH):
        return arith_path(expr.left, call) or arith_path(expr.right, call)
    return False


def is_number(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float))


def initialised_before(suite: cst.CSTNode, loop: cst.CSTNode, acc: str, how: str) -> bool:
    """The last statement before ``loop`` (same block) that binds ``acc`` sets it to a literal
    (a number for ``how == "sum"``, ``[]`` for ``"list"``)."""
    body = list(suite.body)
    idx = next((i for i, s in enumerate(body) if s is loop), None)
    if idx is None:
        return False
    for stmt in reversed(body[:idx]):
        if not isinstance(stmt, cst.SimpleStatementLine):
            if count_name(stmt, acc):
                return False
            continue
        for small in reversed(stmt.body):
            if isinstance(small, cst.Assign):
                for t in small.targets:
                    tgt = t.target
                    if isinstance(tgt, cst.Name) and tgt.value == acc:
                        v = small.value
                        return is_number(v) if how == "sum" else (isinstance(v, cst.List) and not v.elements)
                    if isinstance(tgt, (cst.Tuple, cst.List)) and count_name(tgt, acc):
                        # `loss_sum, correct = 0.0, 0`
                        v = small.value
                        if not (isinstance(v, (cst.Tuple, cst.List)) and len(v.elements) == len(tgt.elements)):
                            return False
                        for te, ve in zip(tgt.elements, v.elements):
                            if isinstance(te.value, cst.Name) and te.value.value == acc:
                                return is_number(ve.value) if how == "sum" else (
                                    isinstance(ve.value, cst.List) and not ve.value.elements)
                        return False
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)) and count_name(small.target, acc):
                return False
    return False


def short(text: str, n: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def accumulation(small: cst.BaseSmallStatement, call: cst.Call, stmt, loop: cst.CSTNode,
                 suite: cst.CSTNode) -> Optional[tuple[str, str]]:
    """``(accumulator, "sum" | "list")`` when ``call``, in ``small`` (a statement of ``stmt``), is
    only added to a number (``total += x.item()``) or appended to a list
    (``losses.append(x.item())``) that is initialised in ``suite`` before ``loop`` and read
    nowhere else in the loop; else None."""
    acc = None
    if isinstance(small, cst.AugAssign) and isinstance(small.operator, cst.AddAssign):
        if isinstance(small.target, cst.Name) and arith_path(small.value, call):
            acc, how = small.target.value, "sum"
    elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        c = small.value
        f = c.func
        if (isinstance(f, cst.Attribute) and f.attr.value == "append" and isinstance(f.value, cst.Name)
                and len(c.args) == 1 and c.args[0].value is call and c.args[0].keyword is None):
            acc, how = f.value.value, "list"
    if acc is None or stmt is None or not any(s is small for s in stmt.body):
        return None
    if not initialised_before(suite, loop, acc, how) or count_name(loop, acc) != 1:
        return None
    return acc, how
