"""What a value is used for, and whether it ever reaches a device (issues 15/16).

Shared questions for the allocation and sync rules (DL006, DL007, DL008), answered from
the CST alone (never by importing torch):

* ``factory_of_chain``: the factory call under ``torch.arange(n).long().cuda()`` (casts
  and shape methods between a factory and its move do not change where it lives);
* ``is_zero_dim``: ``torch.zeros(())``, ``torch.tensor(3.0)``: a 0-dim CPU tensor mixes
  with CUDA tensors, so it is no device bug;
* ``FunctionUsage.host_only``: a value that is only logged, returned in a metrics dict,
  read back with ``.item()``/``int()``, or consumed by Python indexing/slicing;
* ``FunctionUsage.moved_next``: ``idx = torch.arange(n)`` followed at once by
  ``idx = idx.cuda()`` (possibly under ``if x.is_cuda:``);
* ``may_touch_device``: a file that never mentions a device (a CPU-only script);
* ``host_loop_names``: loop targets of a loader never moved in the loop body.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from devlint import lazyre
from devlint.syntax import bound_names, dotted, names_read
from devlint.walk import children, nodes

# methods between a factory and its move that keep the tensor where it is
CAST_METHODS = frozenset({
    "long", "int", "float", "double", "half", "bfloat16", "bool", "byte", "char", "short", "type",
    "view", "reshape", "unsqueeze", "squeeze", "expand", "repeat", "t", "transpose", "flatten",
    "contiguous", "clone", "detach", "requires_grad_", "fill_", "mul", "add", "sub", "div",
    # in-place fills return the tensor itself
    "uniform_", "normal_", "random_", "bernoulli_", "exponential_", "geometric_", "log_normal_",
    "cauchy_", "zero_",
})
MOVES = frozenset({"to", "cuda", "type_as"})
_SCALAR_ARG_METHODS = frozenset({"fill_", "uniform_", "normal_", "random_", "bernoulli_", "exponential_",
                                 "log_normal_", "cauchy_", "geometric_"})
_METADATA = frozenset({"shape", "ndim", "dtype", "device", "size", "dim", "numel", "is_cuda"})
PLACED = "<placed by the caller>"  # a call_targets() entry: the caller moves the value at once
# calls whose arguments only reach the host: printing and logging
_LOG_NAMES = lazyre.compile(r"^(print|log|log_dict|log_metrics|info|debug|warning|warn|add_scalar|add_scalars|"
                        r"set_postfix|set_description|write|update_metrics|record)$")
_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod", "all", "any", "norm", "std", "var", "round", "log",
                         "exp", "abs", "sqrt", "floor", "ceil", "clamp"})
_HOST_BUILTINS = frozenset({"int", "float", "len", "range", "bool", "str", "list", "tuple", "enumerate",
                            "zip", "round", "print"})
# `torch.distributed`, not the licence header's "distributed under the License"
_DEVICE_WORDS = lazyre.compile(rb"cuda|device|\.to\(|mps|xla|accelerat|\bxpu\b|fabric|torch\.distributed|import distributed")


def factory_of_chain(node: cst.BaseExpression) -> cst.BaseExpression:
    """``torch.arange(n).long().view(-1)`` -> ``torch.arange(n)`` (the receiver under casts)."""
    while (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
           and node.func.attr.value in CAST_METHODS):
        node = node.func.value
    return node


def _is_empty_shape(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Tuple, cst.List)) and not node.elements


def is_zero_dim(factory: str, call: cst.Call) -> bool:
    """``torch.zeros(())``, ``torch.full([], v)``, ``torch.scalar_tensor(v)``: a 0-dim tensor."""
    if factory == "scalar_tensor":
        return True
    pos = [a for a in call.args if a.keyword is None and not a.star]
    size = next((a for a in call.args if a.keyword is not None and a.keyword.value == "size"), None)
    first = pos[0].value if pos else (size.value if size is not None else None)
    if factory in ("zeros", "ones", "empty", "full", "rand", "randn"):
        return first is not None and _is_empty_shape(first)
    return False


def may_touch_device(source: bytes) -> bool:
    """False for a file that never names a device, `.cuda`, `.to(` or a launcher: CPU only."""
    return _DEVICE_WORDS.search(source) is not None


def _target_names(target: cst.CSTNode) -> set:
    return set(bound_names(target))


def _store_names(target: cst.CSTNode, out: set) -> None:
    if isinstance(target, cst.Name):
        out.add(target)
    elif isinstance(target, (cst.Tuple, cst.List)):
        for e in target.elements:
            _store_names(e.value, out)
    elif isinstance(target, cst.StarredElement):
        _store_names(target.value, out)


def _assigned_names(tree: cst.CSTNode) -> set:
    out, stack = set(), [tree]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Assign):
            for t in n.targets:
                out |= _target_names(t.target)
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign)):
            out |= _target_names(n.target)
        elif isinstance(n, (cst.For, cst.CompFor)):
            out |= _target_names(n.target)
        elif isinstance(n, cst.NamedExpr):
            out |= _target_names(n.target)
        stack.extend(children(n, trivia=False))
    return out


def host_loop_names(loop: cst.CSTNode) -> set:
    """Targets of ``for x, y in loader`` that the body never rebinds (never moved to a device)."""
    if not isinstance(loop, cst.For):
        return set()
    return _target_names(loop.target) - _assigned_names(loop.body)


def only_reads(expr: cst.BaseExpression, names: set) -> bool:
    """Every name ``expr`` reads is in ``names`` (builtins aside) and it calls no model."""
    read = names_read(expr)
    return bool(read) and read <= names | _HOST_BUILTINS and not _moves(expr)


def _moves(expr: cst.CSTNode) -> bool:
    """``expr`` contains ``.cuda()`` / ``.to(...)``: part of it may be on a device."""
    stack = [expr]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in MOVES:
            return True
        stack.extend(children(n, trivia=False))
    return False


def log_call(call: cst.Call) -> bool:
    f = call.func
    last = f.attr.value if isinstance(f, cst.Attribute) else (f.value if isinstance(f, cst.Name) else "")
    return bool(_LOG_NAMES.match(last))


def only_logged(usage: "FunctionUsage", names: set) -> bool:
    """Every read of ``names`` in ``usage``'s tree is an argument of a print / logging call."""
    loads = [u for n in names if n for u in usage.loads.get(n, ())]
    return bool(loads) and all(usage.host_position(u) == "only logged" for u in loads)


