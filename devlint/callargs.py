"""Editing a call's argument list as CST nodes, keeping the call's own formatting.

Used by fixes that add a keyword (``map_location=``, ``device=``) to an existing call.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.analysis.style import requote
from devlint.syntax import factory_takes_device  # noqa: F401 - re-exported: rules import it from here

_NO_SPACE = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))


def has_star(call: cst.Call) -> bool:
    """``f(*args)`` / ``f(**kwargs)``: the call may pass anything."""
    return any(a.star for a in call.args)


def has_double_star(call: cst.Call) -> bool:
    return any(a.star == "**" for a in call.args)


def keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a
    return None


def positional_count(call: cst.Call) -> int:
    return sum(1 for a in call.args if a.keyword is None and not a.star)


def _equal_style(call: cst.Call) -> cst.AssignEqual:
    """Match the call's existing ``kw=value`` spacing (``kw = value`` stays spaced)."""
    for a in call.args:
        if a.keyword is not None and isinstance(a.equal, cst.AssignEqual):
            return a.equal
    return _NO_SPACE


def _plain(ws):
    """A separator's whitespace without its comment or blank lines (never copy a comment,
    never leave the spaces that stood before it at the end of a line)."""
    if not isinstance(ws, cst.ParenthesizedWhitespace):
        return ws
    return ws.with_changes(first_line=cst.TrailingWhitespace(newline=ws.first_line.newline), empty_lines=[])


def _keep_comment(own, sep):
    """``sep``'s layout, with the comment ending ``own``'s line kept on that line."""
    if isinstance(own, cst.ParenthesizedWhitespace) and isinstance(sep, cst.ParenthesizedWhitespace):
        return sep.with_changes(first_line=own.first_line, empty_lines=own.empty_lines)
    return sep


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression, quote: Optional[str] = None) -> cst.Call:
    """``call`` with ``name=value`` appended (the call must not already pass ``name``).

    A trailing comma and a one-argument-per-line layout are kept: the new argument
    takes the separator the previous arguments use (without their comments) and the old
    last argument's comma. A string ``value`` takes ``quote`` (the file's quote style,
    ``devlint.analysis.style.string_quote``) when given.
    """
    if quote is not None:
        value = requote(value, quote)
    new = cst.Arg(value=value, keyword=cst.Name(name), equal=_equal_style(call))
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if len(args) > 1 and isinstance(args[-2].comma, cst.Comma):
        sep = args[-2].comma.with_changes(whitespace_after=_plain(args[-2].comma.whitespace_after))
    elif isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        sep = cst.Comma(whitespace_after=_plain(call.whitespace_before_args))  # `f(\n    a\n)`: one per line
    else:
        sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if isinstance(sep.whitespace_after, cst.SimpleWhitespace) and sep.whitespace_after.value != " ":
        sep = sep.with_changes(whitespace_after=cst.SimpleWhitespace(" "))  # never `,device=` nor `,  device=`
    if isinstance(last.comma, cst.Comma):
        # the last argument keeps its own comment (`b,  # two`); the new one ends the list
        args[-1] = last.with_changes(comma=sep.with_changes(
            whitespace_after=_keep_comment(last.comma.whitespace_after, sep.whitespace_after)))
        new = new.with_changes(comma=last.comma.with_changes(whitespace_after=_plain(last.comma.whitespace_after)))
    elif isinstance(last.whitespace_after_arg, cst.ParenthesizedWhitespace):
        # `f(a,\n  b\n)`: the new argument goes on its own line, before the line break of `)`
        if not isinstance(sep.whitespace_after, cst.ParenthesizedWhitespace):
            sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        own_line = isinstance(sep.whitespace_after, cst.ParenthesizedWhitespace)
        sep = sep.with_changes(whitespace_after=_keep_comment(last.whitespace_after_arg, sep.whitespace_after))
        args[-1] = last.with_changes(comma=sep, whitespace_after_arg=cst.SimpleWhitespace(""))
        new = new.with_changes(whitespace_after_arg=_plain(last.whitespace_after_arg) if own_line
                               else last.whitespace_after_arg)
    else:
        # `f( a )`: the space before `)` stays before `)`
        args[-1] = last.with_changes(comma=sep, whitespace_after_arg=cst.SimpleWhitespace(""))
        new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
    args.append(new)
    return call.with_changes(args=args)


def without_keyword(call: cst.Call, name: str) -> cst.Call:
    """``call`` without its ``name=`` argument (the separators stay well-formed)."""
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == name)]
    if len(args) == len(call.args):
        return call
    if args and len(call.args) and call.args[-1].keyword is not None and call.args[-1].keyword.value == name:
        # the removed argument was last: the new last one takes its trailing comma (or none)
        args[-1] = args[-1].with_changes(comma=call.args[-1].comma)
    return call.with_changes(args=args)


