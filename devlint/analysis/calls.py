"""Calls of the file's own functions and classes: who calls what, with which arguments.

One walk per file, on demand (``call_graph(facts)``), for questions that follow a value or a
guard one or two calls across the file:

* DL002: does every call of ``def f(device="cuda")`` pass ``device`` (the default is dead)?
  Which literal reaches ``.to(gpu_id)`` through ``main(device)`` -> ``Trainer(..., gpu_id)``?
* DL004: is every call of a helper guarded by its caller?

It also answers the local questions of following a device value: which parameter a
``.to(p)`` / ``.to(self.p)`` places, whether a call is known to treat a device argument as
a placement, whether a local device binding reaches one.

Functions are matched by name: ``f(...)`` calls the module-level ``def f``, ``C(...)`` calls
``C.__init__``, ``obj.m(...)`` / ``self.m(...)`` calls a method ``m`` of a class of the file.
A name defined twice, or used other than as a call (``callback=f``), has unknown callers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from devlint.syntax import dotted, is_cuda_string, own_params
from devlint.walk import children, nodes

UNKNOWN = object()  # the argument of a call that cannot be matched to a parameter (``*args``)


@dataclass(eq=False)
class Func:
    name: str  # the name a call uses: function name, class name for ``__init__``, method name
    node: cst.FunctionDef
    cls: Optional[cst.ClassDef]
    sites: list = field(default_factory=list)  # (Call, enclosing FunctionDef or None)

    @property
    def is_method(self) -> bool:
        return self.cls is not None

    def param_index(self, param: str) -> Optional[int]:
        """Positional index of ``param`` at a call site (``self`` dropped for methods)."""
        p = self.node.params
        names = [x.name.value for x in (*p.posonly_params, *p.params)]
        if self.is_method and names and not _is_static(self.node):
            names = names[1:]
        return names.index(param) if param in names else None

    def bound_arg(self, call: cst.Call, param: str):
        """The argument expression bound to ``param`` at ``call``; None when the default is
        used; ``UNKNOWN`` when ``*args``/``**kwargs`` make it unknowable."""
        idx = self.param_index(param)
        pos = 0
        star = False
        for a in call.args:
            if a.star == "**":
                star = True
            elif a.star == "*":
                star = True
            elif a.keyword is not None:
                if a.keyword.value == param:
                    return a.value
            else:
                if idx is not None and pos == idx and not star:
                    return a.value
                pos += 1
        return UNKNOWN if star else None


def _is_static(fn: cst.FunctionDef) -> bool:
    return any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in fn.decorators)


class CallGraph:
    def __init__(self, module: cst.Module) -> None:
        self.funcs: dict = {}  # call name -> Func (only names defined once)
        self.enclosing: dict = {}  # Call -> enclosing FunctionDef or None
        self.func_of_node: dict = {}  # FunctionDef -> Func
        self.escapes: set = set()  # names used other than as the callee of a call
        dupes: set = set()
        for stmt in module.body:
            if isinstance(stmt, cst.FunctionDef):
                self._define(stmt.name.value, stmt, None, dupes)
            elif isinstance(stmt, cst.ClassDef):
                self._define_class(stmt, dupes)
        for d in dupes:
            self.funcs.pop(d, None)
        self._walk(module)

    def _define_class(self, cls: cst.ClassDef, dupes: set) -> None:
        """Methods of a class, and of the classes nested in it (test bases in a holder class)."""
        if not isinstance(cls.body, cst.IndentedBlock):
            return
        for m in cls.body.body:
            if isinstance(m, cst.FunctionDef):
                name = cls.name.value if m.name.value == "__init__" else m.name.value
                self._define(name, m, cls, dupes)
            elif isinstance(m, cst.ClassDef):
                self._define_class(m, dupes)

    def _define(self, name: str, fn: cst.FunctionDef, cls, dupes: set) -> None:
        if name in self.funcs:
            dupes.add(name)
            return
        f = Func(name, fn, cls)
        self.funcs[name] = f
        self.func_of_node[fn] = f

    def _walk(self, module: cst.Module) -> None:
        stack: list = [(module, None)]
        callee_names: set = set()
        while stack:
            node, fn = stack.pop()
            t = type(node)  # concrete node classes: cheaper than isinstance() against LibCST's ABCs
            if t is cst.FunctionDef:
                fn = node
            elif t is cst.Call:
                self.enclosing[node] = fn
                name = _call_name(node)
                f = self.funcs.get(name) if name is not None else None
                if f is not None and type(node.func) is cst.Attribute and (
                        f.cls is None or (name in _CONTAINER_METHODS and not _names_an_object(node.func.value))):
                    # `model.train()` calls a method of the model, not the file's `def train`;
                    # `self.counts.get(key, 0)` is a dict's `get`, not the class's own `def get`
                    callee_names.add(id(node.func.attr))
                    f = None
                if f is not None:
                    f.sites.append((node, fn))
                    callee_names.add(id(node.func if isinstance(node.func, cst.Name) else node.func.attr))
            elif t is cst.Attribute:
                f = self.funcs.get(node.attr.value)
                if f is not None and f.cls is None:
                    callee_names.add(id(node.attr))  # `x.train`: an attribute of x, no use of `def train`
            elif t is cst.Name and node.value in self.funcs and id(node) not in callee_names:
                self.escapes.add(node.value)
            kids = children(node, trivia=False)
            if t is cst.FunctionDef or t is cst.ClassDef:
                kids = [k for k in kids if k is not node.name]
            # (a call's callee is visited after `callee_names` knows it: children come off a stack)
            for k in reversed(kids):
                stack.append((k, fn))

    def callers_of(self, fn: cst.FunctionDef) -> Optional[list]:
        """Call sites of ``fn`` in the file, or None when they cannot all be known."""
        f = self.func_of_node.get(fn)
        if f is None or f.name in self.escapes:
            return None
        return f.sites


# methods of Python's built-in containers and strings: `x.get(...)` on a value held in an
# attribute, an item or a call's result is as likely a dict's as one of the file's classes'
_CONTAINER_METHODS = frozenset((
    "get", "pop", "popitem", "setdefault", "update", "items", "keys", "values", "copy", "clear",
    "append", "extend", "insert", "remove", "index", "count", "sort", "reverse", "add", "discard",
    "union", "intersection", "difference", "issubset", "issuperset", "join", "split", "strip",
    "replace", "format", "startswith", "endswith", "encode", "decode", "lower", "upper", "find"))


def _names_an_object(receiver: cst.CSTNode) -> bool:
    """The receiver is a plain name (``self``, ``cls``, ``cache``) or ``super()``: it may well
    hold an instance of one of the file's classes."""
    t = type(receiver)
    return t is cst.Name or (t is cst.Call and type(receiver.func) is cst.Name and receiver.func.value == "super")


