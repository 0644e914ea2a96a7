"""Checkpoint facts: which paths a file saves, from host or device values, and how loads are used.

Computed once per module (no torch import, purely syntactic):

* ``path_key(expr)``: a comparable key for a save/load path (a string literal's value or a
  dotted name), None when the path is not statically known.
* ``HostSaves(module)``: the keys of paths the file saves only from values that provably live
  on the host: ``x.cpu()``, ``x.detach().cpu()``, or a plain name that nothing in the file ever
  moves to a device (no ``name.cuda()`` / ``name.to(...)`` and not built by such a call).
  A path also saved from a possibly-placed value is not a host save.
* ``host_use(load_call, parents)``: the loaded value is used on the host right away
  (``torch.load(p).numpy()``, ``.tolist()``) or fed to ``load_state_dict(..., assign=True)``.
* ``HostSaves.buffer_host``: the file pickles into in-memory buffers (``torch.save(v, io.BytesIO())``)
  only values it moved to the host itself (``apply_to_collection(m, Tensor, lambda t: t.cpu())``);
  a load of in-memory bytes (``torch.load(io.BytesIO(data))``) in that file reads them back.
* ``package_data_path(expr, module)``: a path built from ``__file__`` (a file shipped inside the
  package, loaded by every user, CPU-only CI included: it holds host tensors).
* ``FileEvidence``: whole-file facts for loads: the file runs on XLA (``torch_xla``: checkpoints
  are written from host copies, ``xm.save``), a dataset module whose saves never place a value,
  a test file that writes checkpoints itself (``torch.save`` or a ``save_*`` helper), and the
  receivers that hold a ``GradScaler`` (its ``state_dict()`` holds Python numbers only).
"""
from __future__ import annotations

import re
from typing import Dict, Optional, Set

import libcst as cst
from libcst._batched_visitor import BatchableCSTVisitor

from devlint import lazyre
from devlint.facts import call_arg, dotted
from devlint.project import DATASET_NAMES, name_template, same_file
from devlint.syntax import bound_names, is_library_module, names_read
from devlint.analysis.usage import may_touch_device
from devlint.walk import children, nodes, visit_batched

BUFFER_KEY = "buffer:"  # the in-memory buffers a file pickles into and reads back
SAVERS = {"save"}  # torch.save / torch.jit.save / torch.serialization.save (attribute name)
PLACERS = {"cuda", "to", "to_device", "to_empty"}
HOST_USES = {"numpy", "tolist", "item"}


def _string(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.SimpleString):
        try:
            return str(expr.evaluated_value)
        except Exception:  # pragma: no cover - bytes or odd prefixes
            return None
    return None


def _is_bytes_io(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and (dotted(expr.func) or "").rsplit(".", 1)[-1] == "BytesIO"


def path_key(expr: cst.BaseExpression) -> Optional[str]:
    if _is_bytes_io(expr) and expr.args:
        return BUFFER_KEY  # `torch.load(io.BytesIO(data))`: in-memory bytes
    s = _string(expr)
    if s is not None:
        return "str:" + s
    d = dotted(expr)
    if d is None:
        return None
    if d.endswith(".name"):
        d = d[: -len(".name")]
    return "name:" + d


def _same_file_key(expr: cst.BaseExpression, module: cst.Module, opened: dict) -> Optional[str]:
    """What names the file a save writes or a load reads, for telling the two apart or alike:
    ``open(p, "rb")`` and ``with open(p, "wb") as f`` are ``p``; ``"{}.pkl".format(e)`` is its
    template; anything else its code."""
    if isinstance(expr, cst.Name) and expr.value in opened:
        expr = opened[expr.value]
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "open" and expr.args:
        expr = expr.args[0].value
    expr = _same_path(expr)
    if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format"
            and _string(expr.func.value) is not None):
        return "fmt:" + str(_string(expr.func.value))
    if isinstance(expr, cst.FormattedString):
        return "fstr:" + "{}".join(p.value for p in expr.parts if isinstance(p, cst.FormattedStringText))
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo) and _string(expr.left) is not None:
        return "pct:" + str(_string(expr.left))  # `'./ckpt/%s_net%d.pth' % (args.id, k)`: its template
    key = path_key(expr)
    return key if key is not None else "code:" + module.code_for_node(expr)


# spellings of the same path: `str(p)`, `os.fspath(p)`, `p.as_posix()`, `p.resolve()` name the file `p` does
_PATH_FUNCTIONS = frozenset({"str", "os.fspath", "os.path.abspath", "os.path.realpath", "os.path.normpath"})
_PATH_METHODS = frozenset({"as_posix", "resolve", "absolute", "expanduser"})


def _same_path(expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, cst.Call):
        f = expr.func
        if isinstance(f, cst.Attribute) and f.attr.value in _PATH_METHODS and not expr.args:
            expr = f.value
        elif dotted(f) in _PATH_FUNCTIONS and len(expr.args) == 1 and expr.args[0].keyword is None:
            expr = expr.args[0].value
        else:
            break
    return expr


