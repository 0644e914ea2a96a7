"""The file's own layout habits, for fixes that insert code (issue: fixes keep the file's style).

* ``string_quote``: the quote character the file's plain strings use most (``'`` or ``"``);
* ``requote``: a string literal rewritten with another quote when that is exact.
"""

from __future__ import annotations

import io
import tokenize

import libcst as cst

_CACHE: dict = {}


def string_quote(source: bytes) -> str:
    """``'`` when the file's one-line strings mostly use single quotes, else ``"``
    (docstrings and other triple-quoted strings do not count)."""
    key = hash(source)
    q = _CACHE.get(key)
    if q is not None:
        return q
    single = double = 0
    try:
        for tok in tokenize.tokenize(io.BytesIO(source).readline):
            if tok.type != tokenize.STRING:
                continue
            body = tok.string.lstrip("bBrRuUfF")
            if body[:3] in ("'''", '"""'):
                continue
            if body[:1] == "'":
                single += 1
            elif body[:1] == '"':
                double += 1
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, IndentationError):
        pass
    q = "'" if single > double else '"'
    if len(_CACHE) > 64:
        _CACHE.clear()
    _CACHE[key] = q
    return q


def requote(node: cst.BaseExpression, quote: str) -> cst.BaseExpression:
    """``"cpu"`` -> ``'cpu'`` (a plain one-line literal holding neither quote nor backslash)."""
    if not isinstance(node, cst.SimpleString) or quote not in ("'", '"'):
        return node
    prefix, body = node.prefix, node.value[len(node.prefix):]
    if body[:3] in ("'''", '"""') or body[0] == quote:
        return node
    inner = body[1:-1]
    if "'" in inner or '"' in inner or "\\" in inner:
        return node
    return node.with_changes(value=f"{prefix}{quote}{inner}{quote}")


def string(text: str, quote: str = '"') -> cst.SimpleString:
    """A string literal for plain ``text`` in the file's quotes."""
    return cst.SimpleString(f"{quote}{text}{quote}")
