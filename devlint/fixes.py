"""Shared fix machinery: choosing the device expression, applying node replacements,
and inserting the file's one guarded device variable after the imports."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Optional

import libcst as cst

from devlint.analysis.accumulators import is_number
from devlint.analysis.numpy_ops import torch_equivalent
from devlint.analysis.style import string, string_quote
from devlint.analysis.transfers import host_receiver, is_move
from devlint.diagnostic import Applicability, Fix
from devlint.facts import TENSOR, PARAM, FileFacts, dotted
from devlint.syntax import own_params
from devlint.walk import children, nodes

if TYPE_CHECKING:
    from devlint.context import FileContext

CANDIDATE_NAMES = ("device", "torch_device", "default_device", "device_")


def device_var_name(facts: FileFacts, preferred: str = "device") -> str:
    """A module-level name for a new device variable that shadows nothing in the file."""
    for name in (preferred, *CANDIDATE_NAMES):
        if name not in facts.bound_names and name not in facts.aliases:
            return name
    i = 2
    while f"device{i}" in facts.bound_names:
        i += 1
    return f"device{i}"


def torch_ref(facts: FileFacts) -> tuple[str, bool]:
    """The local name of the torch module and whether ``import torch`` must be added."""
    name = facts.torch_name()
    return (name, False) if name else ("torch", "torch" not in facts.bound_names)


def device_definition(facts: FileFacts, name: str, style: str = "cuda") -> str:
    """The inserted device variable, its strings in the file's own quotes."""
    t, _ = torch_ref(facts)
    q = string_quote(facts.source)
    if style == "accelerator":
        return (f"{name} = {t}.accelerator.current_accelerator() if {t}.accelerator.is_available() "
                f"else {t}.device({q}cpu{q})")
    return f"{name} = {t}.device({q}cuda{q} if {t}.cuda.is_available() else {q}cpu{q})"


def guarded_literal(facts: FileFacts, literal: cst.BaseExpression) -> cst.IfExp:
    """``"cuda:0"`` -> ``"cuda:0" if torch.cuda.is_available() else "cpu"``."""
    t, _ = torch_ref(facts)
    test = cst.parse_expression(f"{t}.cuda.is_available()")
    body = literal.value[len(literal.prefix):] if isinstance(literal, cst.SimpleString) else ""
    q = body[:1] if body[:1] in ("'", '"') and body[:3] not in ("'''", '"""') else string_quote(facts.source)
    return cst.IfExp(test=test, body=literal, orelse=cst.SimpleString(f"{q}cpu{q}"))


class DeviceChoice:
    """The device expression a fix should use at the current node."""

    def __init__(self, expr: cst.BaseExpression, needs_var: bool, needs_torch: bool) -> None:
        self.expr = expr
        self.needs_var = needs_var
        self.needs_torch = needs_torch

    def fix(self, applicability, message: str, replacements: dict) -> Fix:
        return Fix(applicability, message, replacements, needs_device_var=self.needs_var,
                   needs_torch_import=self.needs_torch)


def choose_device(ctx: "FileContext", avoid: Iterable[str] = (), prefer_input: bool = True) -> DeviceChoice:
    """Inside an ``nn.Module`` method prefer the input tensor's device; else reuse the
    file's device variable visible here; else the (new) module-level device variable."""
    facts, t = ctx.facts, ctx.tracker
    avoid = set(avoid)
    method = t.method
    if prefer_input and method is not None and t.in_module_class and method.name.value != "__init__":
        params = [p for p in method.params.params if p.name.value != "self"]
        if params:
            first = params[0].name.value
            kinds = facts.evidence.get((method, first), set())
            is_tensorish = bool(kinds & {TENSOR, PARAM}) or method.name.value == "forward"
            rebound = first in facts.rebound.get(method, ())
            if is_tensorish and not rebound and first not in avoid:
                return DeviceChoice(cst.Attribute(cst.Name(first), cst.Name("device")), False, False)
    name = visible_device_var(ctx)
    if name is not None and name not in avoid:
        return DeviceChoice(cst.Name(name), False, False)
    name = ctx.new_device_name
    _, needs_torch = torch_ref(facts)
    return DeviceChoice(cst.Name(name), True, needs_torch)