def saved_earlier(load: cst.Call, root: cst.CSTNode, module: cst.Module, savers: frozenset = frozenset()) -> bool:
    """``torch.save(m, p)`` ... ``torch.load(p)`` in one function (or script body), the save
    first: the load reads back what the same run wrote, on the same machine (the best epoch
    reloaded after training), so its tensors are on a device this machine has. ``savers``: the
    project's saving functions and classes the file imports (``ProjectFacts.savers``); a call of
    one, or of an instance of one, handed a location the load's path is built from
    (``early_stopping(loss, model, path)`` ... ``torch.load(path + "/checkpoint.pth")``) saves
    that file in the same run too."""
    opened: dict = {}
    saves: set = set()
    arg = call_arg(load, 0, "f")
    if arg is None:
        return False
    helpers: Optional[dict] = None
    bound: dict = {}  # name -> the value last assigned to it on the way
    instances: set = set()  # names bound to an instance of a saving class
    handed: set = set()  # locations handed to saving calls on the way
    for n in nodes(root):
        if n is load:
            if handed:
                where = _locations(arg.value)
                if isinstance(arg.value, cst.Name) and arg.value.value in bound:
                    where |= _locations(bound[arg.value.value])
                if where & handed:
                    return True
            return _saved_as(_same_file_key(arg.value, module, opened), saves)
        if savers and isinstance(n, cst.Assign) and len(n.targets) == 1:
            target = dotted(n.targets[0].target)
            if target is not None:
                bound[target] = n.value
                if isinstance(n.value, cst.Call) and dotted(n.value.func) in savers:
                    instances.add(target)
                    handed |= {loc for a in n.value.args for loc in _locations(a.value)}
        if savers and isinstance(n, cst.Call):
            callee = dotted(n.func)
            if callee is not None and (callee in savers or callee in instances
                                       or callee.rpartition(".")[0] in instances):
                handed |= {loc for a in n.args for loc in _locations(a.value)}
        if isinstance(n, cst.WithItem) and isinstance(n.asname, cst.AsName) and isinstance(n.asname.name, cst.Name):
            if isinstance(n.item, cst.Call) and isinstance(n.item.func, cst.Name) and n.item.func.value == "open":
                opened[n.asname.name.value] = n.item
        elif isinstance(n, cst.Call) and _is_torch_save(n):
            tgt = call_arg(n, 1, "f")
            if tgt is not None:
                saves.add(_same_file_key(tgt.value, module, opened))
        elif isinstance(n, cst.FunctionDef):  # `def save_checkpoint(final):` in this scope
            if helpers is None:
                helpers = {st.name.value: st for st in module.body if isinstance(st, cst.FunctionDef)}
            helpers[n.name.value] = n
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Name):
            if helpers is None:  # the module's functions, by name
                helpers = {st.name.value: st for st in module.body if isinstance(st, cst.FunctionDef)}
            fn = helpers.get(n.func.value)
            if fn is not None and fn is not root:
                saves |= _global_saves(fn, module)  # `save_checkpoint(False)` writing the module's path
    return False


_PCT_FIELD = lazyre.compile(r"%[-+ #0]*\d*(?:\.\d+)?[sdifr]")


def _saved_as(key: Optional[str], saves: set) -> bool:
    """The load's file is one the saves write: the same key, or a ``%`` template of a save
    whose fields the load fills in (``'%s_net%d.pth' % (id, k)`` saved, ``'%s_net1.pth' % id``
    loaded: the file of net 1 the same run wrote)."""
    if key is None:
        return False
    if key in saves:
        return True
    if not key.startswith("pct:"):
        return False
    for s in saves:
        if s and s.startswith("pct:") and _PCT_FIELD.search(s):
            parts = _PCT_FIELD.split(s[4:])
            if re.fullmatch(".+?".join(re.escape(p) for p in parts), key[4:]):
                return True
    return False


def _locations(expr: cst.BaseExpression) -> set:
    """What a path expression is built from: its plain names and dotted attributes (``path``,
    ``args.save_dir``) and string values, not the functions it calls (``os.path.join``)."""
    out: set = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        d = dotted(e) if isinstance(e, (cst.Name, cst.Attribute)) else None
        if d is not None:
            out.add(d)
        elif isinstance(e, cst.Call):
            stack += [a.value for a in e.args]
        elif isinstance(e, cst.SimpleString):
            v = _string(e)
            if v and len(v) > 1 and ("." in v or "/" in v):  # a file or directory name, not a separator
                out.add(repr(v))
        else:
            stack += list(e.children)
    return out


def _global_saves(fn: cst.FunctionDef, module: cst.Module) -> set:
    """The files a module function saves to under a name of the module (``torch.save(state,
    checkpoint_path)`` with ``checkpoint_path`` bound at the top of the script), not one of its
    parameters or locals: the same path the script's own code names."""
    own = {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params, *fn.params.posonly_params)}
    for n in nodes(fn.body):
        if isinstance(n, cst.AssignTarget):
            own |= {x.value for x in nodes(n.target) if isinstance(x, cst.Name)}
    templates: dict = {}  # local name -> the path template it is bound to (`save_point = '%s_%d.pth' % ...`)
    for n in nodes(fn.body):
        if isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name):
            key = _same_file_key(n.value, module, {})
            name = n.targets[0].target.value
            templates[name] = key if key and key.startswith(("pct:", "fmt:", "fstr:")) and name not in templates else None
    out: set = set()
    opened: dict = {}  # `with open(os.path.join(args.work_dir, 'model.pt'), 'wb') as f`: f names that file (so far)
    for n in nodes(fn.body):
        if (isinstance(n, cst.WithItem) and isinstance(n.asname, cst.AsName) and isinstance(n.asname.name, cst.Name)
                and isinstance(n.item, cst.Call) and isinstance(n.item.func, cst.Name) and n.item.func.value == "open"):
            opened[n.asname.name.value] = n.item
        if isinstance(n, cst.Call) and _is_torch_save(n):
            tgt = call_arg(n, 1, "f")
            if tgt is None:
                continue
            if isinstance(tgt.value, cst.Name) and templates.get(tgt.value.value):
                out.add(templates[tgt.value.value])  # the script's own file name pattern, filled locally
                continue
            where = tgt.value
            if isinstance(where, cst.Name) and where.value in opened and opened[where.value].args:
                where = opened[where.value].args[0].value  # the file the handle was opened on
            names = {x.value for x in nodes(where) if isinstance(x, cst.Name)}
            if names and not names & own:
                out.add(_same_file_key(where, module, {}))
    return out


