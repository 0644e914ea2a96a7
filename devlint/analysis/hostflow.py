"""Host-built tensors that end up placed (DL006): follow a device-less factory through the
names it is bound to, rebound as (``k = torch.outer(k, k)``, ``k /= k.sum()``), derived into
(``d = torch.exp(torch.arange(n) * c)``) and filled into (``pe[0::4] = torch.sin(x * d)``),
to where it leaves the host-only computation.

The value is *placed* when every way out is a move (``k.to(x.device)``, ``.cuda()``), a
``self.register_buffer(...)`` (the module's ``.to()`` moves it), or a ``return`` whose every
caller in the class places the result at once or registers it; metadata reads (``k.shape``)
and Python indexing/conditions are no way out. Every step in between must combine the value
only with other host values: numbers, scalar parameters (annotated ``int``/``float``/... or
with a numeric default), scalar attributes (``self.d_model`` assigned from such a parameter),
and names bound only to such expressions in the function. A device tensor anywhere on the
way (a ``Tensor`` parameter, an unannotated parameter, ``self.weight``) makes the answer
"not placed": that mix is the bug DL006 reports.

Such a factory is no DL006 bug: it never meets a device tensor on the host. (A per-call host
build that is moved is a host-allocation cost; ``torch.tensor(<Python data>)`` has to cross
to the device anyway.)
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Set

import libcst as cst

from devlint.analysis.usage import MOVES, usage_of
from devlint.facts import DEVICE_LESS_FACTORIES, dotted
from devlint.syntax import bound_names, factory_takes_device, own_params
from devlint.walk import nodes

_SCALAR_TYPES = frozenset({"int", "float", "bool", "str", "tuple", "list", "Tuple", "List", "Sequence",
                           "Optional", "Union", "dtype", "Iterable", "complex"})
_METADATA = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "size", "dim", "numel"})
_PY_SCALAR_CALLS = frozenset({"int", "float", "len", "round", "abs", "min", "max", "bool", "range", "sum",
                              "enumerate", "zip", "reversed"})


def _annotation_scalar(ann: Optional[cst.Annotation]) -> bool:
    if ann is None:
        return False
    names = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            names.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            names.add(n.attr.value)
            return False

    ann.annotation.visit(V())
    return bool(names) and names <= (_SCALAR_TYPES | {"None", "torch", "typing"})


def _number(e: cst.BaseExpression) -> bool:
    if isinstance(e, (cst.Integer, cst.Float)):
        return True
    if isinstance(e, cst.UnaryOperation):
        return _number(e.expression)
    if isinstance(e, cst.Name):
        return e.value in ("True", "False")
    if isinstance(e, (cst.Tuple, cst.List)):
        return all(_number(x.value) for x in e.elements)
    return False


def _math_number(facts, e: cst.BaseExpression) -> bool:
    """``math.log(p)``, ``-math.pi``: a Python float."""
    if isinstance(e, cst.UnaryOperation):
        e = e.expression
    if isinstance(e, cst.Call):
        e = e.func
    return (facts.qualname(e) or "").startswith("math.")


def _dtype_expr(facts, e: cst.BaseExpression) -> bool:
    """``x.dtype``, ``torch.float32``: what ``.to()`` casts to without moving."""
    if isinstance(e, cst.Attribute) and e.attr.value == "dtype":
        return True
    q = facts.qualname(e) or ""
    return q.startswith("torch.") and q[6:] in _TORCH_DTYPES


_TORCH_DTYPES = frozenset("float32 float float64 double float16 half bfloat16 int64 long int32 int int16 short "
                          "int8 uint8 bool complex64 complex128".split())


def scalar_params(fn: cst.FunctionDef) -> Set[str]:
    """Parameters that hold Python values: a scalar annotation or a numeric default."""
    out = set()
    for prm in own_params(fn):
        if _annotation_scalar(prm.annotation) or (prm.annotation is None and prm.default is not None
                                                   and _number(prm.default)):
            out.add(prm.name.value)
    return out


def _cpu_literal(e: Optional[cst.BaseExpression]) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    if isinstance(e, cst.Call) and dotted(e.func) == "torch.device" and len(e.args) == 1:
        e = e.args[0].value
    return isinstance(e, cst.SimpleString) and e.evaluated_value == "cpu"


def _host_method_call(value: cst.BaseExpression, methods: Dict[str, cst.FunctionDef]) -> bool:
    """``self._make_pairs(n)``: a call of the class's own method that builds its tensors on the
    host. The method names no device but its own ``device`` parameter, whose default is the
    CPU, and the call does not pass that parameter (torchvision's
    ``self._wh_pairs = self._generate_wh_pairs(num_outputs)``). Assigned to a plain attribute,
    the result stays there: ``model.to()`` moves no plain attribute."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and dotted(value.func.value) == "self" and value.func.attr.value in methods):
        return False
    fn = methods[value.func.attr.value]
    if any(a.star or (a.keyword is not None and a.keyword.value == "device") for a in value.args):
        return False
    params = [p for p in (*fn.params.posonly_params, *fn.params.params)][1:]  # without self
    dev = [i for i, p in enumerate(params) if p.name.value == "device"]
    for p in (*fn.params.params, *fn.params.kwonly_params):
        if p.name.value == "device" and not _cpu_literal(p.default):
            return False
    if dev and sum(a.keyword is None for a in value.args) > dev[0]:
        return False  # the device passed by position

    for n in nodes(fn.body, into_scopes=True):
        if isinstance(n, cst.Arg) and n.keyword is not None and n.keyword.value == "device" and not (
                isinstance(n.value, cst.Name) and n.value.value == "device"):
            return False  # names a device of its own
        if isinstance(n, cst.Attribute) and n.attr.value in ("cuda", "to", "register_buffer"):
            return False
    return True


