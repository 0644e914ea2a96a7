"""``with_keyword`` folds a keyword into a call in the call's own layout (DL003 item 7).

What a user would see in the fixed file: no trailing whitespace, no ``,device=`` squeezed
against the comma, every comment kept once and on its own argument, one argument per line
kept, and an inserted string in the file's quotes.
"""

from __future__ import annotations

import libcst as cst
import pytest

from devlint.analysis.style import string_quote
from devlint.callargs import with_keyword
from devlint.engine import Settings, fix_source

CASES = {
    "f(a)": "f(a, device=d)",
    "f(a,b)": "f(a,b, device=d)",
    "f(a, b,)": "f(a, b, device=d,)",
    "f( a )": "f( a, device=d )",
    "f(\n    a\n)": "f(\n    a,\n    device=d\n)",
    "f(\n    a,\n    b,\n)": "f(\n    a,\n    b,\n    device=d,\n)",
    "f(a,\n  b\n)": "f(a,\n  b,\n  device=d\n)",
    "f(a,  # c\n  b)": "f(a,  # c\n  b,\n  device=d)",
    "f(\n    a,  # one\n    b,  # two\n)": "f(\n    a,  # one\n    b,  # two\n    device=d,\n)",
    "f(  # open\n    a\n)": "f(  # open\n    a,\n    device=d\n)",
    "f(a, b  # c\n)": "f(a, b, device=d  # c\n)",
    "f(a, dtype = x)": "f(a, dtype = x, device = d)",
}


@pytest.mark.parametrize("src", sorted(CASES))
def test_layout_is_kept(src):
    out = cst.Module([]).code_for_node(with_keyword(cst.parse_expression(src), "device", cst.Name("d")))
    assert out == CASES[src]
    assert all(line == line.rstrip() for line in out.split("\n")), "trailing whitespace"
    assert ",device" not in out
    assert out.count("#") == src.count("#")


def test_string_value_follows_the_file_quotes():
    call = cst.parse_expression("torch.load(p)")
    single = with_keyword(call, "map_location", cst.SimpleString('"cpu"'), quote="'")
    assert cst.Module([]).code_for_node(single) == "torch.load(p, map_location='cpu')"
    double = with_keyword(call, "map_location", cst.SimpleString("'cpu'"), quote='"')
    assert cst.Module([]).code_for_node(double) == 'torch.load(p, map_location="cpu")'
    odd = with_keyword(call, "x", cst.SimpleString('"it\'s"'), quote="'")  # would need escaping: kept
    assert cst.Module([]).code_for_node(odd) == 'torch.load(p, x="it\'s")'


def test_file_quote_ignores_docstrings():
    assert string_quote(b'"""Doc."""\nx = \'a\'\ny = {\'k\': 1}\n') == "'"
    assert string_quote(b"'''Doc.'''\nx = \"a\"\n") == '"'
    assert string_quote(b"x = 1\n") == '"'


def test_dl005_map_location_in_a_single_quoted_file():
    # (`.tolist()`: a value read with `.numpy()` would say the file holds host tensors, no finding)
    src = b"import torch\n\ndef load(p):\n    sd = torch.load(p)\n    return {'w': sd['w'].tolist()}\n"
    out = fix_source(src, "m.py", Settings(select=frozenset({"DL005"}), unsafe_fixes=True)).source.decode()
    assert "map_location='cpu'" in out or "map_location=device" in out, out
    assert '"cpu"' not in out