def choose_library_device(ctx: "FileContext", avoid: Iterable[str] = ()) -> Optional[DeviceChoice]:
    """:func:`choose_device` for a library module (imported, never run), which must never grow
    an import-time global that queries CUDA: inside a function without a device variable in
    sight, the device of a tensor parameter, or None (no fix)."""
    choice = choose_device(ctx, avoid=avoid)
    fn = ctx.tracker.function
    if not choice.needs_var or fn is None:
        return choice  # module-level code places on import anyway: the global changes nothing
    for p in own_params(fn):
        name = p.name.value
        if (name not in avoid and name not in ctx.facts.rebound.get(fn, ())
                and ctx.facts.evidence.get((fn, name), set()) & {TENSOR, PARAM}):
            return DeviceChoice(cst.Attribute(cst.Name(name), cst.Name("device")), False, False)
    return None


def visible_device_var(ctx: "FileContext") -> Optional[str]:
    t = ctx.tracker
    fn = t.function
    best = None
    for dv in ctx.facts.device_vars:
        if dv.scope is not None and dv.scope is fn and dv.node in t.seen_statements:
            best = dv.name  # a local device variable already defined in this function
    if best is not None:
        return best
    for dv in ctx.facts.device_vars:
        if dv.scope is None and dv.node in ctx.module_level_device_nodes:
            if fn is not None or dv.node in t.seen_statements:
                if fn is None or dv.name not in ctx.facts.assigned_in.get(fn, ()):
                    return dv.name
    return None


# ---------------------------------------------------------------------------------
# applying fixes
# ---------------------------------------------------------------------------------


class _Replace(cst.CSTTransformer):
    """Replaces original nodes: by a new node, or by what a function makes of the node with
    the edits inside it already applied (nested edits compose, innermost first)."""

    def __init__(self, replacements: dict) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node, updated_node):
        new = self.replacements.get(original_node)
        if new is None:
            return updated_node
        return new(updated_node) if callable(new) else new


def method_call(value: cst.BaseExpression, meth: str, *args: cst.BaseExpression) -> cst.Call:
    """``value.meth(*args)``, parenthesising ``value`` where the attribute would bind wrongly."""
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(cst.Attribute(value, cst.Name(meth)), [cst.Arg(a) for a in args])


def composed_replacements(root: cst.CSTNode, edits: dict) -> dict:
    """Node replacements for a fix made of nested edits (original node -> function of the
    node with its inner edits applied): one replacement per outermost edited node, each
    with the edits inside it applied first, innermost first, so they compose."""
    transformer = _Replace(edits)
    replacements = {}
    stack = [root]
    while stack:
        n = stack.pop()
        if n in edits:
            replacements[n] = n.visit(transformer)
        else:
            stack.extend(children(n))
    return replacements


def accumulate_on_device(facts: FileFacts, loop: cst.CSTNode, edits: list) -> Fix:
    """DL008's fix: every ``(accumulator, "sum" | "list", call)`` in ``edits`` keeps the value on
    the device (``x.item()`` -> ``x.detach()``) and reads it once after ``loop``."""
    t, needs_torch = torch_ref(facts)
    repl = {}
    after: list = []
    for acc, how, call in edits:
        repl[call] = call.with_changes(func=call.func.with_changes(attr=cst.Name("detach")))
        line = (f"{acc} = {t}.as_tensor({acc}).item()\n" if how == "sum"
                else f"{acc} = [v.item() for v in {acc}]\n")
        if line not in after:
            after.append(line)
    new_loop = loop.visit(_Replace(repl))
    stmts = [cst.parse_statement(line) for line in after]
    return Fix(Applicability.UNSAFE, "accumulate on the device and read the value once after the loop",
               {loop: cst.FlattenSentinel([new_loop, *stmts])}, needs_torch_import=needs_torch)