def cache_written_beside(load: cst.Call, root: cst.CSTNode, module: cst.Module) -> bool:
    """The cache idiom: ``if os.path.exists(p): x = torch.load(p)`` whose ``else`` builds the
    value and saves it to ``p`` (or ``if not os.path.exists(p): ... torch.save(v, p)``
    before the load), building and saving on the host (nothing in that branch places a value
    before the save, or the save moves it off the device itself): the file holds what this
    code writes, host data."""
    arg = call_arg(load, 0, "f")
    if arg is None:
        return False
    want = module.code_for_node(arg.value)
    for block in _blocks(root):
        stmts = list(block.body) if isinstance(block, (cst.IndentedBlock, cst.Module)) else []
        for i, st in enumerate(stmts):
            if not isinstance(st, cst.If):
                continue
            pol = _exists_test(st.test, want, module)
            if pol == 0:
                continue
            branches = (st.body, st.orelse.body if isinstance(st.orelse, cst.Else) else None)
            loading, saving = branches if pol > 0 else (None, branches[0])
            if pol < 0:  # `if not exists(p): build; save` and the load after it
                later = stmts[i + 1:]
                if not any(n is load for s2 in later for n in nodes(s2)):
                    continue
            elif not any(n is load for n in nodes(loading)):
                continue
            if saving is not None and _saves_host(saving, want, module):
                return True
    return False


def _blocks(root: cst.CSTNode):
    yield root if isinstance(root, cst.Module) else getattr(root, "body", root)
    for n in nodes(root):
        if isinstance(n, cst.IndentedBlock):
            yield n