def scalar_attributes(cls: Optional[cst.ClassDef]) -> Set[str]:
    """``self.<attr>`` assigned in the class only numbers or scalar parameters of the method,
    or (a plain attribute the module's ``.to()`` never moves) the host build of one of the
    class's own methods."""
    if cls is None:
        return set()
    values: Dict[str, list] = {}
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    for stmt in cls.body.body:
        if not isinstance(stmt, cst.FunctionDef):
            continue
        params = scalar_params(stmt)
        stack = [stmt.body]
        while stack:
            n = stack.pop()
            if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                tgts = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
                for t in tgts:
                    d = dotted(t)
                    if d is not None and d.startswith("self.") and d.count(".") == 1:
                        ok = n.value is not None and (_number(n.value) or (
                            isinstance(n.value, cst.Name) and n.value.value in params)
                            or _host_method_call(n.value, methods))
                        values.setdefault(d, []).append(ok)
            stack.extend(c for c in n.children if isinstance(c, cst.CSTNode))
    return {d for d, oks in values.items() if all(oks)}


class _Flow:
    def __init__(self, fn: cst.FunctionDef, cls: Optional[cst.ClassDef]) -> None:
        self.fn = fn
        self.use = usage_of(fn)
        self.scalars = scalar_params(fn)
        self.attrs = scalar_attributes(cls)
        self.host = self._host_names()

    # ---- which names hold host values -------------------------------------------------
    def _bindings(self) -> Dict[str, list]:
        out: Dict[str, list] = {}
        for n in self.use.parent:
            if isinstance(n, cst.Assign):
                for t in n.targets:
                    if isinstance(t.target, cst.Name):
                        out.setdefault(t.target.value, []).append(n.value)
                    else:  # `a, b = host_value` unpacks host values
                        for x in bound_names(t.target):
                            out.setdefault(x, []).append(
                                n.value if isinstance(t.target, (cst.Tuple, cst.List)) else None)
            elif isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name):
                out.setdefault(n.target.value, []).append(
                    cst.BinaryOperation(n.target, cst.Add(), n.value))  # same operands
            elif isinstance(n, cst.AnnAssign) and isinstance(n.target, cst.Name):
                out.setdefault(n.target.value, []).append(n.value)
            elif isinstance(n, (cst.For, cst.CompFor)) and not isinstance(n.target, (cst.Attribute, cst.Subscript)):
                for x in bound_names(n.target):  # iterating host values gives host values
                    out.setdefault(x, []).append(n.iter)
            elif isinstance(n, (cst.WithItem, cst.NamedExpr)):
                tgt = n.asname.name if isinstance(n, cst.WithItem) and n.asname else getattr(n, "target", None)
                for x in bound_names(tgt) if tgt is not None else ():
                    out.setdefault(x, []).append(None)
        return out

    def _host_names(self) -> Set[str]:
        binds = self._bindings()
        host = {n for n, vs in binds.items() if all(v is not None for v in vs)}
        changed = True
        while changed:
            changed = False
            for n in list(host):
                if not all(self.host_expr(v, host) for v in binds[n]):
                    host.discard(n)
                    changed = True
        return host

    def host_expr(self, e: cst.BaseExpression, host: Optional[Set[str]] = None) -> bool:
        host = self.host if host is None else host
        h = lambda x: self.host_expr(x, host)  # noqa: E731
        if isinstance(e, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
            return True
        if isinstance(e, cst.Name):
            return e.value in host or e.value in self.scalars or e.value in ("True", "False", "None")
        if isinstance(e, cst.Attribute):
            d = dotted(e)
            if d is not None and (d.startswith(("math.", "torch.")) and d.count(".") == 1):
                return True  # `math.pi`, `torch.float32`
            if d is not None and d in self.attrs:
                return True
            return e.attr.value in _METADATA  # `x.shape`, `x.dtype`: Python values, whatever `x` is
        if isinstance(e, cst.Subscript):
            if isinstance(e.value, cst.Attribute) and e.value.attr.value == "shape":
                return True  # `x.shape[0]`: a Python int
            return h(e.value) and all(_slice_host(s, h) for s in e.slice)
        if isinstance(e, cst.BinaryOperation):
            return h(e.left) and h(e.right)
        if isinstance(e, cst.UnaryOperation):
            return h(e.expression)
        if isinstance(e, cst.Comparison):
            return h(e.left) and all(h(c.comparator) for c in e.comparisons)
        if isinstance(e, cst.BooleanOperation):
            return h(e.left) and h(e.right)
        if isinstance(e, cst.IfExp):
            return h(e.body) and h(e.orelse)
        if isinstance(e, (cst.Tuple, cst.List)):
            return all(h(x.value) for x in e.elements if isinstance(x, cst.Element))
        if isinstance(e, (cst.ListComp, cst.GeneratorExp)):
            return h(e.elt)
        if isinstance(e, cst.Call):
            return self._host_call(e, h)
        return False

    def _host_call(self, e: cst.Call, h: Callable) -> bool:
        f = e.func
        args_host = all(h(a.value) for a in e.args if not a.star)
        if any(a.star for a in e.args):
            return False
        if isinstance(f, cst.Name):
            return f.value in _PY_SCALAR_CALLS and args_host
        d = dotted(f)
        if d is not None and d.startswith("torch.") and d.count(".") == 1:
            name = d[len("torch."):]
            if any(a.keyword is not None and a.keyword.value in ("device", "out") for a in e.args):
                return False
            if name in DEVICE_LESS_FACTORIES:
                return True  # without `device=`: a host tensor (sizes, Python data)
            return args_host  # `torch.outer(k, k)`, `torch.exp(...)`, `torch.finfo(dtype).min` below
        if isinstance(f, cst.Attribute):
            if f.attr.value in ("size", "dim", "numel") and args_host:
                return True  # a Python int, whatever the receiver
            if f.attr.value == "to" and e.args and all(a.keyword is not None and a.keyword.value in ("dtype", "copy")
                                                        for a in e.args):
                return h(f.value) and args_host  # `.to(dtype=...)`: a cast, no move
            if f.attr.value in MOVES or f.attr.value in ("cpu", "pin_memory"):
                return False
            if d is not None and d.startswith("math."):
                return args_host
            return h(f.value) and args_host
        return False

    # ---- where a value goes -------------------------------------------------------------
    def _top(self, node: cst.CSTNode) -> cst.CSTNode:
        """Walk up while the enclosing expression is still a host value built from ``node``."""
        up = self.use.parent.get
        while True:
            p = up(node)
            if isinstance(p, (cst.Arg, cst.Element, cst.ComparisonTarget, cst.Index, cst.SubscriptElement,
                              cst.Slice)):
                outer = up(p)
                if isinstance(p, (cst.Index, cst.Slice)):
                    outer = up(up(p))  # Index -> SubscriptElement -> Subscript
                if isinstance(outer, cst.BaseExpression) and self.host_expr(outer):
                    node = outer
                    continue
                return node
            if isinstance(p, cst.Attribute) and p.value is node:
                if p.attr.value in _METADATA:
                    return p  # `k.shape`: a Python value from here on
                call = up(p)
                if isinstance(call, cst.Call) and call.func is p and self.host_expr(call):
                    node = call
                    continue
                return node
            if isinstance(p, cst.BaseExpression) and self.host_expr(p):
                node = p
                continue
            return node

    def _way_out(self, node: cst.CSTNode, names: list, follow_return) -> Optional[bool]:
        """True: placed here; None: no way out (stays host-only or feeds a tracked name);
        False: it meets something else."""
        top = self._top(node)
        up = self.use.parent.get
        if isinstance(top, cst.Attribute) and top.attr.value in _METADATA:
            return None
        p = up(top)
        if isinstance(p, cst.Attribute) and p.value is top:
            call = up(p)
            if p.attr.value in MOVES and isinstance(call, cst.Call) and call.func is p:
                return True
            return False
        if isinstance(p, cst.Assign) and p.value is top:
            for t in p.targets:
                tgt = t.target
                if isinstance(tgt, cst.Subscript):
                    tgt = tgt.value  # `pe[0::4] = ...`: fills the table `pe`
                if isinstance(tgt, (cst.Tuple, cst.List)):  # `ys, xs = torch.meshgrid(...)`
                    unpacked = bound_names(tgt)
                    if not unpacked or not all(x in self.host for x in unpacked):
                        return False
                    names.extend(unpacked)
                    continue
                if not isinstance(tgt, cst.Name):
                    return False
                if tgt.value not in self.host:
                    if self._branch_binding(tgt.value, p):
                        pass
                    elif self._rebinding(tgt.value, p):
                        self.after[tgt.value] = p  # reads up to here see the name's earlier value
                    else:
                        return False
                    self.host = self.host | {tgt.value}  # for this question only (ends_placed restores it)
                names.append(tgt.value)
            return None
        if isinstance(p, cst.DictElement) and p.value is top and self.data:
            return self._logged(up(p))  # `log = {"disc_factor": torch.tensor(f)}; return loss, log`
        if isinstance(p, (cst.ListComp, cst.GeneratorExp)) and p.elt is top:
            return self._way_out(p, names, follow_return)  # `[torch.tensor(ids) for ids in batch]`: the list goes on
        if isinstance(p, cst.Arg) and p.keyword is None and isinstance(up(p), cst.Call) and \
                (dotted(up(p).func) or "").rsplit(".", 1)[-1] in _GATHERS and \
                [a for a in up(p).args if a.keyword is None] == [p]:
            return self._way_out(up(p), names, follow_return)  # `pad_sequence(targets)`: padded on the host, goes on
        if isinstance(p, cst.AugAssign) and p.value is top:
            if isinstance(p.target, cst.Name) and p.target.value in self.host:
                names.append(p.target.value)
                return None
            return False
        if isinstance(p, cst.AssignTarget) or (isinstance(p, cst.Subscript) and p.value is top
                                              and isinstance(up(p), cst.AssignTarget)):
            return None  # `k[i] = v`: written into, not read out
        if isinstance(p, cst.Expr):
            if isinstance(top, cst.Call) and isinstance(top.func, cst.Attribute) \
                    and top.func.attr.value in ("append", "extend") and isinstance(top.func.value, cst.Name) \
                    and top.func.value.value in self.host:
                names.append(top.func.value.value)  # `boxes.append(box)`: collected in a host list
            return None  # `k.fill_(v)` / `k.triu_(1)` with host arguments: filled in place on the host
        if isinstance(p, cst.Arg) and _register_buffer(up(p)):
            return True
        if isinstance(p, cst.Element) and isinstance(up(p), cst.Tuple) and isinstance(up(up(p)), cst.Return) \
                and self.data:
            p = up(up(p))  # `return i, j, v`: one element of the returned tuple
        if isinstance(p, cst.Return):
            if self.data:
                return True  # Python data leaves the method: it crosses to a device only by a copy anyway
            return bool(follow_return is not None and follow_return())
        why = self.use.host_position(top)
        if why is not None:
            return None
        if isinstance(p, (cst.If, cst.While)) and p.test is top:
            return None
        return False

    def _logged(self, d: cst.CSTNode) -> Optional[bool]:
        """A dict of Python data the method returns (itself, as a tuple element, or through the one
        name it is bound to): it leaves as data (a log dict); what callers do with it crosses to a
        device only by a copy anyway."""
        up = self.use.parent.get

        def returned(node) -> bool:
            p = up(node)
            if isinstance(p, cst.Element) and isinstance(up(p), cst.Tuple):
                p = up(up(p))
            return isinstance(p, cst.Return)

        def written_into(node) -> bool:  # `log[f"{split}/perplexity"] = p`: more entries, not a read
            p = up(node)
            return isinstance(p, cst.Subscript) and p.value is node and isinstance(up(p), cst.AssignTarget)

        if returned(d):
            return True
        p = up(d)
        if isinstance(p, cst.Assign) and p.value is d and len(p.targets) == 1 and isinstance(p.targets[0].target, cst.Name):
            loads = self.use.loads.get(p.targets[0].target.value, [])
            if any(returned(u) for u in loads) and all(returned(u) or written_into(u) for u in loads):
                return True
        return False

    def ends_placed(self, call: cst.Call, follow_return) -> bool:
        host = self.host
        self.after: Dict[str, cst.CSTNode] = {}  # name -> the statement rebinding it to the value
        try:
            return self._ends_placed(call, follow_return)
        finally:
            self.host = host

    def _ends_placed(self, call: cst.Call, follow_return) -> bool:
        self.data = _data_factory(call)
        placed = False
        names: list = []
        top = self.use.chain_top(call)
        r = self._way_out(top, names, follow_return)
        if r is False:
            return False
        placed |= bool(r)
        # the names the factory's own statement binds: a read in another branch of an `if` around
        # that statement reads another binding (`if w > 0: p = loss(x) ... else: p = torch.tensor(0.)`)
        first = set(names)
        binding = self.use.parent.get(top)
        seen: Set[str] = set()
        while names:
            n = names.pop()
            if n in seen:
                continue
            seen.add(n)
            for u in self.use.loads.get(n, []):
                if n in first and isinstance(binding, cst.Assign) and self._other_branch(binding, u):
                    continue
                if n in self.after and self._reads_before(u, self.after[n]):
                    continue
                r = self._way_out(u, names, follow_return)
                if r is False:
                    return False
                placed |= bool(r)
        return placed


    def _branch_binding(self, name: str, stmt: cst.Assign) -> bool:
        """``stmt`` binds ``name`` in one branch of an ``if`` and every other binding of it lies in
        another branch (``if w > 0: p = loss(x) else: p = torch.tensor([0.0])``): what follows the
        ``if`` may hold either, what the other branch reads is the other one."""
        others = [n for n in self._binders_of(name) if n is not stmt]
        return bool(others) and all(isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign))
                                    and self._other_branch(stmt, n) for n in others)

    def _binders_of(self, name: str) -> list:
        binders = self.__dict__.get("_binders")
        if binders is None:  # name -> the nodes binding it, once per method
            binders = self.__dict__["_binders"] = {}
            for n in self.use.parent:
                if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.WithItem,
                                  cst.NamedExpr)):
                    for x in _assigned_names(n):
                        binders.setdefault(x, []).append(n)
        return binders.get(name, [])

    def _line_of(self, stmt: cst.CSTNode):
        """``(block, index)`` of the simple statement line holding ``stmt`` in a block of the
        method with no loop around it (a loop could carry a later binding round to it)."""
        up = self.use.parent.get
        line = up(stmt)
        block = up(line)
        if not isinstance(line, cst.SimpleStatementLine) or not isinstance(block, cst.IndentedBlock):
            return None
        node = block
        while node is not None and node is not self.fn:
            if isinstance(node, (cst.For, cst.While)):
                return None
            node = up(node)
        return block, block.body.index(line)

    def _within_earlier(self, node: cst.CSTNode, block, index: int) -> bool:
        """``node`` sits in one of ``block``'s statements before ``index``."""
        up = self.use.parent.get
        earlier = {id(s) for s in block.body[:index]}
        while node is not None:
            if id(node) in earlier:
                return True
            node = up(node)
        return False

    def _rebinding(self, name: str, stmt: cst.Assign) -> bool:
        """``stmt`` rebinds ``name`` after every other binding of it, in straight-line code
        (``anchors = self.anchors(sizes)`` ... ``anchors = torch.cat([torch.tensor(a) for a in
        anchors])``): reads after it see the new value, reads up to it the old one."""
        at = self._line_of(stmt)
        if at is None:
            return False
        others = [n for n in self._binders_of(name) if n is not stmt]
        return bool(others) and all(self._within_earlier(n, *at) for n in others)

    def _reads_before(self, use: cst.CSTNode, stmt: cst.Assign) -> bool:
        """``use`` reads the name before ``stmt`` rebinds it: in its value, or earlier."""
        up = self.use.parent.get
        node = use
        while node is not None:
            if node is stmt:
                return True
            node = up(node)
        at = self._line_of(stmt)
        return at is not None and self._within_earlier(use, *at)

    def _other_branch(self, stmt: cst.CSTNode, use: cst.CSTNode) -> bool:
        """``use`` sits in another branch of an ``if`` that encloses ``stmt`` (with no loop between
        them that could carry the binding round to it)."""
        up = self.use.parent.get
        inside: set = set()
        node = use
        while node is not None:
            inside.add(id(node))
            node = up(node)
        child, node = stmt, up(stmt)
        while node is not None and not isinstance(node, (cst.For, cst.While, cst.FunctionDef, cst.Lambda)):
            if isinstance(node, cst.If) and id(node) in inside:
                mine = node.body if child is node.body else node.orelse
                other = node.orelse if mine is node.body else node.body
                return other is not None and id(other) in inside and not id(mine) in inside
            child, node = node, up(node)
        return False


