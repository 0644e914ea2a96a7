"""A read-only batched traversal and cheap positions, for the hot path of the engine.

LibCST's ``visit_batched`` drives ``CSTNode.visit``, which rebuilds (and re-validates)
every node of the tree on the way back up even when no visitor changes anything: on
the torch sources that costs about 0.8x a parse. :func:`visit_batched` here calls the
same ``visit_<Node>`` / ``visit_<Node>_<attribute>`` / ``leave_<Node>_<attribute>`` /
``leave_<Node>`` methods, in the same order, without rebuilding anything:

* the order in which a node type's children are visited is taken once per type from
  LibCST itself (its ``_visit_and_replace_children``, run with a recorder that does not
  descend), so it follows the library rather than a hand-written table;
* subtrees that can only hold whitespace, comments, brackets and operator tokens are
  not entered unless some visitor asks for one of those node types.

:func:`positions` resolves the (syntactic, ``PositionProvider``-compatible) ranges of
just the nodes that were reported: one code generation that counts characters instead
of splitting every token into lines and building a ``CodeRange`` for every node.

``tests/test_parallel.py`` checks that both give exactly what LibCST gives.
"""

from __future__ import annotations

import bisect
import dataclasses
import inspect
import typing
from contextlib import contextmanager
from operator import attrgetter
from typing import Iterable, Iterator, Optional

import libcst as cst

from libcst import MaybeSentinel
from libcst._nodes.internal import CodegenState
from libcst._position import CodePosition, CodeRange

from devlint import lazyre

# ---------------------------------------------------------------------------------
# the traversal
# ---------------------------------------------------------------------------------

_TRIVIA_BASES = tuple(
    getattr(cst, n) for n in (
        "BaseParenthesizableWhitespace", "Comment", "EmptyLine", "Newline", "TrailingWhitespace",
        "BaseUnaryOp", "BaseBooleanOp", "BaseBinaryOp", "BaseCompOp", "BaseAugOp",
        "Semicolon", "Colon", "Comma", "Dot", "AssignEqual", "ImportStar",
        "LeftParen", "RightParen", "LeftSquareBracket", "RightSquareBracket",
        "LeftCurlyBrace", "RightCurlyBrace",
    )
)
_BASES = frozenset(_TRIVIA_BASES)
# Concrete node types whose subtrees hold nothing but layout and operator tokens.
TRIVIA: frozenset = frozenset(
    # An MRO test, not issubclass(): the bases are ABCs, and ABC subclass checks over every
    # LibCST class cost ~25 ms at import (a one-file run pays it).
    o for o in vars(cst).values()
    if inspect.isclass(o) and not _BASES.isdisjoint(o.__mro__) and not inspect.isabstract(o)
)
_TRIVIA_NAMES = frozenset(t.__name__ for t in TRIVIA) | {b.__name__ for b in _TRIVIA_BASES}


