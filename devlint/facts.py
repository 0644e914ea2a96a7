"""Per-file facts, computed once and read by every rule.

Two parts, both cheap:

* :func:`prescan` walks *statements only* (never descending into expressions
  except the value of an assignment) and records torch import aliases, which
  classes are ``nn.Module`` subclasses, tensor-vs-Module evidence for names and
  attributes, availability-guard flags, device variables and every bound name.
* :class:`ContextTracker` runs first in the single rule traversal and keeps the
  live context rules ask about at each node: enclosing functions, classes and
  loops, and whether an availability guard dominates the node.

What a value is (tensor, Parameter, Module, ...) is :mod:`devlint.analysis.values`:
the prescan feeds it assignment evidence, then it reads usage evidence
(``loss.backward()`` says tensor, ``model.parameters()`` says Module) from the whole
file and freezes, before any rule runs.

LibCST's ``QualifiedNameProvider``/``ScopeProvider`` would answer some of these
questions more generally, but each costs 2-4x a parse per file; this module
answers exactly what the rules need at a fraction of that.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field
from typing import Iterator, Optional

import libcst as cst
from libcst._batched_visitor import BatchableCSTVisitor

from devlint import lazyre
from devlint.analysis import guards
from devlint.analysis.guards import ends_with_exit  # noqa: F401 - re-exported
from devlint.analysis.usage import params_moved_first
from devlint.analysis.values import (  # noqa: F401 (re-exported: rules import them from here)
    CONTAINER, CONVERSIONS, DEVICE, DEVICE_LESS_FACTORIES, DTYPE, FACTORIES, MODULE, MODULE_ONLY_USE,
    NON_MODULE_NN, PARAM, TENSOR, TENSOR_DATASET, TENSOR_FUNCS, TENSOR_LOADER, TENSOR_METHODS, TENSOR_ONLY_USE, ValueModel,
    annotation_kind, is_module_base,
)
from devlint.syntax import (  # noqa: F401 - re-exported: rules import them from here
    call_arg, dotted, is_cuda_string, own_params, root_name, string_value,
)
from devlint.project import NONE, ProjectFacts, classes_of
from devlint.walk import children


_NAMES_A_GPU = lazyre.compile(rb"\.cuda\s*\(|[\'\"]cuda(?::\d+)?[\'\"]|\bdevice_ids\s*=")


@dataclass
class DeviceVar:
    name: str
    node: cst.CSTNode  # the defining statement
    scope: Optional[cst.CSTNode]  # FunctionDef, or None at module level
    guarded: bool  # False when the definition itself hard-codes cuda


@dataclass
class FileFacts:
    source: bytes
    module: cst.Module
    aliases: dict = field(default_factory=dict)  # local name -> qualified name ("torch.nn")
    module_classes: set = field(default_factory=set)  # class names that subclass nn.Module
    class_nodes: dict = field(default_factory=dict)  # ClassDef -> is nn.Module subclass
    tensor_datasets: set = field(default_factory=set)  # classes whose __getitem__ returns tensors
    guard_flags: set = field(default_factory=set)  # dotted names assigned from availability checks
    device_vars: list = field(default_factory=list)
    bound_names: set = field(default_factory=set)
    assigned_in: dict = field(default_factory=dict)  # scope -> set of names bound there (params too)
    rebound: dict = field(default_factory=dict)  # scope -> names assigned by statements (not params)
    last_import: Optional[cst.CSTNode] = None  # last statement of the leading import block
    multi_gpu: bool = False  # DataParallel / DDP / NCCL code: device fixes become unsafe
    values: Optional[ValueModel] = None  # what each value is and where it lives (built by prescan)
    project: ProjectFacts = NONE  # what the rest of the project says about this file (devlint.project)

    def __post_init__(self) -> None:
        if self.values is None:
            self.values = ValueModel(self)

    @property
    def evidence(self):
        """(scope, dotted) -> kinds from assignments (read-only once the prescan is done)."""
        return self.values.evidence

    @property
    def usage(self):
        """(scope, dotted) -> kinds from usage, for the whole file (read-only)."""
        return self.values.usage

    def mentions(self, word: bytes) -> bool:
        """Whether ``word`` occurs in the file's bytes (searched once per file and word: a
        question asked per node must not scan the whole source each time)."""
        found = self.__dict__.get("_mentions")
        if found is None:
            found = self.__dict__["_mentions"] = {}
        got = found.get(word)
        if got is None:
            got = found[word] = word in self.source
        return got

    @property
    def names_a_gpu(self) -> bool:
        """Whether the file's text names a GPU placement at all (``.cuda(``, a ``"cuda"``/
        ``"cuda:N"`` string, ``device_ids=``): a file without one, and without a device
        variable, keeps its values on the host. Read off the bytes, so a mention in a
        comment counts too (the safe side: it only ever keeps a device in play)."""
        return _NAMES_A_GPU.search(self.source) is not None

    # ---- names -------------------------------------------------------------
    def qualname(self, node: cst.CSTNode) -> Optional[str]:
        """Resolve ``T.cuda.synchronize`` (``import torch as T``) to ``torch.cuda.synchronize``."""
        d = dotted(node)
        if d is None:
            return None
        head, _, rest = d.partition(".")
        q = self.aliases.get(head)
        if q is None:
            return None
        return f"{q}.{rest}" if rest else q

    def torch_name(self) -> Optional[str]:
        """A local name bound to the ``torch`` module itself, if any."""
        for local, q in self.aliases.items():
            if q == "torch" and "." not in local:
                return local
        return None

    def is_torch(self, node: cst.CSTNode, *names: str) -> bool:
        q = self.qualname(node)
        return q is not None and q in names

    def moved_params(self, func: str) -> tuple:
        """The parameters of the module-level function ``func`` of this file that its body moves
        before any other read (``p = p.to(img)``, :func:`usage.params_moved_first`), as
        ``(positional index or None, name)`` pairs; computed once per file."""
        defs = self.__dict__.get("_top_functions")
        if defs is None:  # the module-level functions by name (the last definition wins)
            defs = self.__dict__["_top_functions"] = {
                stmt.name.value: stmt for stmt in self.module.body if isinstance(stmt, cst.FunctionDef)}
            self.__dict__["_moved_params"] = {}
        table = self.__dict__["_moved_params"]
        got = table.get(func)
        if got is None:
            stmt = defs.get(func)
            got = ()
            if stmt is not None:  # (read only for a function some call asks about)
                ps = list(stmt.params.posonly_params) + list(stmt.params.params)
                kw = list(stmt.params.kwonly_params)
                first = params_moved_first(stmt, [p.name.value for p in (*ps, *kw)])
                got = tuple((i, p.name.value) for i, p in enumerate(ps) if p.name.value in first)
                got += tuple((None, p.name.value) for p in kw if p.name.value in first)
            table[func] = got
        return got

    # ---- tensor vs Module ----------------------------------------------------
    def kinds(self, key: str, scope) -> set:
        """Evidence kinds for a dotted name seen from ``scope`` (see :mod:`devlint.analysis.values`)."""
        return self.values.kinds(key, scope)

    def kind_of(self, expr: cst.CSTNode, scope, cls=None) -> Optional[str]:
        """TENSOR / PARAM / MODULE / ... when the file gives evidence, else None (never guess).
        Final before rules run: the answer does not depend on when a rule asks."""
        return self.values.kind_of(expr, scope, cls)

    def stateless_module(self, name: str, depth: int = 4) -> bool:
        """``name`` (a class this file builds) is an nn.Module holding no parameter, buffer or
        stateful submodule: the project's (devlint.project) or the file's own, read off its text."""
        if name in self.project.stateless_modules:
            return True
        own = self.__dict__.get("_own_classes")
        if own is None:
            own = self.__dict__["_own_classes"] = classes_of(self.source) if b"class " in self.source else {}
        info = own.get(name)
        if info is None or not info.stateless or not info.bases or depth <= 0:
            return False
        for base in info.bases:
            head = base.split(".")[0]
            q = self.aliases.get(head)
            if (q + base[len(head):] if q else base) in ("torch.nn.Module", "torch.nn.modules.module.Module"):
                continue
            if base == name or not self.stateless_module(base, depth - 1):
                return False
        return True

    def loader_items(self, loop: cst.For, scope, cls=None) -> set:
        """Names a loop binds to the items of a DataLoader batch (host data each iteration)."""
        return self.values.loader_items(loop, scope, cls)

    def placement_of(self, expr: cst.CSTNode, scope, cls=None) -> tuple:
        return self.values.placement_of(expr, scope, cls)

    # ---- guards (devlint.analysis.guards answers; kept here for existing callers) ----
    def guard_polarity(self, test: cst.BaseExpression) -> int:
        return guards.guard_polarity(self, test)

    def is_availability_expr(self, node: cst.CSTNode) -> bool:
        return guards.is_availability_expr(self, node)

    def decorator_guards(self, node) -> bool:
        return guards.decorator_guards(self, node)


# ---------------------------------------------------------------------------------
# prescan: statements only
# ---------------------------------------------------------------------------------

_MULTI_GPU = lazyre.compile(rb"DataParallel|DistributedDataParallel|init_process_group|nccl|device_ids")


class _Prescan:
    def __init__(self, facts: FileFacts) -> None:
        self.f = facts
        self.leading = True

    def bind(self, scope, name: str) -> None:
        self.f.bound_names.add(name)
        self.f.assigned_in.setdefault(scope, set()).add(name)

    def bind_target(self, scope, target: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            self.bind(scope, target.value)
            self.f.rebound.setdefault(scope, set()).add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self.bind_target(scope, el.value)
        elif isinstance(target, cst.StarredElement):
            self.bind_target(scope, target.value)

    def imports(self, stmt: cst.BaseSmallStatement, scope) -> None:
        a = self.f.aliases
        if isinstance(stmt, cst.Import):
            for al in stmt.names:
                full = dotted(al.name)
                if full is None:
                    continue
                if al.asname is not None and isinstance(al.asname.name, cst.Name):
                    local = al.asname.name.value
                    a[local] = full
                else:
                    local = full.split(".")[0]
                    a.setdefault(local, local)
                self.bind(scope, local)
        elif isinstance(stmt, cst.ImportFrom):
            if stmt.relative or stmt.module is None:
                if not isinstance(stmt.names, cst.ImportStar):
                    for al in stmt.names:
                        n = al.asname.name if al.asname else al.name
                        if isinstance(n, cst.Name):
                            self.bind(scope, n.value)
                return
            mod = dotted(stmt.module)
            if isinstance(stmt.names, cst.ImportStar) or mod is None:
                return
            for al in stmt.names:
                name = dotted(al.name)
                local = al.asname.name.value if al.asname and isinstance(al.asname.name, cst.Name) else name
                if name is None or local is None:
                    continue
                a[local] = f"{mod}.{name}"
                self.bind(scope, local)

    def assign(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression], scope, cls, stmt,
               annotation: Optional[cst.Annotation] = None) -> None:
        f = self.f
        self.bind_target(scope, target)
        f.values.record_assign(target, value, scope, cls, annotation)
        d = dotted(target)
        if d is None or value is None:
            return
        if not isinstance(value, (cst.Name, cst.Attribute)) and f.is_availability_expr(value):
            f.guard_flags.add(d)
        if "." not in d and self._is_device_definition(d, value, scope):
            f.device_vars.append(DeviceVar(d, stmt, scope, guarded=not self._hardcoded(value)))

    def _hardcoded(self, value: cst.BaseExpression) -> bool:
        if is_cuda_string(value):
            return True
        if isinstance(value, cst.Call) and self.f.is_torch(value.func, "torch.device"):
            return bool(value.args) and is_cuda_string(value.args[0].value)
        return False

    def _is_device_definition(self, name: str, value: cst.BaseExpression, scope) -> bool:
        f = self.f
        if isinstance(value, cst.Call) and f.is_torch(value.func, "torch.device"):
            return True
        if isinstance(value, cst.IfExp):
            return (self._is_device_value(value.body) and self._is_device_value(value.orelse)
                    and guards.is_device_choice_test(f, value.test))
        if "device" in name.lower() and is_cuda_string(value):
            return True
        return False

    def _is_device_value(self, node: cst.BaseExpression) -> bool:
        if string_value(node) in ("cpu", "cuda", "mps") or is_cuda_string(node):
            return True
        if isinstance(node, cst.Call):
            q = self.f.qualname(node.func)
            return q in ("torch.device", "torch.accelerator.current_accelerator")
        return False

    def params(self, fn: cst.FunctionDef, scope) -> None:
        p = fn.params
        for param in own_params(fn):
            self.bind(scope, param.name.value)
            self.f.values.record_param(scope, param)
        for star in (p.star_arg, p.star_kwarg):
            if isinstance(star, cst.Param):
                self.bind(scope, star.name.value)

    def suite(self, body: cst.BaseSuite, scope, cls) -> None:
        if type(body) is cst.SimpleStatementSuite:
            for small in body.body:
                self.small(small, scope, cls, body)
            return
        for stmt in body.body:
            self.statement(stmt, scope, cls)

    def small(self, s: cst.BaseSmallStatement, scope, cls, stmt) -> None:
        if type(s) in (cst.Import, cst.ImportFrom):
            self.imports(s, scope)
        elif type(s) is cst.Assign:
            for t in s.targets:
                self.assign(t.target, s.value, scope, cls, stmt)
        elif type(s) is cst.AnnAssign:
            self.assign(s.target, s.value, scope, cls, stmt, s.annotation)
        elif type(s) is cst.AugAssign:
            self.bind_target(scope, s.target)
        elif type(s) in (cst.Global, cst.Nonlocal):
            for n in s.names:
                self.bind(scope, n.name.value)
        elif type(s) is cst.Expr and type(s.value) is cst.Call:
            call = s.value
            func = call.func
            self.f.values.record_move(call, scope)
            if (type(func) is cst.Attribute and func.attr.value == "register_buffer"
                    and type(func.value) is cst.Name and func.value.value == "self" and cls is not None
                    and call.args and string_value(call.args[0].value)):
                self.f.values.record_buffer(cls, string_value(call.args[0].value))

    def statement(self, stmt: cst.BaseStatement, scope, cls) -> None:
        f = self.f
        if type(stmt) is cst.SimpleStatementLine:
            is_import = all(type(s) in (cst.Import, cst.ImportFrom) for s in stmt.body)
            for s in stmt.body:
                self.small(s, scope, cls, stmt)
            if scope is None and cls is None and self.leading:
                if is_import:
                    f.last_import = stmt
                elif not (len(stmt.body) == 1 and type(stmt.body[0]) is cst.Expr
                          and type(stmt.body[0].value) in (cst.SimpleString, cst.ConcatenatedString)):
                    self.leading = False
            return
        if scope is None and cls is None:
            if type(stmt) is cst.Try and self.leading:
                pass  # try/except ImportError blocks belong to the import block
            else:
                self.leading = False
        if type(stmt) is cst.FunctionDef:
            self.bind(scope, stmt.name.value)
            f.values.record_def(stmt, scope, cls)
            self.params(stmt, stmt)
            self.suite(stmt.body, stmt, cls)
        elif type(stmt) is cst.ClassDef:
            self.bind(scope, stmt.name.value)
            f.values.record_def(stmt, scope, cls)
            is_mod = False
            for base in stmt.bases:
                q = f.qualname(base.value)
                bn = dotted(base.value)
                if is_module_base(q) or (bn is not None and (bn in f.module_classes
                                                             or f.project.module_base(bn) is not None)):
                    is_mod = True  # a torch / Lightning base, a Module of this file or of the project
            f.class_nodes[stmt] = is_mod
            if is_mod:
                f.module_classes.add(stmt.name.value)
            self.suite(stmt.body, scope, stmt)
            if not is_mod and f.values.tensor_dataset_class(stmt):
                f.tensor_datasets.add(stmt.name.value)
        elif type(stmt) is cst.For:
            self.bind_target(scope, stmt.target)
            f.values.record_for(stmt.target, stmt.iter, scope)
            self.suite(stmt.body, scope, cls)
            if stmt.orelse:
                self.suite(stmt.orelse.body, scope, cls)
        elif type(stmt) is cst.While:
            self.suite(stmt.body, scope, cls)
            if stmt.orelse:
                self.suite(stmt.orelse.body, scope, cls)
        elif type(stmt) is cst.If:
            self.suite(stmt.body, scope, cls)
            if stmt.orelse is not None:
                if type(stmt.orelse) is cst.If:
                    self.statement(stmt.orelse, scope, cls)
                else:
                    self.suite(stmt.orelse.body, scope, cls)
        elif type(stmt) is cst.With:
            for item in stmt.items:
                if item.asname is not None:
                    self.bind_target(scope, item.asname.name)
            self.suite(stmt.body, scope, cls)
        elif type(stmt) is cst.Try or type(stmt).__name__ == "TryStar":
            self.suite(stmt.body, scope, cls)
            for h in stmt.handlers:
                if h.name is not None:
                    self.bind_target(scope, h.name.name)
                self.suite(h.body, scope, cls)
            for extra in (stmt.orelse, stmt.finalbody):
                if extra is not None:
                    self.suite(extra.body, scope, cls)
        elif type(stmt).__name__ == "Match":
            for case in stmt.cases:
                self.suite(case.body, scope, cls)


_BINDS_TORCH = lazyre.compile(rb"^[ \t]*(?:torch[ \t]*(?:,[^=\n]*)?=(?!=)|(?:def|class)[ \t]+torch\b)", re.M)


def _star_imports_torch(module: cst.Module, source: bytes) -> bool:
    """``from utils import *`` and ``torch.cuda.is_available()`` with no ``import torch`` in the
    file: the name came in with the star (a module that imports torch exports it), and ``torch``
    is never anything but the torch module. Only a top-level star import of another package
    counts, and only while the file binds ``torch`` nowhere itself."""
    star = False
    for stmt in module.body:
        for small in (stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()):
            if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar) and small.module is not None:
                root = (dotted(small.module) or "").partition(".")[0]
                star = star or root not in ("", "torch", "numpy", "math", "os", "sys")
            elif isinstance(small, cst.Import) and any((dotted(al.name) or "").partition(".")[0] == "torch"
                                                       or (al.asname is not None and dotted(al.asname.name) == "torch")
                                                       for al in small.names):
                return False
    return star and _BINDS_TORCH.search(source) is None


_STOPPERS = frozenset({"sys.exit", "exit", "quit", "os._exit"})


def module_stop(module: cst.Module) -> Optional[cst.SimpleStatementLine]:
    """The first module-level statement that always stops the module (``raise ...``,
    ``assert False``, ``sys.exit()``): nothing after it ever runs, on import or as a script.
    (Not asked of a notebook, whose cells run one by one.)"""
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Raise):
                return stmt
            if isinstance(small, cst.Assert) and (
                    (isinstance(small.test, cst.Name) and small.test.value == "False")
                    or (isinstance(small.test, cst.Integer) and small.test.value == "0")):
                return stmt
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) \
                    and dotted(small.value.func) in _STOPPERS:
                return stmt
    return None


def prescan(module: cst.Module, source: bytes, project: Optional[ProjectFacts] = None) -> FileFacts:
    facts = FileFacts(source=source, module=module, project=project or NONE)
    facts.multi_gpu = _MULTI_GPU.search(source) is not None
    if b"import *" in source and b"torch." in source and _star_imports_torch(module, source):
        facts.aliases["torch"] = "torch"
    p = _Prescan(facts)
    for stmt in module.body:
        p.statement(stmt, None, None)
    for stmt in module.body:
        # `import model` ... `model = model.NCF(...)`: from there on the name is an object built by
        # the module, not the module (a torch alias stays: `torch` is not reassigned in practice)
        for small in (stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()):
            if (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
                    and isinstance(small.value, cst.Call)):
                name = small.targets[0].target.value
                root = (dotted(small.value.func) or "").partition(".")[0]
                if root == name and not facts.aliases.get(name, "torch").startswith("torch"):
                    del facts.aliases[name]
    facts.values.finish(module)  # usage evidence for the whole file; final from here on
    return facts


# ---------------------------------------------------------------------------------
# live context during the single traversal
# ---------------------------------------------------------------------------------

_LOOPS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


_VISITOR_NAMES: dict = {}


def visitor_names(cls: type) -> tuple:
    """The ``visit_*``/``leave_*`` method names of a visitor class, found once per class
    (``BatchableCSTVisitor.get_visitors`` introspects with ``inspect.getmembers``)."""
    names = _VISITOR_NAMES.get(cls)
    if names is None:
        names = _VISITOR_NAMES[cls] = tuple(
            n for n in dir(cls)
            if (n.startswith("visit_") or n.startswith("leave_")) and callable(getattr(cls, n, None))
            and not getattr(getattr(cls, n), "_is_no_op", False))
    return names


@dataclass
class _Block:
    guarded: bool = False  # this block is guarded (set while it is the innermost one)
    outer: bool = False  # an enclosing block was guarded when this one was entered


class ContextTracker(BatchableCSTVisitor):
    """Runs first in the batched traversal; rules read its state through ``facts``.

    ``ContextTracker.closer`` runs last, so rules see the context of a node in both
    their ``visit_*`` and ``leave_*`` methods.
    """

    def __init__(self, facts: FileFacts) -> None:
        super().__init__()
        self.facts = facts
        self.functions: list = []  # FunctionDef stack
        self.classes: list = []  # ClassDef stack
        self.loops: list = []  # For / While / comprehension stack (loop frames)
        self.guard_depth = 0
        self.blocks: list[_Block] = [_Block()]
        self.statement: Optional[cst.CSTNode] = None  # innermost simple statement line
        self.seen_statements: set = set()  # statements already entered, in source order
        self.suites = 0  # one-line suites entered (`if c: assert x`): no block of their own
        self.closer = _Closer(self)
        self._polarity: dict = {}  # test node -> guard_polarity (facts are fixed by now)
        self._path: list = []  # (test, 1 / -1): the enclosing `if` branches, outermost first
        self._entered: list = []  # whether each of them raised guard_depth

    def get_visitors(self):
        return {k: getattr(self, k) for k in visitor_names(type(self)) if k.startswith("visit_")}

    # ---- queries rules use ------------------------------------------------------
    @property
    def guarded(self) -> bool:
        b = self.blocks[-1]  # only the innermost block ever changes: `outer` is exact
        return self.guard_depth > 0 or b.guarded or b.outer

    def _push_block(self, guarded: bool = False) -> None:
        b = self.blocks[-1]
        self.blocks.append(_Block(guarded, b.guarded or b.outer))

    @property
    def function(self) -> Optional[cst.FunctionDef]:
        return self.functions[-1] if self.functions else None

    @property
    def scope(self) -> Optional[cst.FunctionDef]:
        return self.function

    @property
    def cls(self) -> Optional[cst.ClassDef]:
        """The class whose method we are in (for ``self.x`` evidence)."""
        return self.classes[-1] if self.classes else None

    @property
    def in_module_class(self) -> bool:
        return bool(self.classes) and self.facts.class_nodes.get(self.classes[-1], False)

    @property
    def method(self) -> Optional[cst.FunctionDef]:
        """The method when directly inside a class's function, else None."""
        if self.classes and self.functions and self._method_of.get(self.functions[-1]) is self.classes[-1]:
            return self.functions[-1]
        return None

    @property
    def loop(self) -> Optional[cst.CSTNode]:
        return self.loops[-1] if self.loops else None

    def kind_of(self, expr: cst.CSTNode) -> Optional[str]:
        return self.facts.kind_of(expr, self.scope, self.cls)

    _method_of: dict

    # ---- structure ------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        self._method_of = {}
        self._params: set = set()  # calls whose arguments are guarded: pytest.param(marks=<GPU mark>), model.module.f()
        # a module-level GPU mark (`pytestmark`), CUDA extension code: the whole file
        self.guards = guards.model(self.facts)  # asked for every statement: looked up once
        self.blocks[0].guarded = self.guards.file_guarded

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node)
        if node.decorators and guards.decorator_guards(self.facts, node):
            self.guard_depth += 1

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.pop()
        if node.decorators and guards.decorator_guards(self.facts, node):
            self.guard_depth -= 1

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.classes:
            # a function directly in a class body is a method of that class
            parent_fn = self.functions[-1] if self.functions else None
            if parent_fn is None or self._method_of.get(parent_fn) is not None:
                if parent_fn is None:
                    self._method_of[node] = self.classes[-1]
        self.functions.append(node)
        guarded = bool(node.decorators) and guards.decorator_guards(self.facts, node)
        cls = self._method_of.get(node)
        if not guarded and cls is not None and node.name.value != "__init__":
            guarded = cls in self.guards.guarded_classes  # its __init__ ensures a GPU
        if not guarded and cls is not None:
            guarded = cls in self.guards.gpu_classes  # a GPU trainer: DDP with device ids
        if not guarded:
            guarded = node in self.guards.cuda_only_functions  # imports TensorRT, CuPy ...
        if not guarded:
            guarded = guards.function_ensures_cuda(self.facts, node)  # raises unless a GPU is usable
        self._push_block(guarded)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.pop()
        self.blocks.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._push_block()

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self.blocks.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node
        self.seen_statements.add(node)
        if node in self.guards.settings_statements or node in self.guards.asserted_queries:
            # a notebook's settings cell: the reader's choice, as a flag is; a query of the GPU's
            # name or capability that the next statement asserts on: part of that requirement
            self.guard_depth += 1

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.seen_statements.add(node)
        self.suites += 1

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._push_block(node in self.guards.cuda_only_blocks)  # a `__main__` block launching a GPU kernel

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.blocks.pop()

    # ---- loops -------------------------------------------------------------------
    def visit_For_body(self, node: cst.For) -> None:
        self.loops.append(node)

    def leave_For_body(self, node: cst.For) -> None:
        self.loops.pop()

    def visit_While(self, node: cst.While) -> None:
        self.loops.append(node)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self.loops.append(node)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self.loops.append(node)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self.loops.append(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self.loops.append(node)

    # ---- guards --------------------------------------------------------------------
    def polarity(self, test) -> int:
        """``facts.guard_polarity(test)``, computed once per node during the traversal."""
        p = self._polarity.get(test)
        if p is None:
            p = self._polarity[test] = guards.guard_polarity(self.facts, test)
        return p

    def _push_if(self, test, want: int) -> None:
        if self.polarity(test) == want or guards.literal_truth(test) == -want:
            self.guard_depth += 1  # (a branch whose test is a literal that never selects it never runs)

    def _pop_if(self, test, want: int) -> None:
        if self.polarity(test) == want or guards.literal_truth(test) == -want:
            self.guard_depth -= 1

    def _enter_if(self, test, want: int) -> None:
        guarded = self.polarity(test) == want or guards.literal_truth(test) == -want \
            or guards.switch_truth(self.facts, test, self.function) == -want  # (a branch the code's own switch never selects)
        if not guarded and self._path:
            # `if not cuda and not mps: ... elif mps: ... else: model.cuda()`: by elimination
            guarded = guards.path_implies_cuda(self._path + [(test, want)], self.polarity)
        self._path.append((test, want))
        self._entered.append(guarded)
        if guarded:
            self.guard_depth += 1

    def _leave_if(self) -> None:
        self._path.pop()
        if self._entered.pop():
            self.guard_depth -= 1

    def visit_If_body(self, node: cst.If) -> None:
        self._enter_if(node.test, 1)

    def leave_If_body(self, node: cst.If) -> None:
        self._leave_if()

    def visit_If_orelse(self, node: cst.If) -> None:
        self._enter_if(node.test, -1)

    def leave_If_orelse(self, node: cst.If) -> None:
        self._leave_if()

    def visit_Try_body(self, node: cst.Try) -> None:
        if guards.try_guards(node):
            self.guard_depth += 1

    def leave_Try_body(self, node: cst.Try) -> None:
        if guards.try_guards(node):
            self.guard_depth -= 1

    def visit_With_body(self, node: cst.With) -> None:
        if guards.expects_error(node):
            self.guard_depth += 1  # `with pytest.raises(...)`: the test wants the body to fail

    def leave_With_body(self, node: cst.With) -> None:
        if guards.expects_error(node):
            self.guard_depth -= 1

    def visit_ExceptHandler_body(self, node: cst.ExceptHandler) -> None:
        if guards.oom_handler(node):
            self.guard_depth += 1  # the fallback after a GPU ran out of memory runs on GPU machines

    def leave_ExceptHandler_body(self, node: cst.ExceptHandler) -> None:
        if guards.oom_handler(node):
            self.guard_depth -= 1

    def visit_IfExp_body(self, node: cst.IfExp) -> None:
        self._push_if(node.test, 1)

    def leave_IfExp_body(self, node: cst.IfExp) -> None:
        self._pop_if(node.test, 1)

    def visit_IfExp_orelse(self, node: cst.IfExp) -> None:
        self._push_if(node.test, -1)

    def leave_IfExp_orelse(self, node: cst.IfExp) -> None:
        self._pop_if(node.test, -1)

    def visit_BooleanOperation_right(self, node: cst.BooleanOperation) -> None:
        want = 1 if isinstance(node.operator, cst.And) else -1
        self._push_if(node.left, want)

    def leave_BooleanOperation_right(self, node: cst.BooleanOperation) -> None:
        want = 1 if isinstance(node.operator, cst.And) else -1
        self._pop_if(node.left, want)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if ((type(func) is cst.Attribute and func.attr.value == "param") or (type(func) is cst.Name and func.value == "param")) \
                and guards.param_guards(self.facts, node):
            self._params.add(node)
            self.guard_depth += 1
        elif type(func) is cst.Attribute and self.facts.project.gpu_wrappers and guards.reads_gpu_wrapper(
                self.facts, func, self.function):
            self._params.add(node)  # `model.module.f(x.cuda())`: only the GPU path has `.module`
            self.guard_depth += 1
        elif node.args and self.facts.mentions(guards.ASKS_FLASH_WORD) and guards.requests_flash_attention(node):
            self._params.add(node)  # `from_pretrained(..., attn_implementation="flash_attention_2", device_map="cuda:0")`
            self.guard_depth += 1
        elif node.args and self.facts.mentions(guards.DDP_WORD) and guards.ddp_on_gpus(node):
            self._params.add(node)  # `DistributedDataParallel(model.cuda(), device_ids=[torch.cuda.current_device()])`
            self.guard_depth += 1


class _Closer(BatchableCSTVisitor):
    """The tail of :class:`ContextTracker`: pops state after every rule has left a node."""

    def __init__(self, t: ContextTracker) -> None:
        super().__init__()
        self._t = weakref.ref(t)  # weak: the tracker owns its closer (no reference cycle)

    @property
    def t(self) -> "ContextTracker":
        return self._t()

    def get_visitors(self):
        out = {k: getattr(self.t, k) for k in visitor_names(type(self.t)) if k.startswith("leave_")}
        out.update((k, getattr(self, k)) for k in visitor_names(type(self)))
        return out

    def leave_If(self, node: cst.If) -> None:
        t = self.t
        pol = t.polarity(node.test)
        if pol == -1 and ends_with_exit(node.body):
            t.blocks[-1].guarded = True
        elif pol == 1 and node.orelse is not None and isinstance(node.orelse, cst.Else) and ends_with_exit(node.orelse.body):
            t.blocks[-1].guarded = True

    def leave_Assert(self, node: cst.Assert) -> None:
        # (an assert in a one-line suite, `if use_cuda: assert ...`, checks only that branch:
        # the suite has no block of its own, and the enclosing block goes on without it)
        if (self.t.polarity(node.test) == 1 or node in guards.device_asserts(self.t.facts)[0]) and not self.t.suites:
            self.t.blocks[-1].guarded = True

    def leave_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self.t.suites -= 1

    def leave_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        # `init_process_group("nccl")`, `check_gpu()` (a function of the file that exits without
        # a GPU): the rest of the block runs only with one
        t = self.t
        if node in t.guards.settings_statements or node in t.guards.asserted_queries:
            t.guard_depth -= 1
        if not t.blocks[-1].guarded and guards.statement_ensures_cuda(t.facts, node, t.guards.ensuring):
            t.blocks[-1].guarded = True
        elif not t.blocks[-1].guarded and t.facts.project.gpu_wrappers and any(
                type(s) in (cst.Expr, cst.Assign, cst.AnnAssign) and s.value is not None
                and guards.reads_gpu_wrapper(t.facts, s.value, t.function) for s in node.body):
            t.blocks[-1].guarded = True  # `model.module.load(...)`: what follows is on the GPU path
        elif not t.blocks[-1].guarded and t.facts.mentions(guards.DDP_WORD) and any(
                type(s) in (cst.Expr, cst.Assign, cst.AnnAssign) and type(s.value) is cst.Call
                and guards.ddp_on_gpus(s.value) for s in node.body):
            t.blocks[-1].guarded = True  # a model wrapped for GPUs: what follows runs only with them

    def leave_Call(self, node: cst.Call) -> None:
        if node in self.t._params:
            self.t._params.discard(node)
            self.t.guard_depth -= 1

    def leave_While(self, node: cst.While) -> None:
        self.t.loops.pop()

    def leave_ListComp(self, node: cst.ListComp) -> None:
        self.t.loops.pop()

    def leave_SetComp(self, node: cst.SetComp) -> None:
        self.t.loops.pop()

    def leave_DictComp(self, node: cst.DictComp) -> None:
        self.t.loops.pop()

    def leave_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self.t.loops.pop()


def iter_calls(node: cst.CSTNode) -> Iterator[cst.Call]:
    """Calls inside an expression (cheap, for small subtrees only)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Call):
            yield n
        stack.extend(children(n, trivia=False))