def _assigned_names(n: cst.CSTNode) -> set:
    if isinstance(n, cst.Assign):
        return {x for t in n.targets for x in bound_names(t.target)}
    if isinstance(n, (cst.AugAssign, cst.AnnAssign)):
        return set(bound_names(n.target))
    if isinstance(n, (cst.For, cst.CompFor)):
        return set(bound_names(n.target))
    if isinstance(n, cst.WithItem):
        return set(bound_names(n.asname.name)) if n.asname else set()
    if isinstance(n, cst.NamedExpr):
        return set(bound_names(n.target))
    return set()


# torch functions that gather a list of host tensors into one on the host
_GATHERS = frozenset({"pad_sequence", "stack", "cat", "concat", "vstack", "hstack"})


def _data_factory(call: cst.Call) -> bool:
    """``torch.tensor(value)`` / ``torch.as_tensor(data)`` of Python data (not a literal number)."""
    d = dotted(call.func) or ""
    return d.rsplit(".", 1)[-1] in ("tensor", "as_tensor") and bool(call.args) \
        and not isinstance(call.args[0].value, (cst.Integer, cst.Float))


def declares_host(fn: cst.FunctionDef) -> bool:
    """The function binds the CPU device to a name (``host = torch.device("cpu")``) and moves
    values to it: it computes on the host on purpose, its device-less factories are host values."""
    use = usage_of(fn)
    names = set()
    for n in use.parent:
        if isinstance(n, cst.Assign) and isinstance(n.value, cst.Call) and dotted(n.value.func) == "torch.device" \
                and n.value.args and isinstance(n.value.args[0].value, cst.SimpleString) \
                and n.value.args[0].value.evaluated_value == "cpu":
            names |= {t.target.value for t in n.targets if isinstance(t.target, cst.Name)}
    if not names:
        return False
    for n in use.parent:
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "to" \
                and n.args and isinstance(n.args[0].value, cst.Name) and n.args[0].value.value in names:
            return True
    return False