class _FieldRecorder(cst.CSTVisitor):
    """Records the attribute visits of one node, without descending."""

    def __init__(self) -> None:
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.fields.append(attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


# type -> (conditional fields, {None-pattern of those fields: visiting order})
_ORDERS: dict[type, tuple] = {}


def _record(node: cst.CSTNode) -> tuple[str, ...]:
    rec = _FieldRecorder()
    node._visit_and_replace_children(rec)
    return tuple(rec.fields)


def child_fields(node: cst.CSTNode) -> tuple[str, ...]:
    """The attributes LibCST visits on ``node``, in its visiting order.

    The order is fixed per node type, except that a few types skip a field that is None
    (``FormattedStringExpression.format_spec``): those fields are found when the type is
    first seen, and the order is then kept per None-pattern of them."""
    t = type(node)
    order = _STATIC.get(t)
    if order is not None:
        return order
    entry = _ORDERS.get(t)
    if entry is None:
        order = _record(node)
        cond = []
        for fld in dataclasses.fields(t):
            value = getattr(node, fld.name)
            if value is None:
                if fld.name not in order:
                    cond.append(fld.name)  # maybe visited only when set
            elif fld.name in order and ("Optional" in str(fld.type) or "None" in str(fld.type)):
                try:  # is it still visited when None?
                    alt = _record(node.with_changes(**{fld.name: None}))
                except Exception:  # noqa: BLE001 - None is not valid here: never skipped
                    continue
                if fld.name not in alt:
                    cond.append(fld.name)
        entry = _ORDERS[t] = (tuple(cond), {})
    cond, orders = entry
    pattern = tuple(getattr(node, f) is None for f in cond)
    order = orders.get(pattern)
    if order is None:
        order = orders[pattern] = _record(node)
    if not cond:
        _STATIC[t] = order
    return order


_STATIC: dict[type, tuple[str, ...]] = {}  # types whose order never varies


def conditional_fields(node: cst.CSTNode) -> tuple[str, ...]:
    child_fields(node)
    return _ORDERS[type(node)][0]


# type -> 1: a node, 2: a sequence (of nodes), 3: a trivia node, 0: anything else
_CHILD_KIND: dict[type, int] = {}


def _child_kind(t: type) -> int:
    if issubclass(t, cst.CSTNode):
        k = 3 if t in TRIVIA else 1
    else:
        k = 2 if issubclass(t, (list, tuple)) else 0
    _CHILD_KIND[t] = k
    return k


def _annotation_classes(tp) -> list:
    args = typing.get_args(tp)
    if args:
        return [c for a in args for c in _annotation_classes(a)]
    return [tp]


_TRIVIA_FIELDS: dict[tuple, bool] = {}


def _trivia_field(t: type, name: str) -> bool:
    """Field ``name`` of node type ``t`` can hold only layout and operator tokens (by its
    declared type: ``lpar: Sequence[LeftParen]``, ``comma: Comma | MaybeSentinel``)."""
    key = (t, name)
    known = _TRIVIA_FIELDS.get(key)
    if known is None:
        fld = next((f for f in dataclasses.fields(t) if f.name == name), None)
        known = False
        if fld is not None and not isinstance(fld.type, str):
            classes = [c for c in _annotation_classes(fld.type) if c not in (MaybeSentinel, type(None))]
            known = bool(classes) and all(
                isinstance(c, type) and issubclass(c, cst.CSTNode) and (c in TRIVIA or issubclass(c, _TRIVIA_BASES))
                for c in classes)
        _TRIVIA_FIELDS[key] = known
    return known


# type -> its visiting order without trivia-only fields (types whose order never varies)
_NONTRIVIA_ORDER: dict[type, tuple[str, ...]] = {}


def _nontrivia_order(node: cst.CSTNode) -> tuple[str, ...]:
    t = type(node)
    order = child_fields(node)
    kept = tuple(f for f in order if not _trivia_field(t, f))
    if t in _STATIC:
        _NONTRIVIA_ORDER[t] = kept
    return kept


def children(node: cst.CSTNode, trivia: bool = True) -> list:
    """``node.children``, in the same order, without its cost: LibCST's property rebuilds the
    node (validation included) to collect them, ~10x slower. ``trivia=False`` leaves out
    layout and operator-token nodes (whitespace, commas, parentheses, ``+``...), for walks
    that look for names, calls or attributes (and does not even read the fields that can
    hold nothing else)."""
    out: list = []
    kinds = _CHILD_KIND
    if trivia:
        order = child_fields(node)
    else:
        order = _NONTRIVIA_ORDER.get(type(node))
        if order is None:
            order = _nontrivia_order(node)
    for f in order:
        v = getattr(node, f)
        k = kinds.get(type(v))
        if k is None:
            k = _child_kind(type(v))
        if k == 1 or (k == 3 and trivia):
            out.append(v)
        elif k == 2:
            for c in v:
                kc = kinds.get(type(c))
                if kc is None:
                    kc = _child_kind(type(c))
                if kc == 1 or (kc == 3 and trivia):
                    out.append(c)
    return out


_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_SCOPE_TYPES = frozenset(_SCOPES)  # concrete classes: a set lookup, not an ABC isinstance()


def nodes(node: cst.CSTNode, into_scopes: bool = False) -> Iterator[cst.CSTNode]:
    """Every node under ``node`` (itself included), pre-order in source order, leaving out
    layout and operator-token nodes; nested functions, classes and lambdas are yielded but
    not entered unless ``into_scopes``."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if not into_scopes and n is not node and type(n) in _SCOPE_TYPES:
            continue
        stack.extend(reversed(children(n, trivia=False)))


# nodes that hold statements; a walk over statements descends into these only
_STATEMENT_HOLDERS = (
    cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite, cst.SimpleStatementLine, cst.If, cst.Else,
    cst.For, cst.While, cst.With, cst.Try, cst.TryStar, cst.ExceptHandler, cst.ExceptStarHandler,
    cst.Finally, cst.Match, cst.MatchCase,
)


def statements(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The statements (compound and small) under ``node``, pre-order in source order,
    without entering function or class bodies or any expression: what a walk over every
    node yields of them, at a fraction of the cost."""
    role = _STATEMENT_ROLE
    stack = [node]
    while stack:
        n = stack.pop()
        r = role.get(type(n))
        if r is None:
            r = _statement_role(type(n))
        if n is not node:
            yield n
            if r == 3:
                continue
        if r == 2:
            kids = []
            for c in children(n, trivia=False):
                rc = role.get(type(c))
                if rc is None:
                    rc = _statement_role(type(c))
                if rc:
                    kids.append(c)
            stack.extend(reversed(kids))


# type -> 0: not a statement (an expression...), 1: a statement, 2: one that holds
# statements, 3: a function or class definition (its body is another scope)
_STATEMENT_ROLE: dict[type, int] = {}
_STATEMENTISH = (cst.BaseStatement, cst.BaseSmallStatement, cst.BaseSuite, cst.If, cst.Else,
                 cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)


def _statement_role(t: type) -> int:
    if issubclass(t, (cst.FunctionDef, cst.ClassDef)):
        r = 3
    elif issubclass(t, _STATEMENT_HOLDERS):
        r = 2
    else:
        r = 1 if issubclass(t, _STATEMENTISH) else 0
    _STATEMENT_ROLE[t] = r
    return r


def _methods(visitors: Iterable) -> dict[str, list]:
    out: dict[str, list] = {}
    for v in visitors:
        for name, fn in v.get_visitors().items():
            out.setdefault(name, []).append(fn)
    return out


def _no_children(node) -> tuple:
    return ()


def _one_getter(name: str):
    def get(node) -> tuple:
        return (getattr(node, name),)
    return get


# Nodes whose children are all layout and operator tokens (a name's parentheses): with trivia
# skipped, a walk that no visitor asks to enter them has nothing to do there. Names, numbers
# and strings are about a third of all nodes.
_LEAVES = frozenset({cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis,
                     cst.Pass, cst.Break, cst.Continue, cst.FormattedStringText})


def _wanted(name: str, methods: dict) -> bool:
    """Whether any visitor has a method for node type ``name`` (its own or an attribute's)."""
    return any(k.split("_", 2)[1] == name for k in methods)


def visit_batched(module: cst.CSTNode, visitors: Iterable) -> None:
    """Run every ``BatchableCSTVisitor`` in ``visitors`` over ``module`` in one pass,
    calling them exactly as :func:`libcst._batched_visitor.visit_batched` does."""
    methods = _methods(visitors)
    skip_trivia = not any(name.split("_")[1] in _TRIVIA_NAMES for name in methods)
    plans: dict[type, tuple] = {}
    empty: tuple = ()
    node_types = cst.CSTNode

    def plan(node):
        t = type(node)
        name = t.__name__
        fields = []
        for f in child_fields(node):
            va = methods.get(f"visit_{name}_{f}", empty)
            la = methods.get(f"leave_{name}_{f}", empty)
            fields.append((f, tuple(va), tuple(la)))
        names = [f for f, _va, _la in fields]
        if skip_trivia:
            names = [f for f in names if not _trivia_field(t, f)]  # not even read
        if any(va or la for _f, va, la in fields):
            getter = None  # attribute visitors: the field-by-field loop
        elif not names:
            getter = _no_children
        elif len(names) == 1:
            getter = _one_getter(names[0])
        else:
            getter = attrgetter(*names)  # all children in one C call
        p = (tuple(methods.get(f"visit_{name}", empty)),
             tuple(methods.get(f"leave_{name}", empty)), tuple(fields), getter)
        cond = conditional_fields(node)
        if cond:
            plans[t] = None  # the plan depends on which of `cond` are None
            plans[(t, tuple(getattr(node, f) is None for f in cond))] = p
        else:
            plans[t] = p
        return p

    # type -> 1: a node to enter, 2: a sequence, 0: anything else (a value, None, a
    # skipped trivia node); isinstance() against LibCST's ABCs is slow in this loop
    kinds: dict[type, int] = {}

    def kind(t: type) -> int:
        if issubclass(t, node_types):
            k = 0 if skip_trivia and (t in TRIVIA or (t in _LEAVES and not _wanted(t.__name__, methods))) else 1
        else:
            k = 2 if issubclass(t, (list, tuple)) else 0
        kinds[t] = k
        return k

    def walk(node):
        t = type(node)
        p = plans.get(t, empty)
        if p is None:
            p = plans.get((t, tuple(getattr(node, f) is None for f in _ORDERS[t][0])))
        if not p:
            p = plan(node)
        vf, lf, fields, getter = p
        for fn in vf:
            fn(node)
        # The child-entering block below is written out twice on purpose: this is the hot
        # loop of every run, and a helper would add a call per field and a stack frame per
        # nesting level (deep files would hit the recursion limit sooner).
        if getter is not None:  # no attribute visitors: all children in one C call
            for v in getter(node):
                k = kinds.get(type(v))
                if k is None:
                    k = kind(type(v))
                if k == 1:
                    walk(v)
                elif k == 2:
                    for c in v:
                        kc = kinds.get(type(c))
                        if kc is None:
                            kc = kind(type(c))
                        if kc == 1:
                            walk(c)
        else:
            for f, va, la in fields:
                for fn in va:
                    fn(node)
                v = getattr(node, f)
                k = kinds.get(type(v))
                if k is None:
                    k = kind(type(v))
                if k == 1:
                    walk(v)
                elif k == 2:
                    for c in v:
                        kc = kinds.get(type(c))
                        if kc is None:
                            kc = kind(type(c))
                        if kc == 1:
                            walk(c)
                for fn in la:
                    fn(node)
        for fn in lf:
            fn(node)

    try:
        walk(module)
    finally:
        # `walk` refers to itself through its closure: without this the closure, and through
        # the visitors' bound methods every rule, the facts and the whole tree, would stay in
        # a reference cycle until the cycle collector found it
        walk = None  # noqa: F841


# ---------------------------------------------------------------------------------
# positions of a few nodes
# ---------------------------------------------------------------------------------

_NEWLINE = lazyre.compile(r"\r\n?|\n")


class _OffsetState(CodegenState):
    """Code generation that records character offsets (start, end) per node; syntactic
    ranges follow ``PositionProvidingCodegenState`` exactly."""

    def __init__(self, default_indent: str, default_newline: str) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.offset = 0
        self.stack: list[int] = []
        self.ranges: dict = {}

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for tok in self.indent_tokens:
            self.offset += len(tok)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        # positions were taken with the newline in place (as PositionProvider's are)
        if self.tokens:
            self.popped = self.tokens.pop()

    popped = ""

    def before_codegen(self, node) -> None:
        self.stack.append(self.offset)

    def after_codegen(self, node) -> None:
        # keyed on id(): CSTNode.__hash__ is a Python-level call, and every node of
        # the tree is alive while its module is
        start = self.stack.pop()
        if id(node) not in self.ranges:
            self.ranges[id(node)] = (start, self.offset)

    @contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        start = self.offset
        try:
            yield
        finally:
            end = self.offset
            if start_node is not None:
                start = self.ranges[id(start_node)][0]
            if end_node is not None:
                end = self.ranges[id(end_node)][1]
            self.ranges[id(node)] = (start, end)


def _line_starts(code: str) -> list[int]:
    return [0] + [m.end() for m in _NEWLINE.finditer(code)]


def _to_range(starts: list[int], r: tuple) -> CodeRange:
    def pos(offset: int) -> CodePosition:
        i = bisect.bisect_right(starts, offset) - 1
        return CodePosition(i + 1, offset - starts[i])

    return CodeRange(pos(r[0]), pos(r[1]))


_ENTER: dict[type, int] = {}  # type -> 1: a node to search, 2: a sequence, 0: neither


def _enter(t: type) -> int:
    if issubclass(t, cst.CSTNode):
        k = 0 if t in TRIVIA else 1
    else:
        k = 2 if issubclass(t, (list, tuple)) else 0
    _ENTER[t] = k
    return k


def _found(stmt: cst.CSTNode, targets: set) -> set:
    """The nodes of ``targets`` inside ``stmt`` (trivia is not searched: a reported
    comment or comma is simply not found, and the caller falls back to the slow path)."""
    out = set()
    ids = {id(t) for t in targets}
    stack = [stmt]
    pop, push, enter = stack.pop, stack.append, _ENTER.get
    while stack:
        n = pop()
        if id(n) in ids:
            out.add(n)
            if len(out) == len(ids):
                break
        for f in child_fields(n):
            v = getattr(n, f)
            k = enter(type(v))
            if k is None:
                k = _enter(type(v))
            if k == 1:
                push(v)
            elif k == 2:
                for c in v:
                    kc = enter(type(c))
                    if kc is None:
                        kc = _enter(type(c))
                    if kc == 1:
                        push(c)
    return out


def _located(text: str, code: str) -> Optional[int]:
    """The one offset at the start of a line where ``code`` occurs in ``text``."""
    found = None
    i = text.find(code)
    while i != -1:
        if i == 0 or text[i - 1] in "\r\n":
            if found is not None:
                return None  # twice (say, in a docstring too): ambiguous
            found = i
        i = text.find(code, i + 1)
    return found


def _locate(module: cst.Module, text: str, stmt, indents: list, targets: set, ranges: dict) -> bool:
    """Record the text ranges of ``targets`` (all inside ``stmt``): inside a class or a
    function, only the body statements that hold them are generated; False when a
    generated statement cannot be found exactly once in ``text``."""
    if isinstance(stmt, (cst.ClassDef, cst.FunctionDef)) and isinstance(stmt.body, cst.IndentedBlock):
        inner = [(s, _found(s, targets)) for s in stmt.body.body]
        inner = [(s, f) for s, f in inner if f]
        if sum(len(f) for _, f in inner) == len(targets):
            indent = stmt.body.indent if stmt.body.indent is not None else module.default_indent
            if all(_locate(module, text, s, indents + [indent], f, ranges) for s, f in inner):
                return True
    state = _OffsetState(module.default_indent, module.default_newline)
    state.indent_tokens = list(indents)
    stmt._codegen(state)
    base = _located(text, "".join(state.tokens))
    if base is None:
        return False
    for n in targets:
        r = state.ranges.get(id(n))
        if r is None:
            return False
        ranges[n] = (base + r[0], base + r[1])
    return True


def _positions_by_statement(module: cst.Module, source: bytes, nodes: list) -> Optional[dict]:
    """Generate code only for the statements holding ``nodes`` and find each in the
    source text; None when that cannot be done unambiguously."""
    try:
        text = source.decode(module.encoding)
    except (UnicodeDecodeError, LookupError):
        return None
    if text.startswith("\ufeff"):
        return None
    targets = set(nodes)
    ranges: dict = {}
    for stmt in module.body:
        if len(ranges) == len(targets):
            break
        found = _found(stmt, targets)
        if found and not _locate(module, text, stmt, [], found, ranges):
            return None
    if len(ranges) != len(targets):
        return None  # a node outside the body (header/footer comments)
    starts = _line_starts(text)
    return {n: _to_range(starts, r) for n, r in ranges.items()}


def positions(module: cst.Module, nodes: Iterable[cst.CSTNode], source: Optional[bytes] = None) -> dict:
    """``{node: CodeRange}`` for ``nodes`` (0-based columns, as ``PositionProvider``).

    With the module's ``source``, only the top-level statements that hold ``nodes`` are
    generated (and located in the source); otherwise, or when that is ambiguous, the
    whole module is."""
    nodes = list(nodes)
    if source is not None:
        out = _positions_by_statement(module, source, nodes)
        if out is not None:
            return out
    state = _OffsetState(module.default_indent, module.default_newline)
    module._codegen(state)
    starts = _line_starts("".join(state.tokens) + state.popped)
    return {n: _to_range(starts, state.ranges[id(n)]) for n in nodes if id(n) in state.ranges}
