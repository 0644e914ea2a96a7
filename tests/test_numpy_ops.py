"""Every NumPy -> torch equivalent DL003 rewrites computes the same thing (issue: DL003 item 5).

Each entry of ``NUMPY_TO_TORCH`` is run with NumPy on arrays and with torch on the same data
as tensors, with its positional arity, and the results compared; then DL003's fix is checked
to produce exactly that torch call for a round trip through the NumPy function.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from devlint.analysis.numpy_ops import NUMPY_TO_TORCH, torch_equivalent
from devlint.engine import Settings, fix_source

_BOOL = {"logical_not", "logical_and", "logical_or"}
_RNG = np.random.default_rng(0)


def _sample(name: str, i: int):
    if name in _BOOL:
        return _RNG.random((3, 4)) > 0.5
    if name == "where" and i == 0:
        return _RNG.random((3, 4)) > 0.5
    if name == "clip" and i > 0:
        return np.float32(0.3 if i == 1 else 0.7)
    if name in ("isnan", "isfinite"):
        return np.array([[0.5, np.nan, np.inf, -np.inf]], dtype=np.float32)
    # inside (0, 1): in the domain of log, sqrt, arcsin, arccos...
    return (_RNG.random((3, 4)) * 0.8 + 0.1).astype(np.float32) * (1 if i == 0 else 0.9)


@pytest.mark.parametrize("np_name", sorted(NUMPY_TO_TORCH))
def test_numpy_and_torch_agree(np_name):
    op, arity = NUMPY_TO_TORCH[np_name]
    args = [_sample(np_name, i) for i in range(arity)]
    expected = getattr(np, np_name)(*args)
    targs = [torch.from_numpy(np.asarray(a)) if np.ndim(a) else float(a) for a in args]
    got = getattr(torch, op)(*targs).numpy()
    assert got.shape == np.shape(expected)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("np_name", ["argmax", "argmin"])
def test_argmax_with_a_positional_axis(np_name):
    a = _sample(np_name, 0)
    op = torch_equivalent(np_name, 2)
    assert op == np_name
    np.testing.assert_array_equal(getattr(torch, op)(torch.from_numpy(a), 1).numpy(), getattr(np, np_name)(a, 1))


def test_arity_mismatch_has_no_equivalent():
    assert torch_equivalent("where", 1) is None  # np.where(cond): indices, a tuple
    assert torch_equivalent("clip", 2) is None
    assert torch_equivalent("mean", 1) is None  # not in the table: int arrays give floats


@pytest.mark.parametrize("np_name", sorted(NUMPY_TO_TORCH))
def test_dl003_rewrites_the_round_trip_to_the_table_entry(np_name):
    op, arity = NUMPY_TO_TORCH[np_name]
    args = ", ".join(["h.detach().cpu().numpy()"] + ["h.detach().cpu().numpy()"] * (arity - 1))
    src = ("import numpy as np\nimport torch\ndevice = torch.device('cpu')\nfor i in range(3):\n"
           "    h = torch.randn(2).to(device)\n"
           f"    h = torch.from_numpy(np.{np_name}({args})).to(device)\n")
    out = fix_source(src.encode(), "x.py", Settings(select=frozenset({"DL003"}), unsafe_fixes=True))
    want = ", ".join(["h.detach()"] * arity)
    assert f"    h = torch.{op}({want})\n" in out.source.decode()