def _slice_host(s: cst.SubscriptElement, h: Callable) -> bool:
    sl = s.slice
    if isinstance(sl, cst.Index):
        return isinstance(sl.value, cst.Name) or h(sl.value)  # `t[k]`: a loop counter or a host index
    if isinstance(sl, cst.Slice):
        return all(x is None or h(x) for x in (sl.lower, sl.upper, sl.step))
    return False


def _register_buffer(call: Optional[cst.CSTNode]) -> bool:
    return (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "register_buffer")


def callers_place(method: cst.FunctionDef, cls: Optional[cst.ClassDef]) -> bool:
    """Every call of ``self.<method>(...)`` in the class places the result at once
    (``self.build(n).to(x.device)``, or moved by the next statement) or registers it as a buffer (``b = self.build(n);
    self.register_buffer("b", b)``); there is at least one call."""
    if cls is None:
        return False
    found = False
    for stmt in cls.body.body:
        if not isinstance(stmt, cst.FunctionDef) or stmt is method:
            continue
        use = usage_of(stmt)
        for n in use.parent:
            if not (isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                    and n.func.attr.value == method.name.value and isinstance(n.func.value, cst.Name)
                    and n.func.value.value in ("self", "cls")):
                continue
            found = True
            p = use.parent.get(n)
            if isinstance(p, cst.Attribute) and p.attr.value in MOVES:
                continue
            if isinstance(p, cst.Arg) and _register_buffer(use.parent.get(p)):
                continue
            if use.moved_next(n):
                continue  # `boxes = self._grid(...)` then `boxes = boxes.to(device)`
            bound = use.bound_name(n)
            if bound is None:
                return False
            uses = use.loads.get(bound[0], [])
            if not uses:
                return False
            for u in uses:
                a = use.parent.get(u)
                if isinstance(a, cst.Arg) and _register_buffer(use.parent.get(a)):
                    continue
                if isinstance(a, cst.Attribute) and a.attr.value in MOVES:
                    continue
                return False
    return found