def _call_name(call: cst.Call) -> Optional[str]:
    if isinstance(call.func, cst.Name):
        return call.func.value
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    return None


def guarded_by_callers(g: CallGraph, fn: cst.FunctionDef, site_guarded: dict, memo: dict) -> bool:
    """Every call of ``fn`` in the file (at least one) is guarded where it is made, or is made
    in a function that is itself guarded by all its callers (``site_guarded``: Call -> bool,
    recorded by the rule during the traversal)."""
    if fn in memo:
        return memo[fn]
    memo[fn] = False  # a cycle guards nothing
    sites = g.callers_of(fn)
    ok = bool(sites) and all(
        site_guarded.get(call, False) or (caller is not None and guarded_by_callers(g, caller, site_guarded, memo))
        for call, caller in sites)
    memo[fn] = ok
    return ok


def call_graph(facts) -> CallGraph:
    """The file's call graph, built once and kept on the facts object."""
    g = getattr(facts, "_call_graph", None)
    if g is None:
        g = facts._call_graph = CallGraph(facts.module)
    return g


def literals_reaching(facts, fn: cst.FunctionDef, param: str, depth: int = 0, only: bool = True):
    """``(literal, callee name, only_use)`` for each int / ``"cuda"`` literal bound to ``param``
    of ``fn`` at its calls in the file: passed directly, bound once to the name passed
    (``device = 0; main(device)``), or one call further back (``main(device)`` passing its own
    parameter on to ``Trainer(..., gpu_id)``). ``only_use``: nothing but those calls reads
    the names on the way (guarding the literal changes nothing else)."""
    g = call_graph(facts)
    f = g.func_of_node.get(fn)
    sites = g.callers_of(fn)
    if f is None or not sites:
        return
    for call, caller in sites:
        arg = f.bound_arg(call, param)
        if arg is None or arg is UNKNOWN:
            continue
        if _is_device_literal(arg):
            yield arg, f.name, only
        elif isinstance(arg, cst.Name):
            name = arg.value
            scope = caller
            body = facts.module if scope is None else scope.body
            lits = _single_literal_binding(body, name)
            if lits is not None:
                uses = sum(1 for n in nodes(body) if isinstance(n, cst.Name) and n.value == name)
                yield lits, f.name, only and uses == 2
            elif (scope is not None and depth < 1 and name not in facts.rebound.get(scope, ())
                  and any(p.name.value == name for p in own_params(scope))):
                passed_only = sum(1 for n in nodes(scope.body) if isinstance(n, cst.Name) and n.value == name) == 1
                yield from literals_reaching(facts, scope, name, depth + 1, only and passed_only)


