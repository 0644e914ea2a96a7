"""NumPy functions with a torch equivalent that takes the same positional arguments (DL003).

``NUMPY_TO_TORCH[np_name] = (torch_name, arity)``: ``numpy.<np_name>(a, b...)`` computes
what ``torch.<torch_name>(a, b...)`` computes on tensors, positional arguments only
(``arity`` of them; tests/test_numpy_ops.py runs every entry on sample data and compares).
A NumPy round trip through one of them (``t.cpu().numpy()`` -> ``np.clip`` -> back to the
device) can stay on the device. Keyword arguments (``axis=``, ``out=``) have other names
in torch: calls with keywords get no rewrite.
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from devlint.analysis.accumulators import is_number
from devlint.analysis.transfers import host_receiver, is_move
from devlint.diagnostic import Applicability, Fix
from devlint.fixes import torch_ref
from devlint.walk import nodes

NUMPY_TO_TORCH: dict = {
    # elementwise, one argument
    "exp": ("exp", 1), "expm1": ("expm1", 1), "log": ("log", 1), "log1p": ("log1p", 1),
    "log2": ("log2", 1), "log10": ("log10", 1), "sqrt": ("sqrt", 1), "abs": ("abs", 1),
    "absolute": ("abs", 1), "negative": ("neg", 1), "sign": ("sign", 1), "square": ("square", 1),
    "floor": ("floor", 1), "ceil": ("ceil", 1), "trunc": ("trunc", 1),
    "sin": ("sin", 1), "cos": ("cos", 1), "tanh": ("tanh", 1), "sinh": ("sinh", 1), "cosh": ("cosh", 1),
    "arctan": ("atan", 1), "arcsin": ("asin", 1), "arccos": ("acos", 1),
    "isnan": ("isnan", 1), "isfinite": ("isfinite", 1), "logical_not": ("logical_not", 1),
    # reductions to an index, over the flattened array (or one positional axis)
    "argmax": ("argmax", 1), "argmin": ("argmin", 1),
    # two arguments
    "maximum": ("maximum", 2), "minimum": ("minimum", 2),
    "logical_and": ("logical_and", 2), "logical_or": ("logical_or", 2),
    # three arguments
    "clip": ("clamp", 3), "where": ("where", 3),
}


def torch_equivalent(np_name: str, nargs: int):
    """The torch function for ``numpy.<np_name>`` called with ``nargs`` positional arguments."""
    entry = NUMPY_TO_TORCH.get(np_name)
    if entry is None:
        return None
    op, arity = entry
    if nargs == arity or (op in ("argmax", "argmin") and nargs == 2):  # `np.argmax(a, 1)`: dim 1
        return op
    return None


def numpy_round_trip_fix(facts, node: cst.Call, on_device: Callable) -> Optional[Fix]:
    """For ``torch.from_numpy(np.F(t.cpu().numpy(), ...)).to(d)`` / ``torch.tensor(np.F(...),
    device=d)`` with ``t`` on the device (``on_device``): ``torch.G(t, ...)``, unsafe (the
    result keeps ``t``'s device and torch's dtype promotion)."""
    inner = None
    if is_move(facts, node) and isinstance(node.func.value, cst.Call):
        b = node.func.value
        if facts.qualname(b.func) in ("torch.from_numpy", "torch.tensor", "torch.as_tensor") and len(b.args) == 1:
            inner = b.args[0].value
    elif node.args:
        inner = node.args[0].value
    if not isinstance(inner, cst.Call) or any(a.keyword or a.star for a in inner.args):
        return None
    q = facts.qualname(inner.func)
    if q is None or not q.startswith("numpy.") or q.count(".") != 1:
        return None
    op = torch_equivalent(q.split(".")[1], len(inner.args))
    if op is None:
        return None
    found: list = []
    new_args = [a.visit(_StripHost(on_device, found)) for a in inner.args]
    if not found:
        return None
    if op in ("maximum", "minimum"):
        other = new_args[1].value
        if is_number(other):  # `np.maximum(a, 0)`: torch.maximum wants two tensors
            kw = "min" if op == "maximum" else "max"
            new_args = [new_args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                        cst.Arg(other, keyword=cst.Name(kw),
                                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))]
            op = "clamp"
        elif not any(other is f for f in found):
            return None
    t, needs = torch_ref(facts)
    new = cst.Call(func=cst.parse_expression(f"{t}.{op}"), args=new_args)
    if any(host_receiver(sub) is not None for sub in nodes(new)):
        return None  # a host value left: not a one-to-one rewrite
    return Fix(Applicability.UNSAFE, f"use `{t}.{op}` on the device instead of `{q}` on the host",
               {node: new}, needs_torch_import=needs)


class _StripHost(cst.CSTTransformer):
    """``t.detach().cpu().numpy()`` -> ``t.detach()``: the device tensor before it left."""

    def __init__(self, on_device, found) -> None:
        super().__init__()
        self.on_device, self.found = on_device, found

    def leave_Call(self, orig, upd):
        if not (isinstance(orig.func, cst.Attribute) and orig.func.attr.value == "numpy"):
            return upd
        cur = orig.func.value
        while (isinstance(cur, cst.Call) and isinstance(cur.func, cst.Attribute)
               and (cur.func.attr.value == "cpu" or (cur.func.attr.value == "to" and host_receiver(cur) is not None))):
            cur = cur.func.value
        if not self.on_device(cur):
            return upd
        self.found.append(cur)
        return cur