def _exists_test(test: cst.BaseExpression, path: str, module: cst.Module) -> int:
    """+1 for ``os.path.exists(path)`` (``isfile``, ``Path(path).exists()``), -1 for its ``not``."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -_exists_test(test.expression, path, module)
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return 1 if _exists_test(test.left, path, module) == 1 or _exists_test(test.right, path, module) == 1 else 0
    if not isinstance(test, cst.Call) or not isinstance(test.func, cst.Attribute):
        return 0
    name = test.func.attr.value
    if name in ("exists", "isfile") and test.args and module.code_for_node(test.args[0].value) == path:
        return 1
    inner = test.func.value
    if name in ("exists", "is_file") and not test.args and isinstance(inner, cst.Call) and inner.args \
            and module.code_for_node(inner.args[0].value) == path:
        return 1
    return 0


def _saves_host(block: cst.BaseSuite, path: str, module: cst.Module) -> bool:
    for n in nodes(block):
        if isinstance(n, cst.Call) and _is_torch_save(n):
            tgt, obj = call_arg(n, 1, "f"), call_arg(n, 0, "obj")
            if tgt is None or obj is None or module.code_for_node(tgt.value) != path:
                continue
            v = obj.value
            if _is_cpu_call(v) or (isinstance(v, cst.Dict) and v.elements and all(
                    isinstance(e, cst.DictElement) and _is_cpu_call(e.value) for e in v.elements)):
                return True
            # built in the branch, with nothing placed before the save
            before = []
            for st in block.body:
                if any(m is n for m in nodes(st)):
                    break
                before.append(st)
            built = {name for st in before for a in nodes(st) if isinstance(a, (cst.Assign, cst.AnnAssign))
                     for t in (a.targets if isinstance(a, cst.Assign) else [a])
                     for name in (*bound_names(t.target), dotted(t.target)) if name}
            known = built | {"torch", "dict", "list", "tuple"}
            # (`self.mean` assigned in the branch is built there as a name is)
            return bool(before) and all(r in known or r.split(".")[0] in known for r in _dotted_reads(v)) \
                and not any(_contains_placer(st) for st in before)
    return False


def _dotted_reads(expr: cst.BaseExpression) -> set:
    """The names and attribute chains ``expr`` reads (``self.mean``, ``torch``), outermost first."""
    out: set = set()
    stack = [expr]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.Name, cst.Attribute)):
            d = dotted(n)
            if d is not None:
                out.add(d)
                continue
        if isinstance(n, cst.Call):  # a call's function: only its root is a read (`torch.mean`)
            d = dotted(n.func)
            if d is not None:
                out.add(d.split(".")[0])
                stack.extend(a.value for a in n.args)
                continue
        stack.extend(children(n, trivia=False))
    return out


def _is_torch_save(call: cst.Call) -> bool:
    d = dotted(call.func)
    return d in ("torch.save", "torch.jit.save", "torch.serialization.save", "jit.save")


_FACTORIES = {"zeros", "ones", "randn", "rand", "randint", "arange", "linspace", "tensor", "empty", "full",
              "from_numpy", "as_tensor", "eye"}


def _is_cpu_call(expr: cst.BaseExpression) -> bool:
    """``x.cpu()``, or the state of a host copy: ``net.cpu().state_dict()``."""
    if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "state_dict" and not expr.args):
        expr = expr.func.value
    return (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "cpu" and not expr.args)


def _host_call(expr: cst.Call) -> bool:
    """A call that builds a host value: ``x.cpu()``, ``Net()``, ``torch.zeros(...)`` without ``device=``."""
    f = expr.func
    if isinstance(f, cst.Attribute) and f.attr.value == "cpu" and not expr.args:
        return True
    if _maps_to_host(expr):
        return True
    if any(a.keyword is not None and a.keyword.value == "device" for a in expr.args):
        return False
    d = dotted(f) or ""
    last = d.rsplit(".", 1)[-1]
    if d.startswith("torch.") and last in _FACTORIES:
        return True
    return bool(last) and last[:1].isupper() and not _contains_placer(expr)


def _maps_to_host(expr: cst.Call) -> bool:
    """``apply_to_collection(m, Tensor, lambda t: t.cpu())`` / ``tree_map(lambda t: t.cpu(), m)``:
    every tensor of the collection is replaced by its host copy."""
    return any(isinstance(a.value, cst.Lambda) and _is_cpu_call(a.value.body) for a in expr.args)


def _host_value(expr: cst.BaseExpression, placed: Set[str], binds: Optional[Dict[str, list]] = None) -> bool:
    """True when ``expr`` provably holds host tensors: built on the host in this file, never placed."""
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "state_dict" and not expr.args:
            return _host_value(expr.func.value, placed, binds)
        return _host_call(expr)
    if isinstance(expr, (cst.Tuple, cst.List)):
        return bool(expr.elements) and all(_host_value(e.value, placed, binds) for e in expr.elements)
    if isinstance(expr, cst.Name):
        values = (binds or {}).get(expr.value)
        return (expr.value not in placed and bool(values)
                and all(isinstance(v, cst.Call) and _host_call(v) for v in values))
    return False


DATASET_BASES = DATASET_NAMES


def is_dataset_class(cls: Optional[cst.ClassDef], project=None) -> bool:
    """A dataset (or data module) class: what it caches with torch.save/torch.load is host data.
    ``project`` (devlint.project): a base that is the project's own dataset class, in another file,
    makes one too."""
    if cls is None:
        return False
    for b in cls.bases:
        d = dotted(b.value) or ""
        if d.rsplit(".", 1)[-1].endswith(DATASET_BASES) or (project is not None and d in project.dataset_bases):
            return True
    return False


_SAVE_HELPER = lazyre.compile(r"(^|_)save(_|$)|^save")


class _Scan(BatchableCSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.placed: Set[str] = set()
        self.saves: Dict[str, list] = {}
        self.unknown_saves: list = []  # saves to a computed path
        self.binds: Dict[tuple, list] = {}  # (scope, name) -> every value assigned to it (None: unknown)
        self.buffers: Set[str] = set()  # names bound to `io.BytesIO()`
        self.save_helpers = False  # a call of a `save_*` helper (`save_fsdp_model(...)`, `m.save_pretrained(...)`)
        self.functions: list = []  # enclosing FunctionDefs
        self.saving_functions: list = []  # the function (or None: module level) of every torch.save
        self.xla = False  # the file imports torch_xla
        self.scaler_receivers: Set[str] = set()  # dotted targets assigned a GradScaler
        self.stored: Dict[tuple, list] = {}  # (scope, name) -> values appended/stored into it (None: unknown)

    def _scope(self):
        return id(self.functions[-1]) if self.functions else None

    def scoped_binds(self, scope) -> Dict[str, list]:
        """The names visible in ``scope``: its own bindings over the module's."""
        out = {n: v for (sc, n), v in self.binds.items() if sc is None}
        out.update({n: v for (sc, n), v in self.binds.items() if sc == scope and scope is not None})
        return out

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.pop()

    def visit_Import(self, node: cst.Import) -> None:
        if any((dotted(a.name) or "").split(".")[0] == "torch_xla" for a in node.names):
            self.xla = True

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None and (dotted(node.module) or "").split(".")[0] == "torch_xla":
            self.xla = True

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value in PLACERS:
            d = dotted(f.value)
            if d is not None:
                self.placed.add(d.split(".")[0])
        last = (dotted(f) or "").rsplit(".", 1)[-1]
        if last and not _is_torch_save(node) and _SAVE_HELPER.search(last):
            self.save_helpers = True
        if _is_torch_save(node):
            self.saving_functions.append(self.functions[0] if self.functions else None)
            obj = call_arg(node, 0, "obj")
            tgt = call_arg(node, 1, "f")
            if obj is not None and tgt is not None and isinstance(tgt.value, cst.Name) \
                    and tgt.value.value in self.buffers:
                self.saves.setdefault(BUFFER_KEY, []).append((obj.value, self._scope()))
            elif obj is not None and tgt is not None:
                key = path_key(tgt.value)
                if key is not None:
                    self.saves.setdefault(key, []).append((obj.value, self._scope()))
                else:
                    self.unknown_saves.append(obj.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Call):
            callee = (dotted(node.value.func) or "").rsplit(".", 1)[-1]
            if callee == "BytesIO" and not node.value.args:
                self.buffers |= {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
            if "GradScaler" in callee or "grad_scaler" in callee:
                self.scaler_receivers |= {d for t in node.targets if (d := dotted(t.target)) is not None}
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.binds.setdefault((self._scope(), t.target.value), []).append(node.value)
            else:  # tuple unpacking etc.: the name's value is not known
                for n in bound_names(t.target):
                    self.binds.setdefault((self._scope(), n), []).append(None)
        # ``net = Net().cuda()`` / ``x = batch.to(device)``: the targets are placed values
        placed = _contains_placer(node.value)
        if placed:
            for t in node.targets:
                d = dotted(t.target)
                if d is not None:
                    self.placed.add(d.split(".")[0])
        for t in node.targets:  # `weights[k] = v`: what a collection holds
            if isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Name):
                self.stored.setdefault((self._scope(), t.target.value.value), []).append(node.value)

    def visit_Expr(self, node: cst.Expr) -> None:
        c = node.value  # `weights.append(v)`: what a collection holds
        if isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute) and isinstance(c.func.value, cst.Name) \
                and c.func.attr.value in ("append", "extend", "update", "insert"):
            key = (self._scope(), c.func.value.value)
            arg = c.args[-1].value if c.args else None
            self.stored.setdefault(key, []).append(arg if c.func.attr.value == "append" else None)

    def explicit_host(self, obj: cst.BaseExpression, scope) -> bool:
        """The saving code itself moved the value off the device: ``x.cpu()``, ``x.to("cpu").half()``,
        a dict of those, or a list/dict built empty and filled only with them."""
        if _host_copy(obj):
            return True
        if isinstance(obj, cst.Dict):
            return bool(obj.elements) and all(isinstance(e, cst.DictElement) and _host_copy(e.value)
                                              for e in obj.elements)
        if not isinstance(obj, cst.Name):
            return False
        binds = self.scoped_binds(scope).get(obj.value)
        stored = self.stored.get((scope, obj.value)) or self.stored.get((None, obj.value))
        return bool(binds) and bool(stored) and all(_empty_collection(b) for b in binds) \
            and all(v is not None and _host_copy(v) for v in stored)