_CACHE: dict = {}


def ends_placed(call: cst.Call, method: cst.FunctionDef, cls: Optional[cst.ClassDef]) -> bool:
    """``call`` (a device-less factory in ``method``) only ever meets host values and leaves the
    host computation moved, registered as a buffer, or returned to callers that place it."""
    key = (id(method), id(cls))
    flow = _CACHE.get(key)
    if flow is None or flow.fn is not method:
        if len(_CACHE) > 64:
            _CACHE.clear()
        flow = _CACHE[key] = _Flow(method, cls)
    return flow.ends_placed(call, lambda: callers_place(method, cls))


# ---- host builds moved at once (DL007) ------------------------------------------------------
# `torch.linspace(0, n, k).unsqueeze(1).expand(k, m).to(x)`, `torch.arange(n).long().to(d)`,
# `torch.LongTensor(b, n).fill_(0).to(d)`, `torch.pow(c * torch.ones(n), torch.arange(n)).to(d)`:
# an expression built on the host from device-less factories through shape / dtype methods,
# arithmetic with numbers and elementwise torch functions, then copied as a whole.

LEGACY_DTYPES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16", "LongTensor": "int64", "IntTensor": "int32",
    "ShortTensor": "int16", "CharTensor": "int8", "ByteTensor": "uint8", "BoolTensor": "bool",
}
# methods that reshape or cast a tensor and leave it where it is; none takes a tensor argument
SHAPE_METHODS = frozenset("unsqueeze squeeze view reshape expand repeat t transpose permute flatten "
                          "contiguous float double half bfloat16 long int bool short byte".split())