class FunctionUsage:
    """Parent links and name loads of one function (or module) body, built on first use."""

    def __init__(self, root: cst.CSTNode) -> None:
        self.root = root
        self.parent: dict = {}
        self.loads: dict = {}  # name -> [Name nodes read]
        stores: set = set()  # Name nodes bound by an assignment / loop target (`a, b = ...`)
        names = []
        stack = [root]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Assign):
                for t in n.targets:
                    _store_names(t.target, stores)
            elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)):
                _store_names(n.target, stores)
            for c in children(n, trivia=False):
                self.parent[c] = n
                stack.append(c)
                if isinstance(c, cst.Name):
                    names.append((c, n))
        for c, n in reversed(names):
            if c not in stores and self._is_load(c, n):
                self.loads.setdefault(c.value, []).append(c)

    @staticmethod
    def _is_load(name: cst.Name, parent: cst.CSTNode) -> bool:
        if isinstance(parent, cst.Attribute) and parent.attr is name:
            return False
        if isinstance(parent, cst.AssignTarget) or (isinstance(parent, (cst.AugAssign, cst.AnnAssign))
                                                     and parent.target is name):
            return False
        if isinstance(parent, (cst.Arg, cst.Param)) and (parent.keyword is name if isinstance(parent, cst.Arg)
                                                           else parent.name is name):
            return False
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
            return False
        return True

    # ---- one expression's use -------------------------------------------------------------
    def _up(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.parent.get(node)

    def host_position(self, node: cst.BaseExpression) -> Optional[str]:
        """Why the value of ``node`` (an expression) only reaches the host, or None."""
        child, p = node, self._up(node)
        if isinstance(p, (cst.BinaryOperation, cst.UnaryOperation)):
            return self.host_position(p)  # `torch.arange(n) / 4`, `-torch.rand(1)`: same tensor kind
        if isinstance(p, (cst.Comparison, cst.ComparisonTarget, cst.BooleanOperation)) or (
                isinstance(p, (cst.If, cst.While, cst.IfExp, cst.Assert)) and p.test is child):
            return self._condition(child)
        if isinstance(p, (cst.Index, cst.Slice)):
            return "consumed by Python indexing"
        if isinstance(p, cst.Subscript) and p.value is child:
            return self.host_position(p)  # `torch.randperm(n)[:k]`: a slice of the same tensor
        if isinstance(p, cst.Attribute) and p.value is child:
            call = self._up(p)
            if isinstance(call, cst.Call) and call.func is p:
                if p.attr.value in ("item", "tolist", "numpy"):
                    return "read back on the host"
                if p.attr.value in _REDUCTIONS or p.attr.value in CAST_METHODS:
                    return self.host_position(call)  # `torch.ones(n).sum().item()`
            return None
        if isinstance(p, cst.Arg):
            call = self._up(p)
            if isinstance(call, cst.Call):
                f = call.func
                if isinstance(f, cst.Name) and f.value in _HOST_BUILTINS:
                    return "read back on the host"
                if log_call(call):
                    return "only logged"
                if isinstance(f, cst.Attribute) and f.attr.value in _SCALAR_ARG_METHODS:
                    return "a Python number argument"  # `fill_(v)`, `uniform_(a, b)`: read as numbers
                if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "torch" \
                        and p.keyword is None:
                    return self.host_position(call)  # `torch.exp(torch.empty(1).uniform_()).item()`
                if isinstance(f, cst.Attribute) and f.attr.value == "update" and isinstance(f.value, cst.Name) \
                        and isinstance(child, cst.Dict) and self._returned(f.value.value):
                    return "returned in a metrics dict" if self._string_keys(child) else None
            return None
        if isinstance(p, cst.Element) and isinstance(self._up(p), cst.Tuple):
            return self.host_position(self._up(p))  # `{"op": (torch.linspace(...), True)}`
        if isinstance(p, cst.FormattedStringExpression):
            return "only logged"
        if isinstance(p, cst.DictElement) and p.value is child:
            d = self._up(p)
            if isinstance(d, cst.Dict) and self._metrics_dict(d):
                return "returned in a metrics dict"
            if isinstance(d, cst.Dict) and self._string_keys(d):
                return self.host_position(d)  # `s.update({...})` of a returned dict
        return None

    def _condition(self, node: cst.CSTNode) -> Optional[str]:
        """``node`` only feeds a Python condition (``if torch.rand(1) < p:``)."""
        child, p = node, self._up(node)
        while True:
            if isinstance(p, (cst.Comparison, cst.ComparisonTarget, cst.BooleanOperation, cst.UnaryOperation)):
                child, p = p, self._up(p)
                continue
            call = self._up(p)
            if (isinstance(p, cst.Attribute) and p.value is child and p.attr.value in ("all", "any", "item")
                    and isinstance(call, cst.Call) and call.func is p and not call.args):
                child, p = call, self._up(call)  # `(torch.rand(1) < p).all()`: a Python bool
                continue
            if (isinstance(p, cst.Arg) and isinstance(call, cst.Call) and isinstance(call.func, cst.Name)
                    and call.func.value == "bool" and len(call.args) == 1):
                child, p = call, self._up(call)  # `bool(torch.rand(1) < p)`
                continue
            break
        if isinstance(p, (cst.If, cst.While, cst.IfExp, cst.Assert)) and p.test is child:
            return "steers Python control flow"
        return None

    def _returned(self, name: str) -> bool:
        """``name`` is returned (alone or as an element of a returned tuple)."""
        for u in self.loads.get(name, ()):
            p = self._up(u)
            if isinstance(p, cst.Element) and isinstance(self._up(p), cst.Tuple):
                p = self._up(self._up(p))
            if isinstance(p, cst.Return):
                return True
        return False

    @staticmethod
    def _string_keys(d: cst.Dict) -> bool:
        return all(isinstance(e, cst.DictElement) and isinstance(e.key, (cst.SimpleString, cst.ConcatenatedString))
                   for e in d.elements)

    def _metrics_dict(self, d: cst.Dict) -> bool:
        """A dict display with string keys that is returned, logged or stored as logs/metrics."""
        if not all(isinstance(e, cst.DictElement) and isinstance(e.key, (cst.SimpleString, cst.ConcatenatedString))
                   for e in d.elements):
            return False
        p = self._up(d)
        if isinstance(p, cst.Return):
            return True
        if isinstance(p, cst.Arg) and isinstance(self._up(p), cst.Call) and log_call(self._up(p)):
            return True
        if isinstance(p, cst.Assign):
            names = set()
            for t in p.targets:
                names |= _target_names(t.target)
            if any(self._returned(n) for n in names):
                return True  # `s = {...}; ...; return s`
            return any(re.search(r"log|metric|stat|info|result|out", n, re.I) for n in names)
        return False

    def chain_top(self, node: cst.CSTNode) -> cst.CSTNode:
        """``torch.arange(n)`` inside ``torch.arange(n).long()`` -> the whole cast chain."""
        while True:
            p = self._up(node)
            if isinstance(p, cst.Subscript) and p.value is node:
                node = p  # `torch.randperm(n)[:k]`
                continue
            call = self._up(p)
            if isinstance(p, cst.Arg) and isinstance(call, cst.Call) and _torch_unary(call, p):
                node = call  # `torch.triu(torch.ones(n, n), diagonal=1)`: a new host tensor from it alone
                continue
            if isinstance(p, cst.Arg) and isinstance(call, cst.Call) and _is_variable_wrap(call, p):
                node = call  # `Variable(torch.zeros(n))`: the legacy autograd wrapper is the tensor itself
                continue
            if not (isinstance(p, cst.Attribute) and p.value is node and p.attr.value in CAST_METHODS):
                return node
            call = self._up(p)
            if not (isinstance(call, cst.Call) and call.func is p):
                return node
            node = call

    # ---- a name's uses --------------------------------------------------------------------
    def bound_name(self, call: cst.CSTNode) -> Optional[tuple]:
        """(name, Assign) when ``call`` is the whole value of ``name = call``."""
        p = self._up(call)
        if isinstance(p, cst.Assign) and p.value is call and len(p.targets) == 1 \
                and isinstance(p.targets[0].target, cst.Name):
            return p.targets[0].target.value, p
        return None

    def host_only(self, call: cst.CSTNode, follow_return=None) -> Optional[str]:
        """Why ``call``'s value, directly or through the name it is bound to, stays on the host.

        ``follow_return(position)`` (optional) answers for a value the function returns
        (``position`` -1: returned whole, k: element k of a returned tuple): why the
        callers keep it on the host, or None.
        """
        call = self.chain_top(call)
        why = self.host_position(call)
        if why is not None:
            return why
        top = call
        while isinstance(self._up(top), (cst.BinaryOperation, cst.UnaryOperation)):
            top = self._up(top)  # `pos = torch.rand(1) * n`: the same tensor kind, bound
        bound = self.bound_name(top)
        if bound is None:
            return None
        name, assign = bound
        rebinds = _rebindings(self.root, name, assign)
        if rebinds is None:
            return None
        uses = self.loads.get(name, [])
        if not uses:
            return None
        reasons = set()
        for u in uses:
            r = self.host_position(u) or self._iterated(u) or self._rebound(u, rebinds)
            if r is None and follow_return is not None:
                pos = self._returned_at(u)
                r = follow_return(pos) if pos is not None else None
            if r is None:
                return None
            reasons.add(r)
        return " and ".join(sorted(reasons))

    def placed_later(self, call: cst.CSTNode) -> bool:
        """``t = factory(...)``, filled in place on the host, then only used moved
        (``t[:, 0] = ...; return t.to(device)``): it meets device tensors placed."""
        bound = self.bound_name(self.chain_top(call))
        if bound is None:
            return False
        name, assign = bound
        if name in _assigned_elsewhere(self.root, name, assign):
            return False
        uses = self.loads.get(name, [])
        moved = False
        for u in uses:
            p = self._up(u)
            if isinstance(p, cst.Attribute) and p.value is u:
                if p.attr.value in MOVES and isinstance(self._up(p), cst.Call):
                    moved = True
                    continue
                if p.attr.value in _METADATA:
                    continue
            if isinstance(p, cst.Subscript) and p.value is u and isinstance(self._up(p), cst.AssignTarget):
                continue  # `t[i] = v`: filled in place
            if self.host_position(u) or self._iterated(u):
                continue
            return False
        return moved

    def name_host_only(self, name: str) -> bool:
        """Every read of ``name`` here is a host use (indexing, a condition, logging, ...)."""
        if name == PLACED:
            return True
        uses = self.loads.get(name, [])
        return bool(uses) and all(self.host_position(u) or self._iterated(u) for u in uses)

    def _returned_at(self, name: cst.Name) -> Optional[int]:
        p = self._up(name)
        if isinstance(p, cst.Return):
            return -1
        if isinstance(p, cst.Element) and isinstance(self._up(p), cst.Tuple) and isinstance(
                self._up(self._up(p)), cst.Return):
            return list(self._up(p).elements).index(p)
        return None

    def call_targets(self, method: str, pos: int) -> list:
        """For each call ``self.<method>(...)`` / ``Cls.<method>(...)`` here: the name that
        receives the returned value at ``pos`` (-1: whole), or None when it is used otherwise."""
        out = []
        for n in self.parent:
            if not (isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                    and n.func.attr.value == method and isinstance(n.func.value, cst.Name)):
                continue
            p = self._up(n)
            if pos == -1 and isinstance(p, cst.Attribute) and p.attr.value in MOVES:
                out.append(PLACED)  # `self.make_mask(n).to(x.device)`: the caller places it
                continue
            tgt = p.targets[0].target if isinstance(p, cst.Assign) and len(p.targets) == 1 else None
            if pos == -1 and isinstance(tgt, cst.Name):
                out.append(tgt.value)
            elif pos >= 0 and isinstance(tgt, (cst.Tuple, cst.List)) and pos < len(tgt.elements) \
                    and isinstance(tgt.elements[pos].value, cst.Name):
                out.append(tgt.elements[pos].value.value)
            else:
                out.append(None)
        return out

    def _rebound(self, name: cst.Name, rebinds: list) -> Optional[str]:
        """The read only feeds a rebinding of its own name (``pos = torch.floor(pos[0]).long()``):
        a step of the same value, whose later reads are the ones that count (they are among
        the name's reads too). Climbs only what keeps the same tensor: a subscript of it, a
        cast or reduction of it, a ``torch.f(it)`` of it alone, arithmetic."""
        child, p = name, self._up(name)
        while True:
            if isinstance(p, (cst.BinaryOperation, cst.UnaryOperation)):
                pass
            elif isinstance(p, cst.Subscript) and p.value is child:
                pass
            elif isinstance(p, cst.Attribute) and p.value is child and isinstance(self._up(p), cst.Call) \
                    and (p.attr.value in CAST_METHODS or p.attr.value in _REDUCTIONS):
                child, p = p, self._up(p)
            elif isinstance(p, cst.Arg) and p.keyword is None and isinstance(self._up(p), cst.Call) \
                    and len(self._up(p).args) == 1 and isinstance(self._up(p).func, cst.Attribute) \
                    and isinstance(self._up(p).func.value, cst.Name) and self._up(p).func.value.value == "torch":
                child, p = p, self._up(p)  # `torch.floor(pos)`
            else:
                break
            child, p = p, self._up(p)
        if isinstance(p, cst.Assign) and p.value is child and any(p is a for a in rebinds):
            return "a step of the same value"
        return None

    def _iterated(self, name: cst.Name) -> Optional[str]:
        node, p = name, self._up(name)
        # `for s in scales[1:]`: a slice iterates the same elements in Python
        while isinstance(p, cst.Subscript) and p.value is node and all(
                isinstance(e.slice, cst.Slice) for e in p.slice):
            node, p = p, self._up(p)
        if isinstance(p, (cst.For, cst.CompFor)) and p.iter is node:
            return "iterated in Python"
        return None

    def _siblings(self, line) -> tuple:
        """(the statements of the block holding ``line``, its index there), or ([], None) when
        ``line`` is no simple statement line of a block."""
        block = self._up(line)
        if not isinstance(line, cst.SimpleStatementLine) or block is None or not hasattr(block, "body"):
            return [], None
        body = list(block.body)
        return body, next((i for i, s in enumerate(body) if s is line), None)

    def timed(self, stmt: cst.CSTNode) -> bool:
        """``stmt`` (a bare expression statement) is what a timer measures: in its block, a timer
        read (``ev0.record()``, ``t0 = time.perf_counter()``) comes before it and another after it,
        with nothing but bare calls between (more of the same, a synchronize): a benchmark of
        that very statement (a host-to-device copy timed on purpose, its result not wanted)."""
        body, idx = self._siblings(self._up(stmt))
        if idx is None:
            return False

        def bare(s) -> bool:
            return isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, cst.Expr) for x in s.body)

        def reads_timer(s) -> bool:
            return isinstance(s, cst.SimpleStatementLine) and any(
                isinstance(n, cst.Call) and _timer_call(n) for n in nodes(s))

        before = next((s for s in reversed(body[:idx]) if not (bare(s) and not reads_timer(s))), None)
        after = next((s for s in body[idx + 1:] if not (bare(s) and not reads_timer(s))), None)
        return before is not None and after is not None and reads_timer(before) and reads_timer(after)

    def moved_next(self, call: cst.CSTNode) -> bool:
        """``n = factory(...)`` whose next statement moves ``n`` (``n = n.cuda()``, maybe under ``if``);
        ``n = [factory(...) for ...]`` whose next statement moves it gathered (``pad_sequence(n).to(d)``)."""
        call = self.chain_top(call)
        comp = self._up(call)
        if isinstance(comp, (cst.ListComp, cst.GeneratorExp)) and comp.elt is call:
            call = comp
        bound = self.bound_name(call)
        if bound is None:
            return False
        name, assign = bound
        body, idx = self._siblings(self._up(assign))
        if idx is None or idx + 1 >= len(body):
            return False
        nxt = body[idx + 1]
        stmts = [nxt]
        if isinstance(nxt, cst.If):
            # `if use_cuda:` then an indented block, or the one-line `if use_cuda: n = n.cuda()`
            stmts = [nxt.body] if isinstance(nxt.body, cst.SimpleStatementSuite) else list(nxt.body.body)
        for s in stmts:
            if isinstance(s, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
                for small in s.body:
                    if _is_move_of(small, name):
                        return True
        return False


    def overwritten_next(self, call: cst.CSTNode) -> bool:
        """``n = factory(...)`` whose very next statement rebinds ``n`` without reading it: a
        dead value, never used anywhere."""
        call = self.chain_top(call)
        bound = self.bound_name(call)
        if bound is None:
            return False
        name, assign = bound
        line = self._up(assign)
        block = self._up(line)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or block is None \
                or not hasattr(block, "body"):
            return False
        body = list(block.body)
        idx = next((i for i, s in enumerate(body) if s is line), None)
        if idx is None or idx + 1 >= len(body) or not isinstance(body[idx + 1], cst.SimpleStatementLine):
            return False
        nxt = body[idx + 1].body[0]
        return (isinstance(nxt, cst.Assign) and len(nxt.targets) == 1 and isinstance(nxt.targets[0].target, cst.Name)
                and nxt.targets[0].target.value == name
                and not any(isinstance(n, cst.Name) and n.value == name for n in nodes(nxt.value)))


def _torch_unary(call: cst.Call, arg: cst.Arg) -> bool:
    """``torch.<fn>(arg, kw=<number>...)``: ``arg`` is the only tensor input."""
    f = call.func
    if not (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "torch"):
        return False
    if not call.args or call.args[0] is not arg or arg.keyword is not None or arg.star:
        return False
    return all(isinstance(a.value, (cst.Integer, cst.Float)) or (
        isinstance(a.value, cst.UnaryOperation) and isinstance(a.value.expression, (cst.Integer, cst.Float)))
        for a in call.args[1:])


def _is_variable_wrap(call: cst.Call, arg: cst.Arg) -> bool:
    """``Variable(t)`` / ``autograd.Variable(t, requires_grad=...)``: torch.autograd.Variable,
    which since torch 0.4 returns the tensor it is given."""
    f = call.func
    last = f.value if isinstance(f, cst.Name) else (f.attr.value if isinstance(f, cst.Attribute) else None)
    return last == "Variable" and bool(call.args) and call.args[0] is arg and arg.keyword is None and not arg.star


def _is_move_of(small: cst.CSTNode, name: str) -> bool:
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
        return False
    t, v = small.targets[0].target, factory_of_chain(small.value)
    if not (isinstance(t, cst.Name) and t.value == name and isinstance(v, cst.Call)):
        return False
    f = v.func
    if not (isinstance(f, cst.Attribute) and f.attr.value in MOVES):
        return False
    moved = factory_of_chain(f.value)
    if isinstance(moved, cst.Call) and isinstance(moved.func, cst.Attribute) and moved.func.attr.value == "pin_memory" \
            and not moved.args:
        moved = factory_of_chain(moved.func.value)  # `n.pin_memory().to(d, non_blocking=True)`: pinned for the copy
    if isinstance(moved, cst.Call) and (dotted(moved.func) or "").rsplit(".", 1)[-1] in _GATHERS:
        positional = [a for a in moved.args if a.keyword is None]
        moved = positional[0].value if len(positional) == 1 else None  # `pad_sequence(n, batch_first=True)`
    return isinstance(moved, cst.Name) and moved.value == name


def params_moved_first(fn: cst.FunctionDef, names) -> set:
    """Which of ``names`` (parameters of ``fn``) are moved before anything else reads them: the
    first top-level statement that mentions one is ``name = name.to(x)...`` (``.cuda()``,
    ``.type_as(x)``), so whatever the caller passes, the body only meets it where the move puts
    it. A ``.to`` that names only a dtype moves nothing. One pass over the statements."""
    out: set = set()
    if not isinstance(fn.body, cst.IndentedBlock):
        return out
    pending = set(names)
    for stmt in fn.body.body:
        if not pending:
            break
        hit = pending.intersection(n.value for n in _names_in(stmt))
        if not hit:
            continue
        pending -= hit
        if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
            continue
        for name in hit:
            if not _is_move_of(stmt.body[0], name):
                continue
            move = factory_of_chain(stmt.body[0].value)
            if not (move.func.attr.value == "to" and move.args
                    and all((dotted(a.value) or "").rsplit(".", 1)[-1] in DTYPE_NAMES for a in move.args)):
                out.add(name)
    return out


DTYPE_NAMES = frozenset("float float16 float32 float64 half double bfloat16 int int8 int16 int32 int64 long "
                        "short bool uint8 complex64 complex128 cfloat cdouble".split())


# torch functions that gather a list of tensors into one (on the device of their inputs)
_GATHERS = frozenset({"pad_sequence", "stack", "cat", "concat", "vstack", "hstack"})


def _rebindings(root: cst.CSTNode, name: str, assign: cst.Assign) -> Optional[list]:
    """The other bindings of ``name`` in ``root`` when each is a plain ``name = <expr>`` whose
    value reads ``name`` (a step of the same value: ``pos = torch.floor(pos[0]).long()``);
    None when some other binding gives the name another value (or binds it in a loop,
    an augmented or annotated assignment)."""
    out: list = []
    for n in _other_bindings(root, name, assign):
        if not (isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name)
                and any(isinstance(x, cst.Name) and x.value == name for x in _names_in(n.value))):
            return None
        out.append(n)
    return out


