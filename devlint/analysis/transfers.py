"""Where a call sends a value: to a device, back to the host, or nowhere (DL003).

Answered from the CST alone:

* ``device_target``: the device a ``.to(...)`` / ``.cuda()`` / ``tensor(..., device=)``
  moves to, when it is evidently not the CPU;
* ``host_receiver``: the receiver of a device->host conversion (``t.cpu()``, ``.item()``...);
* ``host_flow``: whether an expression's value is computed on the host from a host value
  through known operations only (arithmetic, NumPy, ``math``, builtins, the value's own
  methods): an unknown function in between may need the host (an RPC, a C extension);
* ``may_mutate`` / ``escapes``: whether a call might change a tensor passed to it in place;
* ``placed_on_device``: a name bound (outside a loop) only to device values;
* ``invariant_build``: a host tensor built from loop-invariant data;
* ``tensor_type_aliases``: ``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``
  (the device-side draw for ``Tensor(np.random.normal(0, 1, shape))`` is a rewrite:
  ``devlint.fixes.device_draw``).
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from devlint.analysis.hostflow import SHAPE_METHODS
from devlint.analysis.loops import target_names
from devlint.facts import call_arg, dotted, is_cuda_string, string_value
from devlint.walk import children, nodes, statements

HOST_METHODS = frozenset({"cpu", "numpy", "item", "tolist"})
MOVE_METHODS = frozenset({"to", "cuda"})
BUILDERS = frozenset({"tensor", "as_tensor", "from_numpy"})
# legacy constructors: `torch.Tensor([[0.1, 0.2]])` builds from data (`torch.Tensor(3, 4)` allocates)
DATA_TYPES = frozenset({"Tensor", "FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor"})
DTYPE_METHODS = frozenset({"float", "double", "half", "bfloat16", "long", "int", "bool", "short", "byte"})
# builtins a host value may pass through and stay a host value (no device knowledge in them)
_HOST_BUILTINS = frozenset({"float", "int", "bool", "abs", "round", "min", "max", "sum", "list", "tuple",
                            "len", "sorted", "reversed", "divmod", "pow"})
_PURE_BUILTINS = frozenset({"print", "len", "float", "int", "str", "repr", "bool", "isinstance", "round", "format"})
_HOST_MODULES = ("numpy.", "math.")
# torch functions of tensors that run as well on the device: a host copy computed on by them
# and sent back could have stayed (``torch.multinomial(probs.cpu(), 1).to(d)``)
_TORCH_OP_MODULES = ("torch.nn.functional.", "torch.linalg.", "torch.special.", "torch.fft.")
_NOT_TORCH_OPS = frozenset({"save", "load", "manual_seed", "seed", "set_grad_enabled", "no_grad", "device",
                            "compile", "from_numpy", "get_rng_state", "set_rng_state", "set_default_device",
                            "set_default_dtype", "is_tensor", "numel", "use_deterministic_algorithms"})


def torch_op(q: str) -> bool:
    """``torch.exp`` / ``torch.multinomial`` / ``F.softmax``: a tensor function with a device kernel."""
    if q.startswith(_TORCH_OP_MODULES):
        return True
    if not q.startswith("torch.") or q.count(".") != 1:
        return False
    name = q[6:]
    return name not in _NOT_TORCH_OPS and name[:1].islower() and not name.startswith("_")


def device_target(facts, call: cst.Call, keyword_only: bool = False) -> Optional[cst.BaseExpression]:
    """The device ``call`` moves to (``cuda`` for ``.cuda()``), when it is not the CPU."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "cuda" and not keyword_only:
        return cst.Name("cuda")  # marker: the default CUDA device
    a = call_arg(call, None if keyword_only else 0, "device")
    if a is None:
        return None
    v = a.value
    if isinstance(v, cst.SimpleString):
        return v if is_cuda_string(v) else None
    if isinstance(v, cst.Call) and facts.is_torch(v.func, "torch.device"):
        return v if v.args and string_value(v.args[0].value) != "cpu" else None
    if isinstance(v, cst.Call) and not v.args and "device" in ((dotted(v.func) or "").rsplit(".", 1)[-1].lower()) \
            and not (dotted(v.func) or "").endswith(".get_device"):
        return v  # `self._device()`, `get_device()`: the module's or the program's device, asked for
    d = dotted(v)
    if d is None:
        return None
    last = d.rsplit(".", 1)[-1].lower()
    if d in {dv.name for dv in facts.device_vars} or "device" in last or last in ("dev", "gpu"):
        return v
    return None