# elementwise torch functions: applied to host builds, they compute on the host too
ELEMENTWISE = frozenset("pow exp log log2 log10 sqrt rsqrt sin cos tanh sigmoid abs neg reciprocal "
                        "floor ceil round clamp mul add sub div".split())
_BUILD_OPS = (cst.Multiply, cst.Add, cst.Subtract, cst.Divide, cst.FloorDivide, cst.Power)
_NO_BUILD_KW = ("device", "pin_memory", "out", "generator")
_RANDOM = frozenset({"rand", "randn", "randint", "randperm", "normal"})
_COMPUTING_FACTORIES = frozenset({"zeros", "ones", "full", "empty", "arange", "range", "linspace", "logspace",
                                  "eye", "rand", "randn", "randint", "randperm", "empty_strided", "normal"})


class HostBuild:
    """What a host-built expression is made of: ``factories`` (device-less factory calls),
    ``legacy`` (``(constructor, fill call, fill value or None)`` for ``torch.LongTensor(b, n).fill_(0)``),
    ``operands`` (names and attributes combined with it by arithmetic: numbers, or maybe host
    tensors), ``computed`` (an elementwise torch function computes values from it) and
    ``random`` (a factory draws random numbers)."""

    def __init__(self) -> None:
        self.factories: list = []
        self.legacy: list = []
        self.operands: list = []
        self.computed = False

    @property
    def random(self) -> bool:
        return any(dotted(f.func).rsplit(".", 1)[-1] in _RANDOM for f in self.factories) or any(
            v is DRAW for _, _, v in self.legacy)