_KEEPS_PLACE = frozenset({"detach", "clone", "contiguous", "half", "float", "double", "bfloat16", "numpy",
                          "tolist", "item", "to"})


def _host_copy(expr: cst.BaseExpression) -> bool:
    """``x.cpu()``, ``x.to("cpu")``, ``x.detach().cpu().half()``, ``net.cpu().state_dict()``:
    a chain that goes through a move to the host (dtype casts after it keep it there)."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        name = expr.func.attr.value
        if name == "cpu" and not expr.args:
            return True
        if name == "to" and expr.args and _is_cpu_device(expr.args[0].value):
            return True
        if name not in _KEEPS_PLACE and name != "state_dict":
            return False
        expr = expr.func.value
    return False


def _is_cpu_device(e: cst.BaseExpression) -> bool:
    if isinstance(e, cst.SimpleString):
        return e.evaluated_value == "cpu"
    return (isinstance(e, cst.Call) and (dotted(e.func) or "").endswith("device") and bool(e.args)
            and isinstance(e.args[0].value, cst.SimpleString) and e.args[0].value.evaluated_value == "cpu")


def _empty_collection(e) -> bool:
    if isinstance(e, (cst.List, cst.Dict, cst.Tuple)):
        return not e.elements
    return isinstance(e, cst.Call) and not e.args and dotted(e.func) in ("list", "dict", "OrderedDict",
                                                                          "collections.OrderedDict")


def _contains_placer(expr: cst.BaseExpression) -> bool:
    for n in nodes(expr, into_scopes=True):
        if isinstance(n, cst.Call):
            f = n.func
            if isinstance(f, cst.Attribute) and f.attr.value in PLACERS:
                return True
            if any(a.keyword is not None and a.keyword.value == "device" for a in n.args):
                return True
    return False


class HostSaves:
    """Paths this module saves only from host values."""

    def __init__(self, module: cst.Module) -> None:
        scan = _Scan()
        visit_batched(module, [scan])  # the fast walker; the same callbacks as module.visit
        # a literal path written only from host values; a computed path (a name: which file
        # it holds at load time is unknown) only when every save moves the value off the device
        # explicitly (`torch.save(x.cpu(), p)`), the author's own statement that it is a host cache
        self.keys: Set[str] = {
            k for k, objs in scan.saves.items()
            if objs and all(_host_value(o, scan.placed, scan.scoped_binds(sc)) or scan.explicit_host(o, sc)
                            for o, sc in objs)
            and (k.startswith("str:") or k == BUFFER_KEY or all(scan.explicit_host(o, sc) for o, sc in objs))
        }

        self.saves_any = bool(scan.saves) or bool(scan.unknown_saves)
        # every torch.save of the file moves what it saves to the host itself (`w.cpu()`, a list
        # filled with host copies): the file's convention for what it writes, and so reads
        self.all_explicit = bool(scan.saves) and not scan.unknown_saves and all(
            scan.explicit_host(o, sc) for objs in scan.saves.values() for o, sc in objs)
        # a test that writes checkpoints itself (torch.save or a `save_*` helper) reads back what it wrote
        self.writes_any = self.saves_any or scan.save_helpers
        self.xla = scan.xla
        self.scaler_receivers = scan.scaler_receivers
        # every torch.save of the file sits in a function that never places a value
        self.saves_unplaced = bool(scan.saving_functions) and all(
            fn is not None and not _contains_placer(fn) for fn in scan.saving_functions)

    def holds_host(self, path: cst.BaseExpression) -> bool:
        key = path_key(path)
        return key is not None and key in self.keys


def file_name(expr: cst.BaseExpression) -> Optional[str]:
    """The file name a load path ends in when the code spells it: ``"m.pt"``,
    ``os.path.join(d, "m.pt")``, ``d + "/m.pt"``, ``out_dir / "m.pt"`` (the project index names
    saves the same way)."""
    s = _string(expr)
    if s is not None:
        return s.replace("\\", "/").rsplit("/", 1)[-1] or None
    if isinstance(expr, cst.Call) and expr.args and (dotted(expr.func) or "").endswith("join"):
        return file_name(expr.args[-1].value)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return file_name(expr.right)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide) and _string(expr.right) is not None:
        return file_name(expr.right)  # a pathlib join: only a string on the right of `/` is one
    # formatted names, as templates with `*` fields (the project index spells saves the same way)
    if (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format"
            and _string(expr.func.value) is not None):
        return name_template(_string(expr.func.value), "format")
    if (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo)
            and _string(expr.left) is not None):
        return name_template(_string(expr.left), "percent")
    if isinstance(expr, cst.FormattedString) and expr.parts and isinstance(expr.parts[-1], cst.FormattedStringText):
        return name_template("".join(part.value if isinstance(part, cst.FormattedStringText) else "*"
                                     for part in expr.parts), "fstring")
    return None


# torch.hub's file names end in the first hex digits of the file's SHA-256
# (``resnet152-b121ed2d.pth``): a model-zoo download, published from host tensors to load anywhere
_HUB_FILE = lazyre.compile(r"^[\w.]+-[0-9a-f]{8,}\.(?:pth|pt)$")


def zoo_file(path: cst.BaseExpression, module: cst.Module, project) -> bool:
    """The load reads a torch.hub model-zoo file: its name, spelled here, in a module-level
    constant of the file, or in a constant of the project module it is imported from
    (``ProjectFacts.checkpoint_paths``), has the hub's hash suffix."""
    name = file_name(path)
    if name is None and isinstance(path, cst.Name):
        for st in module.body:
            if isinstance(st, cst.SimpleStatementLine):
                for small in st.body:
                    if (isinstance(small, cst.Assign) and len(small.targets) == 1
                            and isinstance(small.targets[0].target, cst.Name)
                            and small.targets[0].target.value == path.value):
                        name = file_name(small.value)
        if name is None and project:
            prefix = path.value + "="
            name = next((p[len(prefix):] for p in project.checkpoint_paths if p.startswith(prefix)), None)
    return name is not None and _HUB_FILE.match(name) is not None