def is_move(facts, node: cst.CSTNode) -> bool:
    """``x.to(device)`` / ``x.cuda()``: a move of ``x`` to a (non-CPU) device; not
    ``x.to(x.device, dtype)``, which stays where ``x`` is."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in MOVE_METHODS):
        return False
    dev = device_target(facts, node)
    if dev is None:
        return False
    recv = dotted(node.func.value)
    return recv is None or dotted(dev) != f"{recv}.device"


def host_receiver(node: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """The receiver of a device->host conversion (``t.cpu()``, ``t.to("cpu")``...), else None."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return None
    meth = node.func.attr.value
    if meth in HOST_METHODS:
        return node.func.value
    if meth == "to":
        a = call_arg(node, 0, "device")
        if a is not None and string_value(a.value) == "cpu":
            return node.func.value
    return None


def host_flow(facts, expr: cst.BaseExpression, source: Callable[[cst.CSTNode], bool], host: set) -> bool:
    """``expr`` is computed from a ``source`` node (or a name in ``host``) by known host
    operations only: arithmetic, subscripts, the value's own methods, NumPy / ``math`` /
    builtins. A call of any other function in between stops the flow."""
    if source(expr):
        return True
    if isinstance(expr, cst.Name):
        return expr.value in host
    if isinstance(expr, cst.BinaryOperation):
        return host_flow(facts, expr.left, source, host) or host_flow(facts, expr.right, source, host)
    if isinstance(expr, cst.UnaryOperation):
        return host_flow(facts, expr.expression, source, host)
    if isinstance(expr, cst.Subscript):  # `np.eye(c)[y.cpu().numpy()]`: indexed by a host value
        return host_flow(facts, expr.value, source, host) or any(
            isinstance(e.slice, cst.Index) and host_flow(facts, e.slice.value, source, host) for e in expr.slice)
    if isinstance(expr, cst.Attribute):
        return host_flow(facts, expr.value, source, host)
    if isinstance(expr, (cst.Tuple, cst.List)):
        return any(host_flow(facts, e.value, source, host) for e in expr.elements)
    if isinstance(expr, cst.IfExp):
        return host_flow(facts, expr.body, source, host) or host_flow(facts, expr.orelse, source, host)
    if isinstance(expr, cst.Call):
        if is_move(facts, expr):
            return False
        f = expr.func
        q = facts.qualname(f) or ""
        known = q.startswith(_HOST_MODULES) or q in ("torch.tensor", "torch.as_tensor", "torch.from_numpy") or (
            q.startswith("torch.") and q[6:] in DATA_TYPES and len(expr.args) == 1) or (
            isinstance(f, cst.Name) and f.value in _HOST_BUILTINS and f.value not in facts.bound_names) or torch_op(q)
        if known:
            return any(host_flow(facts, a.value, source, host) for a in expr.args)
        if isinstance(f, cst.Attribute) and not q:
            return host_flow(facts, f.value, source, host)  # a method of the value itself
    return False


def may_mutate(facts, call: cst.Call) -> bool:
    """Whether a call might change a tensor passed to it in place (modules: ``ReLU(inplace=True)``)."""
    if isinstance(call.func, cst.Name) and call.func.value in _PURE_BUILTINS \
            and call.func.value not in facts.bound_names:
        return False
    q = facts.qualname(call.func)
    if q is None or not q.startswith("torch.") or q.startswith(("torch.distributed", "torch.nn.init")):
        return True
    last = q.rsplit(".", 1)[-1]
    return last.endswith("_") or last[:1].isupper()


def escapes(facts, code_for_node, body: cst.CSTNode, match) -> Optional[str]:
    """A reason the value at ``match`` (a node test) may be changed in place under ``body``."""
    for n in nodes(body):
        if isinstance(n, cst.Call):
            for a in n.args:
                if match(a.value) and may_mutate(facts, n):
                    return f"`{code_for_node(n.func)}` may change it in place"
    return None