# markers for ``HostBuild.legacy`` entries that are no fill with a number: an in-place random
# draw (``torch.FloatTensor(*s).uniform_(-e, e)``) or no fill at all (``torch.LongTensor(b, 0)``)
DRAW = object()
UNFILLED = object()
_DRAWS = frozenset({"uniform_", "normal_"})


def _factory(facts, call: cst.Call) -> Optional[str]:
    """``torch.zeros(...)`` with no device and nothing that pins it to the host: its name."""
    q = facts.qualname(call.func)
    if q is None or not q.startswith("torch.") or q.count(".") != 1:
        return None
    name = q.rsplit(".", 1)[-1]
    if name not in _COMPUTING_FACTORIES or any(a.star for a in call.args) or not factory_takes_device(name, call):
        return None
    if any(a.keyword is not None and a.keyword.value in _NO_BUILD_KW for a in call.args):
        return None
    return name


def legacy_type(facts, call: cst.Call) -> Optional[str]:
    """``torch.LongTensor(b, n)`` (sizes, not data): the type's name (``LongTensor``, ``Tensor``)."""
    q = facts.qualname(call.func)
    if q is None or q.count(".") != 1 or not q.startswith("torch."):
        return None
    name = q.rsplit(".", 1)[-1]
    if name != "Tensor" and name not in LEGACY_DTYPES:
        return None
    if not call.args or any(a.keyword is not None or a.star == "**" for a in call.args):
        return None
    if any(isinstance(a.value, (cst.List, cst.Tuple, cst.ListComp, cst.SimpleString)) for a in call.args):
        return None  # data
    return name


def _size_free(e: cst.BaseExpression) -> bool:
    """A shape argument that holds no tensor: numbers, names, attributes, ``x.size(i)``, ``len(x)``."""
    for n in nodes(e):
        if isinstance(n, cst.Call):
            f = n.func
            if not ((isinstance(f, cst.Attribute) and f.attr.value in ("size", "dim"))
                    or (isinstance(f, cst.Name) and f.value in ("len", "int"))):
                return False
    return True


def host_build(facts, expr: cst.BaseExpression) -> Optional[HostBuild]:
    """``expr`` is computed on the host from device-less factories only (see above), or None."""
    out = HostBuild()
    return out if _build(facts, expr, out) and (out.factories or out.legacy) else None


def _number_name(facts, e: cst.BaseExpression) -> bool:
    """A name every scope of the file that binds it binds once, to a number (``source_label = 0``
    in ``main()`` or at module level), and no parameter is called: a Python number wherever it is
    read."""
    if not isinstance(e, cst.Name) or facts.values is None:
        return False
    scopes = [scope for scope, names in facts.assigned_in.items() if e.value in names]
    return bool(scopes) and all(isinstance(facts.values.sole_value(e.value, scope), (cst.Integer, cst.Float))
                                for scope in scopes)