def _is_import_line(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
    )


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _insertion_index(body) -> int:
    """After the leading block of docstring, imports and try/except-import blocks."""
    idx = 0
    for i, stmt in enumerate(body):
        if _is_import_line(stmt):
            idx = i + 1
        elif _is_docstring(stmt) and i == 0:
            idx = 1
        elif isinstance(stmt, cst.Try) and all(_is_import_line(s) for s in stmt.body.body):
            idx = i + 1
        else:
            break
    return idx


def _imports_name(stmt: cst.CSTNode, name: str) -> bool:
    """Whether a top-level statement (an import line or a try/except import block) binds ``name``."""
    if isinstance(stmt, cst.Try):
        return any(_imports_name(s, name) for s in stmt.body.body)
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for s in stmt.body:
        if isinstance(s, (cst.Import, cst.ImportFrom)) and not isinstance(s.names, cst.ImportStar):
            for al in s.names:
                bound = al.asname.name if al.asname is not None else al.name
                local = dotted(bound)
                if local is not None and local.split(".")[0] == name:
                    return True
    return False


def _binds(stmt: cst.CSTNode, name: str) -> bool:
    if isinstance(stmt, cst.SimpleStatementLine):
        for s in stmt.body:
            if isinstance(s, cst.Assign) and any(dotted(t.target) == name for t in s.targets):
                return True
    return False


def ensure_module_statements(module: cst.Module, facts: FileFacts, device_name: Optional[str],
                             torch_import: bool, style: str) -> cst.Module:
    body = list(module.body)
    if device_name is not None and any(_binds(s, device_name) for s in body):
        device_name = None
    if device_name is None and not torch_import:
        return module
    idx = _insertion_index(body)
    if device_name is not None and not torch_import:
        # the definition uses torch: never place it above a later top-level `import torch`
        # (a docstring, `__all__ = ...` or a constant may precede the imports)
        t, _ = torch_ref(facts)
        at = next((i for i, s in enumerate(body) if _imports_name(s, t)), None)
        if at is None:
            torch_import = t == "torch"  # torch is only imported inside functions
        elif at >= idx:
            idx = at + 1
            while idx < len(body) and _is_import_line(body[idx]):
                idx += 1  # keep the rest of that import block together
    new: list = []
    if torch_import:
        new.append(cst.parse_statement("import torch"))
    if device_name is not None:
        stmt = cst.parse_statement(device_definition(facts, device_name, style))
        if idx > 0 and new == []:
            stmt = stmt.with_changes(leading_lines=[cst.EmptyLine()])
        new.append(stmt)
    if idx < len(body) and device_name is not None:
        nxt = body[idx]
        if not getattr(nxt, "leading_lines", None):
            body[idx] = nxt.with_changes(leading_lines=[cst.EmptyLine()])
    body[idx:idx] = new
    return module.with_changes(body=body)


def apply_fixes(module: cst.Module, facts: FileFacts, fixes: list[Fix], device_name: str,
                style: str) -> cst.Module:
    replacements: dict = {}
    for fx in fixes:
        replacements.update(fx.replacements)
    new = module.visit(_Replace(replacements)) if replacements else module
    needs_var = any(f.needs_device_var for f in fixes)
    needs_torch = any(f.needs_torch_import for f in fixes)
    return ensure_module_statements(new, facts, device_name if needs_var else None, needs_torch, style)


def _arg_comma() -> cst.Comma:
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _keyword(name: str, value: cst.BaseExpression, comma=cst.MaybeSentinel.DEFAULT) -> cst.Arg:
    return cst.Arg(value, keyword=cst.Name(name), comma=comma,
                   equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))


def cuda_to_call(call: cst.Call, device: cst.BaseExpression) -> cst.Call:
    """``x.cuda(...)`` -> ``x.to(device, <its other keywords>)`` (an index or ``device=`` dropped)."""
    kwargs = [a for a in call.args if a.keyword is not None and a.keyword.value != "device"]
    args = [cst.Arg(device), *kwargs]
    if kwargs:
        args[0] = args[0].with_changes(comma=_arg_comma())
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(func=call.func.with_changes(attr=cst.Name("to")), args=args)