def device_built(facts, value: cst.BaseExpression) -> bool:
    """``value`` holds a move to a device or a factory call with a device ``device=``."""
    return any(is_move(facts, n) or (isinstance(n, cst.Call) and device_target(facts, n, keyword_only=True)
                                     is not None) for n in nodes(value))


def placed_on_device(facts, root: cst.CSTNode, name: str, loop: cst.CSTNode) -> bool:
    """Every binding of ``name`` under ``root`` outside ``loop`` puts a device value in it
    (``seen = torch.zeros(1, device=device)``), and there is one."""
    found = False
    stack = [root]
    while stack:
        n = stack.pop()
        if n is loop or (n is not root and isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda))):
            continue
        if isinstance(n, (cst.Assign, cst.AnnAssign)):
            tgts = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            if any(isinstance(t, cst.Name) and t.value == name for t in tgts):
                if n.value is None or not device_built(facts, n.value):
                    return False
                found = True
            elif any(name in target_names(t) for t in tgts):
                return False  # unpacked: unknown (`x[i] = v` writes into `x`, wherever it lives)
        elif isinstance(n, (cst.For, cst.CompFor, cst.WithItem, cst.NamedExpr)):
            t = n.asname.name if isinstance(n, cst.WithItem) and n.asname is not None else getattr(n, "target", None)
            if t is not None and name in {x.value for x in nodes(t) if isinstance(x, cst.Name)}:
                return False
        stack.extend(children(n, trivia=False))
    return found


# `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`: a tensor type alias
_TYPE_DTYPES = {"FloatTensor": "float", "DoubleTensor": "double", "LongTensor": "long", "IntTensor": "int",
                "HalfTensor": "half", "ByteTensor": "byte", "BoolTensor": "bool"}


def tensor_type_aliases(facts, module: cst.Module) -> dict:
    """Names bound once in the file, to a CUDA tensor type maybe chosen by a flag:
    ``{"Tensor": ("FloatTensor", <the flag test> or None, <defining function> or None)}``."""
    out: dict = {}
    dropped: set = set()
    stack: list = [(module, None)]  # (statement holder, enclosing function)
    while stack:
        root, fn = stack.pop()
        for n in statements(root):  # assignments are statements: no need to enter expressions
            nt = type(n)
            if nt is cst.FunctionDef:
                stack.append((n.body, n))
                continue
            if nt is cst.ClassDef:
                stack.append((n.body, fn))
                continue
            if nt is not cst.Assign:
                continue
            for t in n.targets:
                if not isinstance(t.target, cst.Name):
                    continue
                name, v, test = t.target.value, n.value, None
                if isinstance(v, cst.IfExp):
                    test, v = v.test, v.body
                q = facts.qualname(v) or ""
                kind = q.rsplit(".", 1)[-1]
                if q.startswith("torch.cuda.") and kind in _TYPE_DTYPES and name not in out:
                    out[name] = (kind, test, fn)
                else:
                    dropped.add(name)  # rebound, or bound to something else
    return {k: v for k, v in out.items() if k not in dropped}


def invariant_build(facts, call: cst.Call, bound: set) -> bool:
    """``torch.tensor([0.2, 0.8])`` / ``torch.Tensor([[0.1, 0.2]]).float()``: a host tensor
    built from data that reads no name in ``bound`` and calls nothing unknown."""
    while isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Call) and (
            (call.func.attr.value in DTYPE_METHODS and not call.args)
            or (call.func.attr.value in SHAPE_METHODS and not facts.qualname(call.func) and all(
                a.keyword is None and not a.star and not any(isinstance(x, cst.Call) or (
                    isinstance(x, cst.Name) and x.value in bound) for x in nodes(a.value)) for a in call.args))):
        call = call.func.value  # `torch.tensor([rank]).float().cuda()`, `torch.tensor(MEAN).view(3, 1, 1)`
    q = facts.qualname(call.func)
    if q is None or q.count(".") != 1 or not call.args or call_arg(call, None, "device") is not None:
        return False
    name = q.rsplit(".", 1)[-1]
    if name not in BUILDERS and not (name in DATA_TYPES and isinstance(call.args[0].value, (cst.List, cst.Tuple))):
        return False  # `torch.Tensor(3, 4)` allocates; `torch.Tensor([[0.1, 0.2]])` holds data
    for a in call.args:
        for sub in nodes(a.value):
            if isinstance(sub, cst.Call) and not facts.qualname(sub.func):
                return False  # may have side effects or vary
            if isinstance(sub, cst.Name) and sub.value in bound:
                return False
    return True


