"""NumPy functions with a torch equivalent that takes the same positional arguments (DL003).

``NUMPY_TO_TORCH[np_name] = (torch_name, arity)``: ``numpy.<np_name>(a, b...)`` computes
what ``torch.<torch_name>(a, b...)`` computes on tensors, positional arguments only
(``arity`` of them; tests/test_numpy_ops.py runs every entry on sample data and compares).
A NumPy round trip through one of them (``t.cpu().numpy()`` -> ``np.clip`` -> back to the
device) can stay on the device (the rewrite itself: devlint.fixes.numpy_round_trip_fix). Keyword arguments (``axis=``, ``out=``) have other names
in torch: calls with keywords get no rewrite.
"""

from __future__ import annotations


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
