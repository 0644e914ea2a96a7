"""Where a value comes from: binding sites and the origins of a tensor expression (DL010).

Flow-insensitive and per scope (a function body, or the module body), from the CST alone:

* ``target_names(target)``: the names a target binds (``devlint.syntax.names_read``: the
  names an expression reads);
* ``bindings(body)``: name -> binding sites in one scope: assignments (a tuple target over a
  tuple value split element-wise: ``inp, tgt = s[:-1], s[1:]``), ``for`` targets (split over
  ``enumerate``/``zip``), ``with ... as``, and ``name.append(v)`` / ``extend`` (a container
  holds what is put in it);
* ``Origins``: the *leaves* an expression's value is built from. A leaf is ``DEVICE`` (a value
  the caller says lives on the device: a model's output, a moved batch), ``ORIGIN`` (a creation
  site a port can place: a torch factory, ``torch.from_numpy``) or ``HOST`` (a value whose
  origin is unknown or that cannot move: an unknown call, a parameter nobody passes, an
  imported name, ``x.cpu()``). Python non-tensors (numbers, ``len(x)``, ``x.size(0)``,
  ``x.shape``, ``torch.float32``) contribute no leaf. A HOST leaf carries the outermost name
  it was reached through (the value as the model meets it), an ORIGIN leaf the name it is
  bound to, so a message can say which value stays behind.

  A legacy typed constructor (``torch.LongTensor(data)``) is a creation site like
  ``torch.tensor``: the port places it. Python data (``sorted(set(words))``, a ``dict`` of
  indices) carries no leaf of its own. ``a, b = f()`` over a function whose every return is a
  tuple binds ``a`` to the first elements only (the ``call_element`` hook), and a name rebound
  by a top-level statement that every read follows (``x = torch.LongTensor(x)`` after
  ``x = make_batch()``) has only that binding as its value there.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import libcst as cst

from devlint.syntax import factory_takes_device
from devlint.facts import DEVICE_LESS_FACTORIES, call_arg, dotted
from devlint.syntax import own_params
from devlint.walk import children, nodes, statements

DEVICE, ORIGIN, HOST = "device", "origin", "host"
_MAX_DEPTH = 60  # nested expressions / names followed at once (a 500-term sum is not followed)

# reads that give Python values (or metadata), never a tensor that must be placed
HOST_ATTRS = frozenset({"shape", "dtype", "ndim", "device", "is_cuda", "requires_grad", "grad_fn"})
HOST_METHODS = frozenset({"size", "dim", "item", "tolist", "numel", "numpy", "nelement", "stride",
                          "data_ptr", "element_size", "is_contiguous", "__len__"})
_SCALAR_BUILTINS = frozenset({"int", "float", "len", "range", "str", "bool", "round", "print", "repr",
                              "isinstance", "hasattr", "getattr", "id", "type", "format", "abs", "min", "max"})
_PASS_BUILTINS = frozenset({"list", "tuple", "sorted", "reversed", "zip", "enumerate", "iter", "next", "sum",
                            "set", "frozenset", "dict"})
# top-level torch functions that return no tensor (or none a port places): their result is no value to place
_TORCH_NO_TENSOR = frozenset({"is_tensor", "is_floating_point", "numel", "manual_seed", "seed", "initial_seed",
                              "get_default_dtype", "set_default_dtype", "no_grad", "enable_grad", "inference_mode",
                              "set_grad_enabled", "is_grad_enabled", "Size", "device", "dtype", "finfo", "iinfo",
                              "compile", "load", "save", "set_printoptions", "use_deterministic_algorithms",
                              "Generator", "get_rng_state", "set_rng_state", "set_num_threads", "get_num_threads",
                              "broadcast_shapes", "promote_types", "result_type", "can_cast"})
# torch calls whose value is made of their first argument only, the others staying on the host
# (`pack_padded_sequence(x, lengths)`: `lengths` must be a CPU tensor): no operands to colocate
HOST_ARG_CALLS = frozenset({"torch.nn.utils.rnn.pack_padded_sequence"})
_FUNCTIONAL_LOSSES = frozenset({"cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits",
                                "kl_div", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                                "ctc_loss", "cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss",
                                "poisson_nll_loss", "gaussian_nll_loss", "hinge_embedding_loss",
                                "multilabel_margin_loss", "soft_margin_loss", "multi_margin_loss"})


class Leaf(NamedTuple):
    kind: str  # DEVICE / ORIGIN / HOST
    node: cst.CSTNode  # the creation site (ORIGIN), the expression that stays behind (HOST)
    name: Optional[str]  # the innermost name the leaf was reached through
    why: str = ""


class Site(NamedTuple):
    kind: str  # "assign", "aug", "for", "with", "append", "item" (``name[i] = v``)
    value: cst.CSTNode  # the value expression (for: the iterated expression)
    stmt: cst.CSTNode
    index: Optional[int] = None  # `a, b = value`: the position of the name in a flat tuple target


def target_names(target: cst.CSTNode) -> list:
    """``a``, ``(a, b)``, ``*rest``, ``a[i]`` (binds into ``a``)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in target_names(el.value)]
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    if isinstance(target, cst.Subscript):
        n = target.value
        while isinstance(n, cst.Subscript):
            n = n.value
        return [n.value] if isinstance(n, cst.Name) else []
    return []