def returning_payload(facts, node: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """For a call that sends data to the device (``x.to(d)``, ``torch.tensor(v, device=d)``),
    the data sent; else None."""
    if not isinstance(node, cst.Call):
        return None
    q = facts.qualname(node.func)
    if q is not None and q.count(".") == 1 and q.rsplit(".", 1)[-1] in ("tensor", "as_tensor"):
        if node.args and device_target(facts, node, keyword_only=True) is not None:
            return node.args[0].value
        return None
    return node.func.value if is_move(facts, node) else None


class IterationFlow:
    """Where the values named in one loop iteration live, statement by statement: ``device``
    (moved, computed by a module or from device values) or ``host`` (read back from the
    device and computed on by known host operations, see ``host_flow``). ``scalars`` maps a
    host name to the ``.item()`` it was read with. Feed the simple statements in source
    order to ``step``."""

    def __init__(self, facts, is_module: Callable[[cst.BaseExpression], bool], body: Optional[cst.CSTNode] = None) -> None:
        self.facts, self.is_module = facts, is_module
        # `h *= mask.cuda()` in the loop: `h` is on the device whenever the loop uses it (an
        # in-place op cannot change its device), even where an unknown call binds it
        self.pinned: set = set() if body is None else {
            n.target.value for n in nodes(body) if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name)
            and any(is_move(facts, m) for m in nodes(n.value))}
        self.device: set = set(self.pinned)
        self.host: set = set()
        self.scalars: dict = {}
        self.offloaded: set = set()  # `w = w.to("cpu")`: a tensor parked on the host
        self.origins: dict = {}  # host name -> the device->host reads its value was computed from

    def sources_in(self, expr: cst.CSTNode) -> list:
        """The device->host reads (outermost calls: ``d.cpu().numpy()``) that ``expr`` is computed
        from in this iteration: its own, and those of the host names it reads."""
        out: list = []
        stack = [expr]
        while stack:
            n = stack.pop()
            if self.source(n):
                out.append(n)
                continue
            if isinstance(n, cst.Name) and n.value in self.host:
                out.extend(o for o in self.origins.get(n.value, ()) if o not in out)
            stack.extend(reversed(children(n, trivia=False)))
        return out

    def on_device(self, expr: cst.CSTNode) -> bool:
        """Evidence that ``expr`` lives on the device in this iteration."""
        return any(isinstance(n, cst.Name) and n.value in self.device or is_move(self.facts, n) for n in nodes(expr))

    def source(self, node: cst.CSTNode) -> bool:
        """``node`` reads a device value back to the host (``d.cpu()``, ``d.item()``...)."""
        r = host_receiver(node)
        return r is not None and self.on_device(r)

    def returning_host(self, node: cst.CSTNode) -> bool:
        """``node`` sends a value read back from the device in this iteration to the device
        again, after some host computation (a tensor only offloaded with ``.cpu()`` and
        brought back is memory management, not computation on the host)."""
        payload = returning_payload(self.facts, node)
        if payload is None or (isinstance(payload, cst.Name) and payload.value in self.offloaded) \
                or _offload(payload):
            return False
        return host_flow(self.facts, payload, self.source, self.host)

    def _device_value(self, expr) -> bool:
        if any(isinstance(n, cst.Call) and isinstance(n.func, (cst.Name, cst.Attribute)) and self.is_module(n.func)
               for n in nodes(expr)):
            return True
        return self.on_device(expr)

    def step(self, small: cst.CSTNode) -> None:
        value = getattr(small, "value", None)
        if isinstance(small, cst.Assign):
            targets = set().union(*(target_names(t.target) for t in small.targets))
            for t in small.targets:  # `mask[sel] = normalizer`: host data written into a host array
                base = t.target.value if isinstance(t.target, cst.Subscript) else None
                if isinstance(base, cst.Name) and base.value not in self.device and not _offload(small.value) \
                        and host_flow(self.facts, small.value, self.source, self.host):
                    self.host.add(base.value)
                    self.origins[base.value] = [*self.origins.get(base.value, ()),
                                                *self.sources_in(small.value)]
        elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
            targets = target_names(small.target)
        else:
            return
        if value is None or not targets:
            return
        self.offloaded -= targets
        if _offload(value):
            self.offloaded |= targets
        if host_flow(self.facts, value, self.source, self.host) and not (
                isinstance(value, cst.BinaryOperation) and self._device_value(value)):
            found = self.sources_in(value)
            for t in targets:
                self.origins[t] = [*self.origins.get(t, ()), *found] if isinstance(small, cst.AugAssign) else found
            self.host |= targets
            self.device -= targets
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                    and value.func.attr.value == "item" and len(targets) == 1:
                self.scalars[next(iter(targets))] = value
        elif isinstance(value, cst.Call) and (self.facts.qualname(value.func) or "").startswith("numpy."):
            self.host -= targets  # fresh host data (`np.ones(h.size())`), read from no device value
            self.device -= targets
        elif self._device_value(value):
            self.device |= targets
            self.host -= targets
        else:
            self.host -= targets
            self.device -= targets - self.pinned
        if not isinstance(small, cst.AugAssign):
            for t in targets - self.host:
                self.scalars.pop(t, None)