def bound_file_name(path: cst.BaseExpression, fn: Optional[cst.FunctionDef],
                    load: Optional[cst.CSTNode] = None) -> Optional[str]:
    """The file a load path spelled as a name stands for, as the enclosing function says: its
    parameter's default (``checkpoint_path: Path = Path("checkpoints/model.pth")``) and every
    assignment of the name in the function, each before the load (``load``), all name the same
    file. A parameter the caller may pass is bound in the body only in its stead: directly in
    the body, or under ``if not p:`` / ``if p is None:`` (``if not p: p = Path(f"{d}/lit-llama.pth")``)."""
    while isinstance(path, cst.Call) and len(path.args) == 1 and (dotted(path.func) or "") in _PATH_WRAPPERS:
        path = path.args[0].value
    if not isinstance(path, cst.Name) or fn is None:
        return None
    name = path.value
    params = [p for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)
              if p.name.value == name]
    values = [p.default for p in params if p.default is not None]
    passed = bool(params) and not any(p.default is not None and not (isinstance(p.default, cst.Name)
                                                                     and p.default.value == "None") for p in params)
    allowed = {id(s) for s in _in_stead_of(fn, name)} if passed else None
    for n in nodes(fn):
        if n is load:
            break  # (only what binds the name before the load)
        if isinstance(n, cst.Assign) and any(name in bound_names(t.target) for t in n.targets):
            if not any(isinstance(t.target, cst.Name) and t.target.value == name for t in n.targets):
                return None  # `a, p = ...`: unknown
            if allowed is not None and id(n) not in allowed:
                return None  # a caller's path, replaced only on some other condition
            values.append(n.value)
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)) and isinstance(
                n.target, cst.Name) and n.target.value == name:
            return None
    else:
        if load is not None:
            return None  # (the load is not in this function)
    if passed and len(values) == 0:
        return None
    names = set()
    for v in values:
        if isinstance(v, cst.Name) and v.value == "None":
            continue
        while isinstance(v, cst.Call) and len(v.args) == 1 and (dotted(v.func) or "") in _PATH_WRAPPERS:
            v = v.args[0].value
        got = file_name(v)
        if got is None:
            return None
        names.add(got)
    return names.pop() if len(names) == 1 else None


def _in_stead_of(fn: cst.FunctionDef, name: str) -> list:
    """The assignments of ``fn``'s body that stand in for the parameter ``name``: statements of
    the body itself, or of an ``if not name:`` / ``if name is None:`` block in it."""
    out = []

    def smalls(block) -> list:
        return [small for st in getattr(block, "body", ()) if isinstance(st, cst.SimpleStatementLine)
                for small in st.body if isinstance(small, cst.Assign)]

    for st in fn.body.body:
        if isinstance(st, cst.SimpleStatementLine):
            out += [small for small in st.body if isinstance(small, cst.Assign)]
        elif isinstance(st, cst.If) and st.orelse is None and _tests_missing(st.test, name):
            out += smalls(st.body)
    return out