# legacy typed constructors (``torch.FloatTensor``, ``torch.cuda.LongTensor``) -> their dtype
LEGACY_TYPES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16", "LongTensor": "int64", "IntTensor": "int32",
    "ShortTensor": "int16", "CharTensor": "int8", "ByteTensor": "uint8", "BoolTensor": "bool",
}


def legacy_factory(call: cst.Call) -> Optional[str]:
    """The factory that replaces a legacy typed constructor: ``torch.cuda.FloatTensor(2, 3)``
    allocates (``empty``), ``torch.cuda.FloatTensor([1, 2])`` holds data (``tensor``); None
    for any other form (sizes from variables, a storage, another tensor)."""
    args = call.args
    if args and all(a.keyword is None and isinstance(a.value, cst.Integer) for a in args):
        return "empty"
    if len(args) == 1 and args[0].keyword is None and isinstance(args[0].value, (cst.List, cst.Tuple)):
        return "tensor"
    return None


def legacy_type_call(call: cst.Call, factory: str, torch_name: str, dtype: str,
                     device: cst.BaseExpression) -> cst.Call:
    """``torch.cuda.FloatTensor(2, 3)`` -> ``torch.empty(2, 3, dtype=torch.float32, device=device)``."""
    new_args = [a.with_changes(comma=_arg_comma()) for a in call.args]
    new_args.append(_keyword("dtype", cst.parse_expression(f"{torch_name}.{dtype}"), _arg_comma()))
    new_args.append(_keyword("device", device))
    return cst.Call(func=cst.parse_expression(f"{torch_name}.{factory}"), args=new_args)


def legacy_empty_call(ctor: cst.Call, dtype: Optional[str], device: cst.BaseExpression) -> Optional[cst.Call]:
    """``torch.FloatTensor(*s)`` -> ``torch.empty(*s, dtype=torch.float32, device=d)``: the same
    uninitialised memory, allocated on the device (a following in-place draw fills it there)."""
    if not isinstance(ctor.func, cst.Attribute):
        return None
    args = [a.with_changes(comma=_arg_comma()) for a in ctor.args]
    if dtype is not None:
        args.append(_keyword("dtype", cst.Attribute(ctor.func.value, cst.Name(dtype)), _arg_comma()))
    args.append(_keyword("device", device))
    return cst.Call(func=ctor.func.with_changes(attr=cst.Name("empty")), args=args)


def legacy_fill_call(ctor: cst.Call, value: Optional[cst.BaseExpression], dtype: Optional[str],
                     device: cst.BaseExpression) -> Optional[cst.Call]:
    """``torch.LongTensor(b, n).fill_(0)`` -> ``torch.zeros(b, n, dtype=torch.int64, device=d)``
    (``fill_(1)``: ``ones``; ``fill_(v)``: ``full((b, n), v, ...)``; ``zero_()``: ``zeros``); None
    when the constructor is not reached through the torch module (``from torch import LongTensor``)."""
    if not isinstance(ctor.func, cst.Attribute):
        return None
    torch_mod = ctor.func.value
    number = value.value if isinstance(value, (cst.Integer, cst.Float)) else None
    sizes = [a.value for a in ctor.args]
    if value is None or number in ("0", "0.0", "0."):
        factory, args = "zeros", [cst.Arg(s, star=a.star) for s, a in zip(sizes, ctor.args)]
    elif number in ("1", "1.0", "1."):
        factory, args = "ones", [cst.Arg(s, star=a.star) for s, a in zip(sizes, ctor.args)]
    elif any(a.star for a in ctor.args):
        return None  # `torch.FloatTensor(*s).fill_(v)`: the shape is no tuple of sizes to spell
    else:
        shape = cst.Tuple([cst.Element(s) for s in sizes]) if len(sizes) > 1 else \
            cst.Tuple([cst.Element(sizes[0], comma=cst.Comma(whitespace_after=cst.SimpleWhitespace("")))])
        factory, args = "full", [cst.Arg(shape), cst.Arg(value)]
    args = [a.with_changes(comma=_arg_comma()) for a in args]
    if dtype is not None:
        args.append(_keyword("dtype", cst.Attribute(torch_mod, cst.Name(dtype)), _arg_comma()))
    args.append(_keyword("device", device))
    return cst.Call(func=ctor.func.with_changes(attr=cst.Name(factory)), args=args)


