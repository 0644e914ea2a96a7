"""Loop accumulators: ``total += x.item()`` / ``losses.append(x.item())`` (DL008's fix),
running meters (``losses.update(loss.item(), n)`` read every N steps, step times averaged
into meters), and small tree queries over a loop body (does it contain a node, how often is
a name read).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.syntax import dotted
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


# ---- running meters: `losses.update(loss.item(), n)` read every N steps (DL008) ------------

def meter_update(small: cst.BaseSmallStatement, call: cst.Call) -> Optional[str]:
    """``losses.update(loss.item(), n)``: the meter (dotted) that ``call``'s value is handed
    to, as the first argument of its ``update`` in an expression statement; else None."""
    if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
        return None
    c = small.value
    f = c.func
    if not (isinstance(f, cst.Attribute) and f.attr.value == "update" and c.args
            and c.args[0].keyword is None and not c.args[0].star and arith_path(c.args[0].value, call)):
        return None
    return dotted(f.value)


def read_only_in(body: cst.CSTNode, meter: str, occasional: set) -> bool:
    """Every use of ``meter`` under ``body`` other than its own ``update(...)`` calls is in an
    ``occasional`` node (a branch taken every N steps): the meter is read every N steps."""
    stack = [body]
    while stack:
        n = stack.pop()
        if n in occasional:
            continue
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "update" \
                and dotted(n.func.value) == meter:
            stack.extend(a.value for a in n.args)
            continue
        if isinstance(n, (cst.Name, cst.Attribute)) and dotted(n) == meter:
            return False
        stack.extend(children(n, trivia=False))
    return True


def clocks_feed_meters(body: cst.CSTNode, is_clock) -> bool:
    """Every clock read under ``body`` (``is_clock(call)``) goes into a meter's ``update(...)``
    (``batch_time.update(time.time() - end)``) or restarts the interval (``end = time.time()``):
    step times are averaged for display, no step is timed on its own."""
    stack: list = [(body, None)]
    while stack:
        n, ctx = stack.pop()
        if isinstance(n, cst.Call) and is_clock(n) and ctx is None:
            return False
        if isinstance(n, cst.Expr) and isinstance(n.value, cst.Call) and isinstance(n.value.func, cst.Attribute) \
                and n.value.func.attr.value == "update":
            ctx = "meter"
        elif isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name) \
                and isinstance(n.value, cst.Call) and is_clock(n.value):
            continue  # `end = time.time()`
        stack.extend((c, ctx) for c in children(n, trivia=False))
    return True