def _is_device_literal(node: cst.CSTNode) -> bool:
    return (isinstance(node, cst.Integer) or is_cuda_string(node))


def _single_literal_binding(scope: cst.CSTNode, name: str):
    """The literal of the one assignment ``name = 0`` / ``name = "cuda"`` in ``scope`` (not
    entering nested functions), or None when the name is bound otherwise or more than once."""
    found = []
    for n in nodes(scope):
        if isinstance(n, cst.Assign):
            if any(isinstance(t.target, cst.Name) and t.target.value == name for t in n.targets):
                found.append(n.value)
            elif any(name in {x.value for x in nodes(t.target) if isinstance(x, cst.Name)} for t in n.targets):
                return None
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For)) and any(
                isinstance(x, cst.Name) and x.value == name for x in nodes(n.target)):
            return None
    if len(found) == 1 and _is_device_literal(found[0]):
        return found[0]
    return None


# calls whose `device` is a device *type* or a query: they run without a GPU
_NOT_PLACING = frozenset({"autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype",
                          "get_autocast_gpu_dtype", "set_autocast_dtype", "device_count", "get_device_module",
                          "is_available", "synchronize"})


def param_places(fn: cst.FunctionDef, name: str, cls: Optional[cst.ClassDef] = None) -> bool:
    """Whether parameter ``name`` of ``fn`` reaches a placement: ``.to(name)``, ``.cuda(name)``,
    ``device=name`` / ``map_location=name`` in a call that places, ``torch.device(name)``;
    in ``__init__`` also through ``self.attr = name`` anywhere in the class. A device only
    compared, logged, or given to ``autocast`` / ``GradScaler`` places nothing."""
    refs = {name}
    scopes: list = [fn.body]
    if cls is not None and fn.name.value == "__init__":
        for n in nodes(fn.body):
            if isinstance(n, cst.Assign) and isinstance(n.value, cst.Name) and n.value.value == name:
                for t in n.targets:
                    if (isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name)
                            and t.target.value.value == "self"):
                        refs.add(f"self.{t.target.attr.value}")
        scopes = [cls.body]
    for scope in scopes:
        for n in nodes(scope, into_scopes=True):
            if isinstance(n, cst.Call) and _places_ref(n, refs):
                return True
    return False