def mapped_to_device(call: cst.Call, device: cst.BaseExpression, name: str = "v") -> cst.Call:
    """``map(torch.LongTensor, rows)`` -> ``map(lambda v: torch.LongTensor(v).to(device), rows)``."""
    f = call.args[0]
    body = method_call(cst.Call(f.value, [cst.Arg(cst.Name(name))]), "to", device)
    lam = cst.Lambda(cst.Parameters([cst.Param(cst.Name(name))]), body)
    return call.with_changes(args=[f.with_changes(value=lam), *call.args[1:]])


def legacy_on_device(call: cst.Call, torch_name: str, device: cst.BaseExpression) -> tuple:
    """A legacy CPU constructor created on ``device`` instead (DL010's port): ``(edit kind, call)``.

    ``torch.LongTensor([[1, 2]])`` / ``torch.LongTensor([f(w) for w in ws])`` ->
    ``torch.tensor(..., dtype=torch.int64, device=device)`` ("device"), ``torch.FloatTensor(2, 3)``
    -> ``torch.empty(2, 3, dtype=torch.float32, device=device)`` ("device"); any other form (data
    from a variable, whose meaning a factory might read differently: ``torch.LongTensor(3)`` is
    three elements, ``torch.tensor(3)`` one; ``torch.Tensor``, which follows the default dtype)
    keeps its constructor and moves: ``torch.LongTensor(batch).to(device)`` ("legacy")."""
    last = (dotted(call.func) or "").rsplit(".", 1)[-1]
    dtype = LEGACY_TYPES.get(last)
    factory = legacy_factory(call)
    if factory is None and len(call.args) == 1 and call.args[0].keyword is None and \
            isinstance(call.args[0].value, cst.ListComp):
        factory = "tensor"
    if dtype is None or factory is None:
        return "legacy", method_call(call, "to", device)
    return "device", legacy_type_call(call, factory, torch_name, dtype, device)


# ---- DL003's rewrites of host round trips (the questions: devlint.analysis.numpy_ops / transfers) ----

def device_draw(facts, call: cst.Call, q: str, kind: str, test) -> Optional[Fix]:
    """``Tensor(np.random.normal(0, 1, shape))`` (``Tensor`` a ``kind`` alias chosen by
    ``test``) -> ``torch.randn(shape, device="cuda" if test else "cpu")``: unsafe, the
    numbers come from torch's generator instead of NumPy's."""
    inner = call.args[0].value
    fn = q.rsplit(".", 1)[-1]
    if not q.startswith("numpy.random.") or any(a.star for a in inner.args):
        return None
    args = [a.value for a in inner.args if a.keyword is None]
    kw = {a.keyword.value: a.value for a in inner.args if a.keyword is not None}
    shape = None
    if kind == "FloatTensor" and fn in ("normal", "uniform") and not set(kw) - {"loc", "scale", "low", "high", "size"}:
        names = ("loc", "scale", "size") if fn == "normal" else ("low", "high", "size")
        vals = [args[i] if i < len(args) else kw.get(k) for i, k in enumerate(names)]
        if all(v is not None for v in vals) and all(
                isinstance(v, (cst.Integer, cst.Float)) and v.evaluated_value == u for v, u in zip(vals[:2], (0, 1))):
            op, shape = ("randn" if fn == "normal" else "rand"), [vals[2]]
    elif kind == "FloatTensor" and fn in ("randn", "rand") and not kw and args:
        op, shape = fn, args
    elif kind == "LongTensor" and fn == "randint" and len(args) == 3 and not kw and isinstance(args[2], cst.Tuple):
        op, shape = "randint", args
    if shape is None:
        return None
    quote = string_quote(facts.source)
    dev = string("cuda", quote)
    if test is not None:
        dev = cst.IfExp(test=test, body=dev, orelse=string("cpu", quote))
    t, needs = torch_ref(facts)
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    new = cst.Call(cst.parse_expression(f"{t}.{op}"),
                   [*(cst.Arg(a, comma=comma) for a in shape),
                    cst.Arg(dev, keyword=cst.Name("device"),
                            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))])
    return Fix(Applicability.UNSAFE, f"draw with `{t}.{op}` on the device (unsafe: another random stream)",
               {call: new}, needs_torch_import=needs)


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