def _tests_missing(test: cst.BaseExpression, name: str) -> bool:
    """``not name`` or ``name is None``."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return isinstance(test.expression, cst.Name) and test.expression.value == name
    return (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == name
            and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Is)
            and isinstance(test.comparisons[0].comparator, cst.Name) and test.comparisons[0].comparator.value == "None")


_PATH_WRAPPERS = frozenset({"str", "os.fspath", "Path", "pathlib.Path"})


def project_holds_host(path: cst.BaseExpression, project, fn: Optional[cst.FunctionDef] = None,
                       load: Optional[cst.CSTNode] = None) -> bool:
    """What the rest of the project says about the loaded file (devlint.project): saved
    under this name only from host data, or, for a path the code does not spell or a name no
    save of the project writes (a file a command line named), every checkpoint the program
    saves holds host data. A path held in a name is the file the enclosing function
    (``fn``) binds it to, where it says (:func:`bound_file_name`)."""
    if not project:
        return False
    name = file_name(path) or bound_file_name(path, fn, load)
    if name is not None:
        gpu = any(same_file(name, n) for n in project.gpu_files)
        if gpu or any(same_file(name, n) for n in project.host_files):
            return not gpu
        if any(same_file(name, n) for n in project.host_blobs):
            return True  # shipped in the tree, every storage of every copy on the CPU
    return project.host_program


def package_data_path(expr: cst.BaseExpression, module: cst.Module) -> bool:
    """``expr`` names a file shipped inside the package: built from ``__file__``, directly or
    through a module-level constant (``_PATH = Path(__file__).parent / "weights.pt"``),
    possibly wrapped in ``str(...)`` / ``os.fspath(...)``."""
    while isinstance(expr, cst.Call) and len(expr.args) == 1 and (dotted(expr.func) or "") in (
            "str", "os.fspath", "Path", "pathlib.Path"):
        expr = expr.args[0].value
    if _mentions_file(expr):
        return True
    if isinstance(expr, cst.Name):
        for s in module.body:
            if isinstance(s, cst.SimpleStatementLine):
                for small in s.body:
                    if isinstance(small, cst.Assign) and any(
                            isinstance(t.target, cst.Name) and t.target.value == expr.value for t in small.targets):
                        return _mentions_file(small.value)
    return False


def _mentions_file(expr: cst.BaseExpression) -> bool:
    return any(isinstance(n, cst.Name) and n.value == "__file__" for n in nodes(expr, into_scopes=True))


def is_dataset_module(module: cst.Module) -> bool:
    """The module defines a dataset class at top level (what its own functions cache is host data)."""
    return any(isinstance(s, cst.ClassDef) and is_dataset_class(s) for s in module.body)


def host_used_load(node: cst.CSTNode) -> Optional[cst.Call]:
    """The call whose value ``node`` consumes on the host, if any.

    ``torch.load(p).numpy()`` (node: the ``.numpy`` attribute) or
    ``m.load_state_dict(torch.load(p), assign=True)`` (node: the outer call): the loaded tensors
    are used where they were materialised, so the only map_location that cannot break them is
    ``"cpu"``.
    """
    if isinstance(node, cst.Attribute) and node.attr.value in HOST_USES and isinstance(node.value, cst.Call):
        return node.value
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "load_state_dict"):
        assign = call_arg(node, None, "assign")
        first = call_arg(node, 0, "state_dict")
        if (assign is not None and isinstance(assign.value, cst.Name) and assign.value.value == "True"
                and first is not None and isinstance(first.value, cst.Call)):
            return first.value
    return None


# tensor methods that keep a tensor where it is (a view, a copy, a cast of its dtype)
_SAME_DEVICE = frozenset({"transpose", "permute", "view", "reshape", "squeeze", "unsqueeze", "flatten", "t",
                          "contiguous", "detach", "clone", "float", "double", "half", "long", "int", "bool"})


def numpy_of_load(node: cst.Attribute) -> Optional[cst.Call]:
    """The load whose own tensor ``node`` (a ``.numpy`` attribute) turns into an array through
    indexing and device-keeping tensor methods only: ``torch.load(p)[0].transpose(-1, -2).numpy()``.
    ``.numpy()`` raises on a CUDA tensor, so the file holds host tensors. (Not through ``.cpu()``
    or ``.to(...)``: those accept a CUDA tensor.)"""
    if node.attr.value != "numpy":
        return None
    v = node.value
    while True:
        if type(v) is cst.Subscript:
            v = v.value
        elif type(v) is cst.Call and type(v.func) is cst.Attribute and v.func.attr.value in _SAME_DEVICE:
            v = v.func.value
        elif type(v) is cst.Call:
            return v
        else:
            return None


def values_read_as_numpy(load: cst.Call, root: cst.CSTNode) -> bool:
    """``sd = torch.load(p)`` then ``for k, v in sd.items(): jt.Var(v.numpy())`` (or
    ``sd[name].numpy()``, ``[np.array(k) for k in sd]``): ``.numpy()`` and ``np.array`` raise
    on a CUDA tensor on every machine, so code that turns the loaded values into arrays works
    only with a file of host tensors, and such a file loads without ``map_location`` anywhere.
    (The conversion is looked for inside the loop that binds the value.)"""
    name = None
    for n in nodes(root):
        if (isinstance(n, cst.Assign) and n.value is load and len(n.targets) == 1
                and isinstance(n.targets[0].target, cst.Name)):
            name = n.targets[0].target.value
            break
    if name is None:
        return False
    for n in nodes(root):
        if isinstance(n, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            item = _loop_item(n.for_in, name)
            if item is not None and _converts(n.elt, item, name):
                return True  # `[np.array(k) for k in grads]`: the loaded list's elements
        elif isinstance(n, cst.For):
            item = _loop_item(n, name)
            if item is not None and _converts(n.body, item, name):
                return True  # `for k, v in sd.items(): jt.Var(v.numpy())`
        elif isinstance(n, cst.Call) and _converts(n, None, name) and _conversion_of(n) is not None:
            return True  # `sd[name].numpy()`
    return False


def _loop_item(loop, name: str) -> Optional[str]:
    """The loop name bound to each loaded value: ``for k in sd``, ``for v in sd.values()``,
    ``for k, v in sd.items()``."""
    it, target = loop.iter, loop.target
    if isinstance(it, cst.Name) and it.value == name and isinstance(target, cst.Name):
        return target.value
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) \
            and isinstance(it.func.value, cst.Name) and it.func.value.value == name:
        meth = it.func.attr.value
        if meth == "values" and isinstance(target, cst.Name):
            return target.value
        if meth == "items" and isinstance(target, cst.Tuple) and len(target.elements) == 2 \
                and isinstance(target.elements[1].value, cst.Name):
            return target.elements[1].value.value
    return None


def _conversion_of(call: cst.Call) -> Optional[cst.BaseExpression]:
    """What ``call`` turns into a NumPy array: ``v.numpy()``, ``np.array(v)``."""
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "numpy":
        return call.func.value
    if dotted(call.func) in _TO_ARRAY and call.args and call.args[0].keyword is None:
        return call.args[0].value  # `np.array(k)` raises on a CUDA tensor as `.numpy()` does
    return None


def _indexed_root(e: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """What ``e`` indexes, through views and casts that keep a tensor where it is:
    ``x[k].view(n, -1)[:, :m]`` -> ``x``; None unless at least one index is taken (a name alone
    may have been rebound to anything since the load)."""
    indexed = False
    while True:
        if type(e) is cst.Subscript:
            indexed, e = True, e.value
        elif type(e) is cst.Call and type(e.func) is cst.Attribute and e.func.attr.value in _SAME_DEVICE:
            e = e.func.value
        else:
            return e if indexed else None


def _converts(within: cst.CSTNode, item: Optional[str], name: str) -> bool:
    """A conversion to an array inside ``within`` of the loop name ``item``, or of ``name[...]``
    (through views: ``name[k].view(n, -1)[:, :m].numpy()``)."""
    for n in nodes(within):
        v = _conversion_of(n) if isinstance(n, cst.Call) else None
        if v is None:
            continue
        if item is not None and isinstance(v, cst.Name) and v.value == item:
            return True
        root = _indexed_root(v)
        if isinstance(root, cst.Name) and root.value == name:
            return True
    return False


def attribute_read_as_numpy(load: cst.Call, cls: Optional[cst.ClassDef]) -> bool:
    """``self.log = torch.load(p)`` in a class whose methods read ``self.log[:, i].numpy()``,
    and which never binds ``self.log`` to anything it places (``.cuda()``, ``.to(...)``, a
    ``device=``): ``.numpy()`` raises on a CUDA tensor, so the class works only with a file of
    host tensors, and such a file loads without ``map_location`` anywhere."""
    if cls is None:
        return False
    attr = None
    binds = []
    for n in nodes(cls, into_scopes=True):
        if isinstance(n, cst.Assign):
            for t in n.targets:
                tg = t.target
                if (isinstance(tg, cst.Attribute) and isinstance(tg.value, cst.Name) and tg.value.value == "self"):
                    binds.append((tg.attr.value, n.value))
                    if n.value is load:
                        attr = tg.attr.value
    if attr is None or any(a == attr and v is not load and _contains_placer(v) for a, v in binds):
        return False
    for n in nodes(cls, into_scopes=True):
        v = _conversion_of(n) if isinstance(n, cst.Call) else None
        root = _indexed_root(v) if v is not None else None
        if (isinstance(root, cst.Attribute) and root.attr.value == attr and isinstance(root.value, cst.Name)
                and root.value.value == "self"):
            return True
    return False


_TO_ARRAY = frozenset({"np.array", "np.asarray", "numpy.array", "numpy.asarray"})


def host_script(facts, module: cst.Module, filename: str) -> bool:
    """A script (it runs work at its top or under ``__main__``, and no project module imports it,
    ``devlint.project``) that never names a device, ``.cuda``, ``.to(`` or a launcher: nothing
    moves its modules or tensors, so they run where they are built, on the host (DL006, DL009)."""
    return (not may_touch_device(facts.source) and not is_library_module(module)
            and not is_test_file(filename) and not facts.project.imported)


def is_test_file(filename: str) -> bool:
    name = filename.replace("\\", "/").rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def is_test_module(filename: str, module: cst.Module) -> bool:
    """A test file by its name that is part of a test suite: it sits in a ``tests`` folder,
    holds a ``test_*`` function or ``Test*`` class, or imports pytest / unittest
    (``test_image.py`` beside ``train.py`` in a research repository is an evaluation script)."""
    if not is_test_file(filename):
        return False
    if any(part in ("tests", "test", "testing") for part in filename.replace("\\", "/").split("/")[:-1]):
        return True
    for stmt in module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.name.value.lower().startswith("test"):
            return True
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                mod = (dotted(s.module) if isinstance(s, cst.ImportFrom) and s.module is not None else
                       " ".join(dotted(a.name) or "" for a in s.names) if isinstance(s, cst.Import) else "")
                if mod and any(m.split(".")[0] in ("pytest", "unittest") for m in mod.split()):
                    return True
    return filename.replace("\\", "/").rsplit("/", 1)[-1] == "conftest.py"


def only_into_scaler(load: cst.Call, root: cst.CSTNode, receivers: Set[str]) -> bool:
    """The loaded object only goes into ``<scaler>.load_state_dict(...)`` where ``<scaler>`` is
    assigned a ``GradScaler`` in this file: a scaler's ``state_dict()`` holds Python numbers
    (``get_scale()``, ``_get_growth_tracker()``), no tensor a ``map_location`` could map."""
    if not receivers or root is None:
        return False
    from devlint.analysis.usage import usage_of

    use = usage_of(root)

    def into_scaler(node: cst.CSTNode) -> bool:
        arg = use.parent.get(node)
        call = use.parent.get(arg)
        return (isinstance(arg, cst.Arg) and arg.keyword is None and isinstance(call, cst.Call)
                and isinstance(call.func, cst.Attribute) and call.func.attr.value == "load_state_dict"
                and dotted(call.func.value) in receivers)

    if into_scaler(load):
        return True
    bound = use.bound_name(load)
    if bound is None:
        return False
    uses = use.loads.get(bound[0], [])
    return bool(uses) and all(into_scaler(u) for u in uses)