def _split(target: cst.CSTNode, value: cst.CSTNode, stmt, kind: str, out: dict) -> None:
    """Bind ``target`` to ``value``, element-wise where both are same-length tuples."""
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)) and \
            len(target.elements) == len(value.elements) and \
            not any(isinstance(e, cst.StarredElement) for e in (*target.elements, *value.elements)):
        for t, v in zip(target.elements, value.elements):
            _split(t.value, v.value, stmt, kind, out)
        return
    if isinstance(target, (cst.Tuple, cst.List)) and all(isinstance(e.value, cst.Name) for e in target.elements) \
            and not any(isinstance(e, cst.StarredElement) for e in target.elements):
        for i, e in enumerate(target.elements):
            out.setdefault(e.value.value, []).append(Site(kind, value, stmt, i))
        return
    if kind == "assign" and isinstance(target, cst.Subscript):
        kind = "item"
    for name in target_names(target):
        out.setdefault(name, []).append(Site(kind, value, stmt))


def _iter_split(target: cst.CSTNode, it: cst.CSTNode, loop: cst.For, out: dict) -> None:
    """``for i, x in enumerate(xs)``: ``i`` is an int, ``x`` comes from ``xs``;
    ``for a, b in zip(xs, ys)``: element-wise; otherwise every target name comes from ``it``."""
    if isinstance(it, cst.Call) and isinstance(target, (cst.Tuple, cst.List)) and \
            not any(a.star or a.keyword for a in it.args):
        f = dotted(it.func)
        els = [e.value for e in target.elements]
        if f == "enumerate" and len(els) == 2 and len(it.args) == 1:
            _iter_split(els[1], it.args[0].value, loop, out)
            return
        if f == "zip" and len(els) == len(it.args):
            for t, a in zip(els, it.args):
                _iter_split(t, a.value, loop, out)
            return
    for name in target_names(target):
        out.setdefault(name, []).append(Site("for", it, loop))


def bindings(body: cst.CSTNode) -> dict:
    """name -> [Site] for every binding site in one scope (nested functions/classes excluded)."""
    binds: dict = {}
    for n in statements(body):
        if isinstance(n, cst.Assign):
            for t in n.targets:
                _split(t.target, n.value, n, "assign", binds)
        elif isinstance(n, cst.AnnAssign) and n.value is not None:
            _split(n.target, n.value, n, "assign", binds)
        elif isinstance(n, cst.AugAssign):
            _split(n.target, n.value, n, "aug", binds)
        elif isinstance(n, cst.For):
            _iter_split(n.target, n.iter, n, binds)
        elif isinstance(n, cst.With):
            for item in n.items:
                if item.asname is not None:
                    for name in target_names(item.asname.name):
                        binds.setdefault(name, []).append(Site("with", item.item, n))
    for n in nodes(body):
        if isinstance(n, cst.NamedExpr):
            _split(n.target, n.value, n, "assign", binds)
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and \
                n.func.attr.value in ("append", "extend", "insert") and isinstance(n.func.value, cst.Name) and n.args:
            binds.setdefault(n.func.value.value, []).append(Site("append", n.args[-1].value, n))
    return binds