def reaches_placement(scope: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` is used in a placement anywhere under ``scope`` (see ``param_places``)."""
    return any(isinstance(n, cst.Call) and _places_ref(n, {name}) for n in nodes(scope, into_scopes=True))


def _ref(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return f"self.{node.attr.value}"
    return None


def _places_ref(call: cst.Call, refs: set) -> bool:
    func = call.func
    last = func.attr.value if isinstance(func, cst.Attribute) else (func.value if isinstance(func, cst.Name) else "")
    if last in _NOT_PLACING:
        return False
    for i, a in enumerate(call.args):
        if _ref(a.value) not in refs:
            continue
        if a.keyword is not None and a.keyword.value in ("device", "map_location"):
            return True
        if a.keyword is None and i == 0 and last in ("to", "cuda", "device"):
            return True
    return False


def _args_at_every_call(facts, fn: cst.FunctionDef, name: str) -> Optional[list]:
    """What each call of ``fn`` in the file binds to ``name`` (:meth:`Func.bound_arg`), or None
    when there is no call or not every call is known."""
    g = call_graph(facts)
    sites = g.callers_of(fn)
    if not sites:
        return None
    f = g.func_of_node[fn]
    return [f.bound_arg(call, name) for call, _ in sites]


def default_is_dead(facts, fn: cst.FunctionDef, param: cst.Param) -> bool:
    """Every call of ``fn`` in the file passes ``param`` (at least one call, all known):
    its default never runs."""
    if not any(p is param for p in own_params(fn)):
        return False
    args = _args_at_every_call(facts, fn, param.name.value)
    return args is not None and all(a not in (None, UNKNOWN) for a in args)


def none_in_every_call(facts, fn: Optional[cst.FunctionDef], name: str) -> bool:
    """``name`` is a parameter of ``fn`` that defaults to ``None``, is never rebound in it, and
    every call of ``fn`` in the file (at least one, all known) leaves it at ``None``: the
    ``rotary = RotaryEmbedding(dim)`` of ``def __init__(self, dim, device=None)``."""
    if fn is None or name in facts.rebound.get(fn, ()):
        return False
    param = next((p for p in own_params(fn) if p.name.value == name), None)
    if param is None or not (isinstance(param.default, cst.Name) and param.default.value == "None"):
        return False
    args = _args_at_every_call(facts, fn, name)
    return args is not None and all(
        a is None or (isinstance(a, cst.Name) and a.value == "None") for a in args)


# command-line runners and decorators that call a function with its defaults filled in from
# the command line (a default left alone there is what a user runs)
_CLI_RUNNERS = frozenset({"Fire", "run", "cli", "CLI", "bind", "parse"})
_CLI_MODULES = ("fire", "typer", "tyro", "jsonargparse", "argbind", "click", "absl")


def fallback_param(fn: Optional[cst.FunctionDef], assign: cst.Assign) -> Optional[cst.Param]:
    """The parameter whose ``None`` default ``assign`` fills (``if not device: device = "cuda"``,
    ``if device is None: ...`` among the function's own statements): the default in effect."""
    if fn is None or not isinstance(fn.body, cst.IndentedBlock) or len(assign.targets) != 1 \
            or not isinstance(assign.targets[0].target, cst.Name):
        return None
    name = assign.targets[0].target.value
    params = {p.name.value: p for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
    param = params.get(name)
    if param is None or not (isinstance(param.default, cst.Name) and param.default.value == "None"):
        return None
    for st in fn.body.body:
        if not (isinstance(st, cst.If) and st.orelse is None and isinstance(st.body, cst.IndentedBlock)):
            continue
        t = st.test
        tests_none = ((isinstance(t, cst.UnaryOperation) and isinstance(t.operator, cst.Not)
                       and isinstance(t.expression, cst.Name) and t.expression.value == name)
                      or (isinstance(t, cst.Comparison) and isinstance(t.left, cst.Name) and t.left.value == name
                          and len(t.comparisons) == 1 and isinstance(t.comparisons[0].operator, cst.Is)
                          and isinstance(t.comparisons[0].comparator, cst.Name)
                          and t.comparisons[0].comparator.value == "None"))
        first = st.body.body[0] if st.body.body else None
        if tests_none and isinstance(first, cst.SimpleStatementLine) and any(s is assign for s in first.body):
            return param
    return None


def default_reached(facts, fn: cst.FunctionDef, param: cst.Param) -> bool:
    """Something in the file runs ``fn`` with ``param``'s default: a call that omits it, or a
    command-line runner handed ``fn`` (``fire.Fire(train)``, ``@click.command()``,
    ``@argbind.bind``), where whoever runs the command without the option gets the default."""
    g = call_graph(facts)
    f = g.func_of_node.get(fn)
    if f is not None:
        for call, _ in f.sites:
            if f.bound_arg(call, param.name.value) is None:
                return True
    for dec in fn.decorators:
        d = facts.qualname(dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator) or ""
        if d.split(".")[0] in _CLI_MODULES:
            return True
    if not any(facts.mentions(m.encode()) for m in _CLI_MODULES):
        return False  # (no runner of a command-line module can be handed it: the text names none)
    name = fn.name.value
    for n in nodes(facts.module, into_scopes=True):
        if isinstance(n, cst.Call) and any(isinstance(a.value, cst.Name) and a.value.value == name for a in n.args):
            q = facts.qualname(n.func) or ""
            if q.split(".")[0] in _CLI_MODULES and q.rsplit(".", 1)[-1] in _CLI_RUNNERS:
                return True
    return False


def placed_parameter(facts, fn: Optional[cst.FunctionDef], name: str) -> Optional[tuple]:
    """``(fn, name)`` when ``.to(name)`` in ``fn`` places its parameter ``name`` (never rebound
    in it): the key under which :func:`literals_reaching` finds what callers pass."""
    if fn is None or name in facts.rebound.get(fn, ()):
        return None
    return (fn, name) if any(p.name.value == name for p in own_params(fn)) else None


def placed_init_parameter(cls: Optional[cst.ClassDef], attr: str) -> Optional[tuple]:
    """``(__init__, "gpu_id")`` when ``.to(self.gpu_id)`` places an attribute that ``__init__``
    set once, from its parameter ``gpu_id``."""
    if cls is None or attr.count(".") != 1 or not isinstance(cls.body, cst.IndentedBlock):
        return None
    init = next((m for m in cls.body.body if isinstance(m, cst.FunctionDef) and m.name.value == "__init__"), None)
    if init is None:
        return None
    sources = [s.value for stmt in init.body.body if isinstance(stmt, cst.SimpleStatementLine)
               for s in stmt.body if isinstance(s, cst.Assign)
               and any(dotted(t.target) == attr for t in s.targets)]
    if len(sources) == 1 and isinstance(sources[0], cst.Name):
        return (init, sources[0].value)
    return None


def unused_device_binding(fn: cst.FunctionDef, stmt: cst.SimpleStatementLine) -> bool:
    """``dev = torch.device("cuda:1")`` whose names never reach a placement in ``fn`` (a cache
    key, an argument to a fake): creating a ``torch.device`` needs no GPU."""
    names = [t.target.value for s in stmt.body if isinstance(s, cst.Assign) for t in s.targets
             if isinstance(t.target, cst.Name)]
    return bool(names) and not any(reaches_placement(fn.body, n) for n in names)


_PLACEMENT_METHODS = frozenset({"to", "cuda", "new_tensor", "new_zeros", "new_ones", "new_empty", "new_full"})


def places_device(facts, call: cst.Call) -> bool:
    """Whether ``call`` is known to treat its device argument as a placement: a torch API or
    a tensor/Module placement method. A user function may compare it instead
    (``b.device.type == device``), where a ``torch.device`` object would change the result."""
    q = facts.qualname(call.func)
    if q is not None:
        return q.split(".", 1)[0] == "torch"
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in _PLACEMENT_METHODS