def scalar_fill_fix(facts, node: cst.Call, found: tuple) -> Fix:
    """``torch.LongTensor([[v]]).to(d)`` -> ``torch.full((1, 1), v, dtype=torch.int64, device=d)``:
    one element filled on the device from the Python number (``transfers.scalar_payload``),
    no host tensor and no copy. Safe: ``torch.full`` infers the dtype of a Python number as
    ``torch.tensor`` does (int64, the default float dtype, bool)."""
    from devlint.analysis.hostflow import LEGACY_DTYPES
    dims, value, legacy, device, dtype = found
    t, needs = torch_ref(facts)
    one = [cst.Element(cst.Integer("1"), comma=_arg_comma()) for _ in range(dims - 1)]
    last = cst.Element(cst.Integer("1"), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(""))
                       if dims == 1 else cst.MaybeSentinel.DEFAULT)
    args = [cst.Arg(cst.Tuple([*one, last]), comma=_arg_comma()), cst.Arg(value, comma=_arg_comma())]
    if dtype is not None:
        args.append(_keyword("dtype", dtype, _arg_comma()))
    elif legacy is not None:
        args.append(_keyword("dtype", cst.parse_expression(f"{t}.{LEGACY_DTYPES[legacy]}"), _arg_comma()))
    args.append(_keyword("device", device))
    new = cst.Call(func=cst.parse_expression(f"{t}.full"), args=args)
    return Fix(Applicability.SAFE, f"fill it on the device: `{t}.full(...)` (no host tensor, no copy)",
               {node: new}, needs_torch_import=needs)


_FLOAT_CASTS = frozenset({"float", "double", "half"})


def one_hot_fix(facts, node: cst.Call, on_device: Callable) -> Optional[Fix]:
    """``torch.from_numpy(np.eye(c)[y.cpu().numpy()]).float().to(d)`` -> ``torch.nn.functional
    .one_hot(y, c).float()``: the one-hot built on the device from the labels, cast as the host
    build was (``np.eye`` is float64). Unsafe: ``one_hot`` wants int64 labels in ``[0, c)``
    where NumPy indexing takes any integer (and counts negatives from the end)."""
    if not (is_move(facts, node) and isinstance(node.func.value, cst.Call)) or len(node.args) != 1:
        return None
    build, cast = node.func.value, None
    if isinstance(build.func, cst.Attribute) and build.func.attr.value in _FLOAT_CASTS and not build.args \
            and isinstance(build.func.value, cst.Call):
        cast, build = build.func.attr.value, build.func.value
    q = facts.qualname(build.func) or ""
    if q not in ("torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.FloatTensor", "torch.DoubleTensor") \
            or len(build.args) != 1 or build.args[0].keyword is not None:
        return None
    cast = cast or {"torch.FloatTensor": "float"}.get(q, "double")
    sub = build.args[0].value
    if not (isinstance(sub, cst.Subscript) and len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index)
            and isinstance(sub.value, cst.Call) and facts.qualname(sub.value.func) == "numpy.eye"
            and len(sub.value.args) == 1 and sub.value.args[0].keyword is None):
        return None
    found: list = []
    labels = sub.slice[0].slice.value.visit(_StripHost(on_device, found))
    if not found or any(host_receiver(n) is not None for n in nodes(labels)):
        return None
    t, needs = torch_ref(facts)
    one_hot = cst.Call(func=cst.parse_expression(f"{t}.nn.functional.one_hot"),
                       args=[cst.Arg(labels, comma=_arg_comma()), cst.Arg(sub.value.args[0].value)])
    new = method_call(one_hot, cast)
    return Fix(Applicability.UNSAFE, "build the one-hot on the device with `one_hot` (unsafe: it wants int64 "
                                     "labels in range, NumPy indexing takes any integer)", {node: new},
               needs_torch_import=needs)


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