_COPY_METHODS = frozenset({"clone", "detach", "contiguous"})


def _offload(value: cst.CSTNode) -> bool:
    """``x.cpu()`` / ``x.to("cpu")`` (maybe ``.detach()``-ed first, ``.clone()``-d or cast
    after: ``obs.cpu().clone().to(torch.uint8)``): a tensor moved, not computed on."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and (
            value.func.attr.value in _COPY_METHODS or value.func.attr.value in DTYPE_METHODS
            or (value.func.attr.value == "to" and host_receiver(value) is None)) \
            and isinstance(value.func.value, cst.Call):
        value = value.func.value
    return (host_receiver(value) is not None and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("cpu", "to"))


def element_reads(facts, loop: cst.CSTNode, bound: set, mutated: set) -> list:
    """``t[i].item()`` in ``for i in range(...)``: one element of ``t``, a name neither rebound
    nor changed in place in the loop, read to the host every iteration (one ``t.tolist()``
    before the loop reads them all at once). ``[(call, "t", "i")]``."""
    if not (isinstance(loop, cst.For) and isinstance(loop.target, cst.Name) and isinstance(loop.iter, cst.Call)
            and isinstance(loop.iter.func, cst.Name) and loop.iter.func.value == "range"
            and "range" not in facts.bound_names):
        return []
    i = loop.target.value
    out = []
    for n in nodes(loop.body):
        if not (type(n) is cst.Call and isinstance(n.func, cst.Attribute) and n.func.attr.value == "item"
                and not n.args and isinstance(n.func.value, cst.Subscript)):
            continue
        t, indices = n.func.value, []
        while isinstance(t, cst.Subscript):  # `t[i]`, `t[i][0]`, `t[q, c]`
            indices += t.slice
            t = t.value
        if not isinstance(t, cst.Name) or not _element_index(indices, i, bound):
            continue
        if t.value in bound or t.value in mutated or t.value == i:
            continue
        out.append((n, t.value, i))
    return out


def _element_index(indices: list, i: str, bound: set) -> bool:
    """Indices naming one element by the loop variable ``i`` and values fixed in the loop."""
    uses_i = False
    for e in indices:
        if not isinstance(e.slice, cst.Index):
            return False
        v = e.slice.value
        if isinstance(v, cst.Name):
            if v.value == i:
                uses_i = True
            elif v.value in bound:
                return False
        elif not isinstance(v, cst.Integer):
            return False
    return uses_i


def works_on_device(facts, root: cst.CSTNode, loop: cst.CSTNode) -> bool:
    """The loop computes with device values: it moves one, builds one with ``device=``, or
    reads a name that ``root`` binds (outside the loop) only to device values."""
    names = set()
    for n in nodes(loop.body):
        if is_move(facts, n) or (isinstance(n, cst.Call) and device_target(facts, n, keyword_only=True) is not None):
            return True
        if isinstance(n, cst.Name):
            names.add(n.value)
    return any(placed_on_device(facts, root, name, loop) for name in sorted(names))


def computed_tensor(facts, root: cst.CSTNode, name: str, loop: cst.CSTNode, scope=None, cls=None,
                    depth: int = 0) -> bool:
    """Every binding of ``name`` under ``root`` (outside ``loop``) computes it with torch (a
    ``torch.*`` function or a tensor method), never builds it from host data or reads it
    back (``torch.tensor(...)``, factories without ``device=``, ``.cpu()``, NumPy)."""
    found = False
    stack = [root]
    while stack:
        n = stack.pop()
        if n is loop or (n is not root and isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda))):
            continue
        if isinstance(n, cst.Assign) and any(name in target_names(t.target) for t in n.targets):
            v = n.value
            if len(n.targets) != 1:
                return False
            target = n.targets[0].target
            if (isinstance(v, cst.Subscript) and isinstance(v.value, cst.Name) and isinstance(target, cst.Name)
                    and v.value.value != name and depth < 3):
                # `prev = seq[:, t - 2:t]`: a slice of a tensor computed with torch
                if not computed_tensor(facts, root, v.value.value, loop, scope, cls, depth + 1):
                    return False
                found = True
                stack.extend(children(n, trivia=False))
                continue
            # `ys, ix = torch.sort(logits, 1, True)`: the values a torch function returns
            if not ((isinstance(target, cst.Name) or (isinstance(target, cst.Tuple) and all(
                    isinstance(e.value, cst.Name) for e in target.elements))) and isinstance(v, cst.Call)):
                return False
            if isinstance(target, cst.Tuple) and not (facts.qualname(v.func) or "").startswith("torch."):
                return False
            p = facts.placement_of(v, scope, cls)[0]
            if p == "host" or any(host_receiver(x) is not None for x in nodes(v)):
                return False
            q = facts.qualname(v.func) or ""
            if not (q.startswith("torch.") or (isinstance(v.func, cst.Attribute) and not q)):
                return False
            if q.rsplit(".", 1)[-1] in BUILDERS or q.rsplit(".", 1)[-1] in DATA_TYPES:
                return False
            found = True
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For, cst.WithItem, cst.NamedExpr)):
            t = n.asname.name if isinstance(n, cst.WithItem) and n.asname is not None else getattr(n, "target", None)
            if t is not None and name in target_names(t):
                return False
        stack.extend(children(n, trivia=False))
    return found


def scalar_payload(facts, node: cst.Call, scalars: dict) -> Optional[tuple]:
    """``torch.LongTensor([[v]]).to(d)`` / ``torch.tensor([[v]], device=d)`` with ``v`` a Python
    number read with ``.item()`` (a name in ``scalars`` or the call itself): a tensor of one
    element built on the host to carry ``v`` to the device. ``(dims, v, legacy type or None,
    device, dtype keyword or None)``; None for anything else."""
    if is_move(facts, node) and isinstance(node.func.value, cst.Call) and node.func.attr.value == "to" \
            and len(node.args) == 1 and node.args[0].keyword is None:
        build, dev = node.func.value, node.args[0].value
    else:
        build, dev = node, device_target(facts, node, keyword_only=True)
        if dev is None:
            return None
    q = facts.qualname(build.func) or ""
    kind = q[6:] if q.startswith("torch.") and q.count(".") == 1 else ""
    if kind not in ("tensor", "LongTensor", "FloatTensor", "DoubleTensor", "IntTensor"):
        return None
    extra = [a for a in build.args[1:] if not (a.keyword is not None and a.keyword.value in ("device", "dtype"))]
    if not build.args or build.args[0].keyword is not None or extra or any(a.star for a in build.args):
        return None
    if kind != "tensor" and len(build.args) != 1:
        return None
    data, dims = build.args[0].value, 0
    while isinstance(data, (cst.List, cst.Tuple)) and len(data.elements) == 1 \
            and not isinstance(data.elements[0], cst.StarredElement):
        data, dims = data.elements[0].value, dims + 1
    if dims == 0:
        return None  # `torch.tensor(v)`: a 0-dim tensor (`torch.full((), v)` saves little)
    item = isinstance(data, cst.Call) and isinstance(data.func, cst.Attribute) and data.func.attr.value == "item" \
        and not data.args
    if not (item or (isinstance(data, cst.Name) and data.value in scalars)):
        return None
    dtype = next((a.value for a in build.args if a.keyword is not None and a.keyword.value == "dtype"), None)
    return dims, data, (None if kind == "tensor" else kind), dev, dtype