def _names_in(expr: cst.CSTNode):
    stack = [expr]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            yield n
        stack.extend(children(n, trivia=False))


def _other_bindings(root: cst.CSTNode, name: str, assign: cst.Assign):
    """Every statement of ``root`` besides ``assign`` that binds ``name``."""
    stack = [root]
    while stack:
        n = stack.pop()
        if n is not assign and isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For)):
            tgts = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            if any(name in _target_names(t) for t in tgts):
                yield n
        stack.extend(children(n, trivia=False))


def _assigned_elsewhere(root: cst.CSTNode, name: str, assign: cst.Assign) -> set:
    """{name} when ``name`` is bound anywhere in ``root`` besides ``assign``."""
    return {name} if next(_other_bindings(root, name, assign), None) is not None else set()


_CACHE: dict = {}


_TIMERS = frozenset({"time.time", "time.perf_counter", "time.perf_counter_ns", "time.monotonic",
                     "time.monotonic_ns", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns",
                     "timeit.default_timer", "default_timer"})


def _timer_call(call: cst.Call) -> bool:
    """A clock read: ``time.perf_counter()`` & co, or a CUDA event's ``ev.record()``."""
    d = dotted(call.func) or ""
    if d in _TIMERS:
        return True
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "record" and "." in d \
        and len(call.args) <= 1


def usage_of(root: cst.CSTNode) -> FunctionUsage:
    """The (cached per node, for the current file) usage of a function or module body."""
    u = _CACHE.get(id(root))
    if u is None or u.root is not root:
        if len(_CACHE) > 256:
            _CACHE.clear()
        u = _CACHE[id(root)] = FunctionUsage(root)
    return u