def _build(facts, e: cst.BaseExpression, out: HostBuild) -> bool:
    if isinstance(e, cst.Call):
        f = e.func
        if _factory(facts, e) is not None:
            out.factories.append(e)
            return True
        if isinstance(f, cst.Attribute) and f.attr.value in ("fill_", "zero_") and isinstance(f.value, cst.Call) \
                and legacy_type(facts, f.value) is not None:
            value = e.args[0].value if f.attr.value == "fill_" and len(e.args) == 1 else None
            if f.attr.value == "fill_" and (value is None or e.args[0].keyword is not None
                                            or not (isinstance(value, (cst.Integer, cst.Float, cst.UnaryOperation))
                                                    or _number_name(facts, value))):
                return False  # a fill from a name may be a tensor on any device
            out.legacy.append((f.value, e, value))
            return True
        if isinstance(f, cst.Attribute) and f.attr.value in _DRAWS and isinstance(f.value, cst.Call) \
                and legacy_type(facts, f.value) is not None and not any(a.star for a in e.args):
            out.legacy.append((f.value, e, DRAW))  # `torch.FloatTensor(*x.shape).uniform_(-eps, eps)`
            return True
        if legacy_type(facts, e) is not None and (len(e.args) > 1 or e.args[0].star):
            out.legacy.append((e, e, UNFILLED))  # `torch.LongTensor(b, 0)`: sizes, values never set
            return True
        if isinstance(f, cst.Attribute) and f.attr.value in SHAPE_METHODS and facts.qualname(f) is None:
            return all(a.keyword is None and a.star != "**" and _size_free(a.value) for a in e.args) \
                and _build(facts, f.value, out)
        if isinstance(f, cst.Attribute) and f.attr.value in ("to", "type") and len(e.args) == 1 \
                and e.args[0].keyword is None and _dtype_expr(facts, e.args[0].value):
            return _build(facts, f.value, out)  # `.to(x.dtype)`, `.type(ref.dtype)`: a cast on the host
        q = facts.qualname(f) or ""
        if q.startswith("torch.") and q.count(".") == 1 and q[6:] in ELEMENTWISE and e.args \
                and all(a.keyword is None and not a.star for a in e.args):
            built = [a for a in e.args if not _number(a.value)]
            if not built or not all(_build(facts, a.value, out) for a in built):
                return False
            out.computed = True
            return True
        return False
    if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, _BUILD_OPS):
        sides = []
        for side in (e.left, e.right):
            if _number(side) or _math_number(facts, side):
                continue
            if isinstance(side, (cst.Name, cst.Attribute)) and facts.qualname(side) is None:
                out.operands.append(side)
                continue
            sides.append(side)
        return bool(sides) and all(_build(facts, s, out) for s in sides)
    return False


def int_valued(facts, e: cst.BaseExpression, scope: Optional[cst.CSTNode], floats: bool = False) -> bool:
    """``e`` holds a Python int (or float, with ``floats``): a literal, ``x.size(i)``, ``x.shape[i]``, ``len(x)``, arithmetic
    of those, or a name every binding of which in ``scope`` is one."""
    if isinstance(e, cst.Integer) or (floats and isinstance(e, cst.Float)):
        return True
    if isinstance(e, cst.UnaryOperation):
        return int_valued(facts, e.expression, scope, floats)
    if isinstance(e, cst.BinaryOperation):
        return int_valued(facts, e.left, scope, floats) and int_valued(facts, e.right, scope, floats)
    if isinstance(e, cst.Call):
        f = e.func
        return (isinstance(f, cst.Attribute) and f.attr.value == "size" and len(e.args) == 1) or (
            isinstance(f, cst.Name) and f.value in ("len", "int") and f.value not in facts.bound_names)
    if isinstance(e, cst.Subscript) and isinstance(e.value, cst.Attribute) and e.value.attr.value == "shape":
        return len(e.slice) == 1 and isinstance(e.slice[0].slice, cst.Index)
    if isinstance(e, cst.Name) and isinstance(scope, cst.FunctionDef):
        if any(p.name.value == e.value for p in own_params(scope)):
            return False
        values = []
        for n in nodes(scope.body):
            if isinstance(n, (cst.AugAssign, cst.For, cst.WithItem, cst.NamedExpr)) and e.value in bound_names(
                    getattr(n, "target", None) or getattr(getattr(n, "asname", None), "name", None) or cst.Name("_")):
                return False
            if isinstance(n, cst.Assign):
                for t in n.targets:
                    if isinstance(t.target, cst.Name) and t.target.value == e.value:
                        values.append(n.value)
                    elif e.value in bound_names(t.target):
                        return False
        return bool(values) and all(int_valued(facts, v, None, floats) for v in values)
    return False