def _inner_blocks(stmt: cst.CSTNode) -> list:
    """The statement lists directly inside a compound statement (bodies, else/except/finally)."""
    out = []
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.IndentedBlock):
        out.append(body.body)
    for part in (getattr(stmt, "orelse", None), getattr(stmt, "finalbody", None), *getattr(stmt, "handlers", ())):
        if part is not None:
            out.extend(_inner_blocks(part))
    return out


def _local_to(fn: cst.CSTNode, name: str, facts) -> bool:
    """``name`` is a variable of the function itself (a parameter or assigned there, not global)."""
    if isinstance(fn, cst.Lambda):
        return name in [p.name.value for p in own_params(fn)]
    if not (name in facts.assigned_in.get(fn, ()) or name in [p.name.value for p in own_params(fn)]):
        return False
    return not any(type(n) is cst.Global and any(g.name.value == name for g in n.names) for n in statements(fn.body))


def _tensor_maker(q: Optional[str]) -> bool:
    """``torch.LongTensor``, ``torch.tensor``, ``torch.as_tensor``, ``torch.from_numpy``: a function
    that makes a new CPU tensor from data."""
    return q is not None and q.count(".") == 1 and q.startswith("torch.") and (
        q.endswith("Tensor") or q in ("torch.tensor", "torch.as_tensor", "torch.from_numpy"))


def _rebinds(stmt: cst.CSTNode, name: str) -> bool:
    """``name = ...`` / ``a, name = ...`` rebinds the name; ``name[i] = ...`` writes into it."""
    targets = [t.target for t in stmt.targets] if isinstance(stmt, cst.Assign) else \
        [stmt.target] if isinstance(stmt, cst.AnnAssign) else []
    for t in targets:
        if isinstance(t, cst.Name) and t.value == name:
            return True
        if isinstance(t, (cst.Tuple, cst.List)) and any(
                isinstance(e.value, cst.Name) and e.value.value == name for e in t.elements):
            return True
    return False


def is_functional_loss(qualname: Optional[str]) -> bool:
    q = qualname or ""
    return q.startswith("torch.nn.functional.") and q.rsplit(".", 1)[-1] in _FUNCTIONAL_LOSSES


def params_of(fn: Optional[cst.FunctionDef]) -> list:
    if fn is None:
        return []
    return [x.name.value for x in own_params(fn)]


class Origins:
    """The leaves of expressions in one scope; module-level names resolve in ``outer``.

    ``facts`` resolves import aliases. Hooks (all optional):
    ``call_leaf(call)`` -> a leaf set for calls the caller understands (a model call: DEVICE),
    ``loop_leaf(for_node, name)`` -> a leaf set for a ``for`` target (a moved batch: DEVICE),
    ``name_leaf(name)`` -> a leaf set for names the caller knows (a model: no leaf),
    ``param_leaves(name)`` -> the leaves of what callers pass for a parameter (default: HOST),
    ``call_element(call, i)`` -> the leaves of element ``i`` of what a call returns, where the
    caller knows it returns a tuple (``a, b = f()``; default: the whole call's leaves).
    """

    def __init__(self, facts, body: cst.CSTNode, fn: Optional[cst.FunctionDef] = None,
                 outer: Optional["Origins"] = None, call_leaf: Optional[Callable] = None,
                 loop_leaf: Optional[Callable] = None, name_leaf: Optional[Callable] = None,
                 param_leaves: Optional[Callable] = None, visiting: Optional[set] = None,
                 call_element: Optional[Callable] = None) -> None:
        self.facts, self.body, self.fn, self.outer = facts, body, fn, outer
        self.binds = bindings(body)
        self.params = set(params_of(fn))
        self.call_leaf = call_leaf or (lambda call: None)
        self.loop_leaf = loop_leaf or (lambda loop, name: None)
        self.name_leaf = name_leaf or (lambda name: None)
        self.param_leaves = param_leaves or (lambda origins, name: None)
        self.call_element = call_element or (lambda call, i: None)
        self._block_of: Optional[dict] = None  # id(statement) -> (its statement list, index)
        self._position: dict = {}  # id(statement list) -> {id(node): index of its statement}
        self._rebound: dict = {}  # name -> (its last binding, its statement list, index) or None
        self._names: Optional[dict] = None  # name -> its Name nodes in the scope (see _uses)
        self.visiting = visiting if visiting is not None else set()  # shared across scopes
        self._memo: dict = {}
        self._local: list = []  # comprehension bindings: [{name: leaves}]
        self._cut = False
        self._depth = 0

    # ---- names -------------------------------------------------------------------------
    def name_leaves(self, name: str) -> frozenset:
        for frame in reversed(self._local):
            if name in frame:
                return frame[name]
        if name in ("None", "True", "False"):
            return frozenset()
        known = self.name_leaf(name)
        if known is not None:
            return known
        if name in self._memo:
            return self._memo[name]
        key = (id(self), name)
        if key in self.visiting:
            self._cut = True
            return frozenset()
        self.visiting.add(key)
        outer_cut, self._cut = self._cut, False
        try:
            leaves = self._resolve(name)
        finally:
            self.visiting.discard(key)
        # a value that stays behind is named as the model meets it (the outermost name); a
        # creation site keeps the name it is bound to
        leaves = frozenset(lf._replace(name=name) if lf.name is None or lf.kind == HOST else lf for lf in leaves)
        if not self._cut:
            self._memo[name] = leaves
        self._cut = self._cut or outer_cut
        return leaves

    def _resolve(self, name: str) -> frozenset:
        sites = self.binds.get(name)
        if sites is None:
            if name in self.params:
                passed = self.param_leaves(self, name)
                if passed is not None:
                    return passed
                return frozenset({Leaf(HOST, self.fn, None, "a parameter of "
                                       f"`{self.fn.name.value}` whose callers are unknown")})
            if self.outer is not None:
                return self.outer.name_leaves(name)
            if name in self.facts.aliases and not self.facts.aliases[name].startswith("torch"):
                return frozenset({Leaf(HOST, self.body, None, "imported")})
            return frozenset()
        rebound = self._rebinding(name)
        if rebound is not None:
            return self._site_leaves(rebound[0])
        return self._of_sites(name, sites)

    def _of_sites(self, name: str, sites: list) -> frozenset:
        items = [s for s in sites if s.kind == "item"]
        if items:  # `t[i] = v` writes into `t`: a tensor stays where it was made, a list holds `v`
            base = self._resolve_sites(name, [s for s in sites if s.kind != "item"])
            if base and all(lf.kind in (ORIGIN, DEVICE) for lf in base):
                return base
            return base | self._resolve_sites(name, items)
        return self._resolve_sites(name, sites)

    def _resolve_sites(self, name: str, sites: list) -> frozenset:
        out: set = set()
        for site in sites:
            if site.kind == "aug":
                continue  # `x += v` keeps `x` where it is
            if site.kind == "with":
                out.add(Leaf(HOST, site.value, None, "bound by `with`"))
            elif site.kind == "for":
                known = self.loop_leaf(site.stmt, name)
                if known is not None:
                    out |= known
                elif not (isinstance(site.value, cst.Call) and dotted(site.value.func) == "range"):
                    out |= self.leaves(site.value)
            else:  # assign, append, item
                out |= self._site_leaves(site)
        return frozenset(out)

    def _site_leaves(self, site: Site) -> frozenset:
        if site.index is not None and isinstance(site.value, cst.Call):
            known = self.call_element(site.value, site.index)
            if known is not None:
                return known
        return self.leaves(site.value)

    def _blocks(self) -> dict:
        """id(statement) -> (the statement list that holds it, its index there), for every
        statement of the scope (small statements too; nested scopes excluded)."""
        if self._block_of is None:
            self._block_of = {}
            todo = [getattr(self.body, "body", ())]
            while todo:
                block = todo.pop()
                for i, stmt in enumerate(block):
                    self._block_of[id(stmt)] = (block, i)
                    if isinstance(stmt, cst.SimpleStatementLine):
                        for small in stmt.body:
                            self._block_of[id(small)] = (block, i)
                    elif not isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                        todo.extend(_inner_blocks(stmt))
        return self._block_of

    def _positions(self, block) -> dict:
        """id(node) -> the index of the statement of ``block`` that holds it (nested scopes included)."""
        key = id(block)
        if key not in self._position:
            self._position[key] = {}
            for i, stmt in enumerate(block):
                for n in nodes(stmt, into_scopes=True):
                    self._position[key][id(n)] = i
        return self._position[key]

    def _rebinding(self, name: str) -> Optional[tuple]:
        """``(last site, its statement list, its index there)`` when ``name``'s last binding is a
        plain assignment statement of its own, every other binding comes before it in the same
        statement list, and every read of the name sits in that list too: reads after it see
        only that binding (``x = torch.LongTensor(x)`` after ``x, y = make_batch()``), reads up
        to it (its own value included) only the earlier ones; None otherwise."""
        if name in self._rebound:
            return self._rebound[name]
        self._rebound[name] = None
        sites = self.binds.get(name) or []
        if len(sites) < 2 or any(s.kind not in ("assign", "item") for s in sites):
            return None
        where = self._blocks()
        binding = [s for s in sites if s.kind == "assign"]
        last = binding[-1]
        if id(last.stmt) not in where or not _rebinds(last.stmt, name):
            return None
        block, at = where[id(last.stmt)]
        if not isinstance(block[at], cst.SimpleStatementLine) or len(block[at].body) != 1:
            return None
        pos = self._positions(block)
        if any(pos.get(id(s.stmt), at) >= at for s in sites if s is not last):
            return None  # a binding after it, or outside its statement list
        # where else the name may appear before the rebinding: the earlier bindings, each a
        # statement of its own (a read anywhere else may reach the model with an earlier value)
        simple = {pos[id(s.stmt)] for s in sites if s is not last and isinstance(block[pos[id(s.stmt)]],
                                                                                  cst.SimpleStatementLine)}
        for n, fns in self._uses().get(name, ()):
            if any(_local_to(fn, name, self.facts) for fn in fns):
                continue  # a function's own `name` is another variable
            i = pos.get(id(n))
            if i is None or (i < at and i not in simple):
                return None
        self._rebound[name] = (last, block, at)
        return self._rebound[name]

    def _uses(self) -> dict:
        """name -> [(Name node, the functions and lambdas of the scope around it)], one walk."""
        if self._names is None:
            self._names = {}
            stack = [(n, ()) for n in getattr(self.body, "body", ())]
            while stack:
                n, fns = stack.pop()
                if type(n) is cst.Name:
                    self._names.setdefault(n.value, []).append((n, fns))
                    continue
                if type(n) in (cst.FunctionDef, cst.Lambda):
                    fns = (*fns, n)
                stack.extend((c, fns) for c in children(n, trivia=False))
        return self._names

    def _earlier(self, e: cst.Name) -> Optional[frozenset]:
        """The leaves of a read of a rebound name up to its rebinding: the earlier bindings'."""
        rebound = self._rebinding(e.value) if e.value in self.binds else None
        if rebound is None or self._positions(rebound[1]).get(id(e), rebound[2] + 1) > rebound[2]:
            return None
        key = (id(self), e.value, "before")
        if key in self.visiting:
            self._cut = True
            return frozenset()
        self.visiting.add(key)
        try:
            leaves = self._of_sites(e.value, [s for s in self.binds[e.value] if s is not rebound[0]])
        finally:
            self.visiting.discard(key)
        return frozenset(lf._replace(name=e.value) if lf.name is None or lf.kind == HOST else lf for lf in leaves)

    # ---- expressions -------------------------------------------------------------------
    def leaves(self, e: cst.CSTNode) -> frozenset:
        if len(self.visiting) > _MAX_DEPTH or self._depth > _MAX_DEPTH:
            return frozenset({Leaf(HOST, e, None, "too deep to follow")})  # no RecursionError
        self._depth += 1
        try:
            return self._leaves(e)
        finally:
            self._depth -= 1

    def _leaves(self, e: cst.CSTNode) -> frozenset:
        if isinstance(e, cst.Name):
            if not any(e.value in frame for frame in self._local):
                earlier = self._earlier(e)
                if earlier is not None:
                    return earlier
            return self.name_leaves(e.value)
        if isinstance(e, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.FormattedString,
                          cst.ConcatenatedString, cst.Lambda, cst.Ellipsis)):
            return frozenset()
        if isinstance(e, cst.Attribute):
            if e.attr.value in HOST_ATTRS or (self.facts.qualname(e) or "").startswith("torch."):
                return frozenset()  # `x.shape`; `torch.float32`, `torch.FloatTensor`: no tensor
            return self.leaves(e.value)
        if isinstance(e, cst.Subscript):
            return self.leaves(e.value)
        if isinstance(e, cst.Call):
            return self._call(e)
        if isinstance(e, cst.BinaryOperation):
            return self.leaves(e.left) | self.leaves(e.right)
        if isinstance(e, cst.UnaryOperation):
            return self.leaves(e.expression)
        if isinstance(e, cst.BooleanOperation):
            return self.leaves(e.left) | self.leaves(e.right)
        if isinstance(e, cst.Comparison):
            return self._union([e.left, *(c.comparator for c in e.comparisons)])
        if isinstance(e, cst.IfExp):
            return self.leaves(e.body) | self.leaves(e.orelse)
        if isinstance(e, (cst.Tuple, cst.List, cst.Set)):
            return self._union([el.value for el in e.elements])
        if isinstance(e, cst.Dict):
            return self._union([el.value for el in e.elements])
        if isinstance(e, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self._comprehension(e, e.elt)
        if isinstance(e, cst.DictComp):
            return self._comprehension(e, e.value)
        if isinstance(e, (cst.NamedExpr, cst.Await)):
            return self.leaves(e.value if isinstance(e, cst.NamedExpr) else e.expression)
        if isinstance(e, (cst.StarredElement, cst.Element, cst.Arg)):
            return self.leaves(e.value)
        return frozenset({Leaf(HOST, e, None, "of unknown origin")})

    def _union(self, exprs) -> frozenset:
        out: frozenset = frozenset()
        for x in exprs:
            out |= self.leaves(x)
        return out

    def _comprehension(self, comp, elt) -> frozenset:
        frame: dict = {}
        self._local.append(frame)
        try:
            f = comp.for_in
            while f is not None:
                src = frozenset() if isinstance(f.iter, cst.Call) and dotted(f.iter.func) == "range" \
                    else self.leaves(f.iter)
                for name in target_names(f.target):
                    frame[name] = src
                f = f.inner_for_in
            return self.leaves(elt)
        finally:
            self._local.pop()

    def _cpu_type(self, e: cst.BaseExpression) -> bool:
        """``torch.FloatTensor`` / ``"torch.LongTensor"``: ``x.type(...)`` of it lives on the CPU."""
        if isinstance(e, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return True
        q = self.facts.qualname(e) or ""
        return q.count(".") == 1 and q.startswith("torch.") and q.endswith("Tensor")

    def _call(self, call: cst.Call) -> frozenset:
        known = self.call_leaf(call)
        if known is not None:
            return known
        q = self.facts.qualname(call.func)
        d = dotted(call.func)
        if q is None and d in _SCALAR_BUILTINS:
            return frozenset()
        if q is None and d in _PASS_BUILTINS:
            return self._union([a.value for a in call.args])
        if q is None and d == "map" and len(call.args) == 2 and not any(a.star or a.keyword for a in call.args) \
                and _tensor_maker(self.facts.qualname(call.args[0].value)):
            return frozenset({Leaf(ORIGIN, call, None)})  # map(torch.LongTensor, zip(*batch)): made here
        if q in HOST_ARG_CALLS and call.args and not call.args[0].star:
            return self.leaves(call.args[0].value)
        if q is not None and q.startswith("torch.utils.data."):
            return frozenset({Leaf(HOST, call, None, f"comes from `{d or q}`")})
        if q is not None and q.startswith("torch."):
            last = q.rsplit(".", 1)[-1]
            if q.count(".") == 1 and last.endswith("Tensor"):  # torch.FloatTensor(data): a creation site
                if any(a.star or a.keyword for a in call.args):
                    return frozenset({Leaf(HOST, call, None, f"a CPU tensor type `{d}` with unpacked arguments")})
                return frozenset({Leaf(ORIGIN, call, None)})
            if q.count(".") == 1 and (last in DEVICE_LESS_FACTORIES or last in ("as_tensor", "from_numpy")) \
                    and factory_takes_device(last, call):
                if any(a.star for a in call.args) or call_arg(call, None, "generator") is not None \
                        or call_arg(call, None, "out") is not None:
                    return frozenset({Leaf(HOST, call, None, "a factory with a CPU `generator=`/`out=`")})
                return frozenset({Leaf(ORIGIN, call, None)})
            inputs = self._union([a.value for a in call.args])  # torch.cat, F.relu, ...: the inputs' place
            if not inputs and q.count(".") == 1 and last not in _TORCH_NO_TENSOR:
                return frozenset({Leaf(HOST, call, None, f"made by `{d}`")})  # torch.hann_window(n) ...
            return inputs
        if q is not None:
            return frozenset({Leaf(HOST, call, None, f"made by `{d or q}`")})
        if isinstance(call.func, cst.Attribute):
            meth = call.func.attr.value
            if meth in HOST_METHODS:
                return frozenset()
            if meth == "cpu":
                return frozenset({Leaf(HOST, call, None, "moved to the CPU")})
            if meth == "type" and call.args and self._cpu_type(call.args[0].value):
                return frozenset({Leaf(HOST, call, None, "converted to a CPU tensor type")})
            return self.leaves(call.func.value) | self._union([a.value for a in call.args])
        return frozenset({Leaf(HOST, call, None, f"made by `{d or 'a call'}`")})


def operands(e: cst.CSTNode) -> list:
    """The values an operation combines: a call's receiver and arguments, both sides of a
    binary operation or comparison, the target and value of ``x += v``, a subscript's value and
    its indices (a tensor indexed by a device tensor must be on the device too)."""
    if isinstance(e, cst.Call):
        recv = [e.func.value] if isinstance(e.func, cst.Attribute) else []
        return recv + [a.value for a in e.args]
    if isinstance(e, cst.BinaryOperation):
        return [e.left, e.right]
    if isinstance(e, cst.AugAssign):
        return [e.target, e.value]
    if isinstance(e, cst.Comparison):
        return [e.left, *(c.comparator for c in e.comparisons)]
    if isinstance(e, cst.Subscript):
        return [e.value, *(el.slice.value for el in e.slice if isinstance(el.slice, cst.Index))]
    return []


def passed_args(fn: cst.FunctionDef, name: str, bodies) -> Optional[list]:
    """``[(body, expr, element)]``: what each call ``fn(...)`` in ``bodies`` passes for parameter
    ``name`` (a call that leaves it to its default passes nothing): ``expr`` itself (``element``
    None), or element ``element`` of ``expr`` for ``fn(*expr)`` (one unpacked argument, after
    the plain positional ones); None when a call unpacks arguments in any other way."""
    p = fn.params
    positional = [x.name.value for x in (*p.posonly_params, *p.params)]
    pos = positional.index(name) if name in positional else None
    out = []
    for body in bodies:
        for n in nodes(body):
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == fn.name.value:
                stars = [i for i, a in enumerate(n.args) if a.star]
                if stars:
                    i = stars[0]
                    if len(stars) != 1 or n.args[i].star != "*" or any(a.keyword for a in n.args[:i]) or \
                            pos is None or any(a.keyword is None for a in n.args[i + 1:]):
                        return None
                    if pos >= i and call_arg(n, None, name) is None:
                        out.append((body, n.args[i].value, pos - i))
                        continue
                a = call_arg(n, pos, name)
                if a is not None:
                    out.append((body, a.value, None))
    return out


def returned_values(fn: cst.FunctionDef) -> list:
    """The expressions ``fn`` returns (nested functions and classes excluded)."""
    return [n.value for n in statements(fn.body) if isinstance(n, cst.Return) and n.value is not None]
