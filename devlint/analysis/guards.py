"""The guard model: where does the file itself make sure a CUDA GPU is usable?

Rules ask these questions (never re-derive them); ``devlint.facts.ContextTracker`` uses
them to keep ``t.guarded`` during the traversal.

* :func:`guard_polarity` — does a test being true (+1) or false (-1) imply CUDA is usable:
  ``torch.cuda.is_available()``, a flag assigned from it, ``device.type == "cuda"``,
  ``x.is_cuda``, ``torch.cuda.device_count() > rank``, ``backend == "nccl"``, a user switch
  such as ``args.cuda``.
* :func:`decorator_guards` — a decorator that runs the function/class only with a GPU:
  ``@unittest.skipIf(not torch.cuda.is_available(), ...)``, ``@pytest.mark.skipif(...)``,
  ``@RunIf(min_cuda_gpus=1)`` (whatever its import name: the keyword says it),
  ``@requires_cuda``-style helpers, and names the file binds to such a mark
  (``requires_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason=...)``).
* :func:`param_guards` — ``pytest.param(..., marks=<a GPU mark>)``: the case runs only with a GPU.
* :func:`statement_ensures_cuda` — a statement after which the rest of its block runs only
  with a GPU: ``assert torch.cuda.is_available()``, ``init_process_group("nccl")``, a call of
  a function of the file that exits/raises without a GPU (``check_gpu()``), constructing a
  class whose ``__init__`` does.
* :class:`GuardModel` (``model(facts)``, computed once per file) — the file-level answers:
  ``file_guarded`` (a module-level ``pytestmark`` requiring a GPU, CUDA extension code: a
  ``torch.autograd.Function`` feeding a compiled kernel), ``gpu_marks``, ``ensuring`` (names of
  functions/classes whose call ensures CUDA), ``guarded_classes``.

A file or function *name* is never a guard: ``train_gpu.py`` still crashes on a laptop.
This module imports nothing from ``devlint.facts`` (facts imports it); it reads the facts
object it is given (``qualname``, ``is_torch``, ``aliases``, ``guard_flags``, ``device_vars``).
"""

from __future__ import annotations

import re
import weakref
from typing import Optional

import libcst as cst

from devlint.syntax import call_arg, dotted, string_value
from devlint.walk import nodes, statements

EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit", "pytest.skip", "unittest.skip",
                        "pytest.exit", "raise_error"})

# a user switch or an imported flag in a condition: `args.cuda`, `use_gpu`, `TEST_CUDA`, `HAS_GPU`
_NAMEISH_FLAG = re.compile(r"cuda|gpu|rocm|(?:^|_)hip(?:$|_)", re.I)  # ROCm builds run torch.cuda
_CONSTANT_FLAG = re.compile(r"[A-Z][A-Z0-9_]*")
# Decorators (and marks) that skip a test, or refuse to run a function, unless a CUDA GPU is present.
_GPU_ONLY_DECORATOR = re.compile(
    r"skip_?if_?(no|lt_x|not)_?(cuda|gpu)s?|skip_?unless_?(cuda|gpu)s?|requires?_?(cuda|gpus?|multi_?gpu|nccl)"
    r"|needs?_?(cuda|gpus?)|only_?cuda|(cuda|gpu)_?only|(cuda|gpus?)_?required|requires?_?(cuda|gpu)_?\w*",
    re.I,
)
# `@pytest.mark.gpu`: a marker the project's conftest deselects without a GPU
_GPU_MARKER = re.compile(r"(cuda|gpus?|multi_?gpus?)", re.I)
# `RunIf(min_cuda_gpus=1)`, `RunIf(min_gpus=2)`: the keyword says it, whatever the helper's name
_MIN_GPUS_KEYWORD = re.compile(r"min_(cuda_)?gpus?|min_cuda_devices?|num_gpus", re.I)
_SKIP_IF = frozenset({"skipif", "skip_if"})
_SKIP_UNLESS = frozenset({"skipunless", "skip_unless"})
_AUTOGRAD_FUNCTION = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
_CPP_EXTENSION_LOADERS = frozenset({"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"})
_TORCH_OPS_BUILTIN = frozenset({"aten", "prims", "quantized", "_quantized", "higher_order", "profiler"})
# an imported module that is a compiled (CUDA) extension: `from . import _C`, `import fused_adam_cuda`
_EXTENSION_MODULE = re.compile(r"(^|[._])(_C|_ext|ext|cuda|kernels?|triton|_?cuda_\w+|\w+_cuda)($|[._])")


def ends_with_exit(body: cst.BaseSuite) -> bool:
    """Whether a suite unconditionally leaves (return/raise/continue/break/exit)."""
    stmts = body.body
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, cst.SimpleStatementLine) or isinstance(body, cst.SimpleStatementSuite):
        small = last.body[-1] if isinstance(last, cst.SimpleStatementLine) else last
        if isinstance(small, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
            return True
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            return dotted(small.value.func) in EXIT_CALLS
    return False


def _raises(body: cst.BaseSuite) -> bool:
    """Whether a suite leaves the *function* abnormally or the program (raise/exit), not a loop."""
    stmts = body.body
    if not stmts:
        return False
    last = stmts[-1]
    small = last.body[-1] if isinstance(last, cst.SimpleStatementLine) else last
    if isinstance(small, cst.Raise):
        return True
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and dotted(small.value.func) in EXIT_CALLS


# ---------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------

def _int(node: cst.CSTNode) -> Optional[int]:
    if isinstance(node, cst.Integer):
        try:
            return int(node.value, 0)
        except ValueError:
            return None
    return None


_FLIP = {cst.GreaterThan: cst.LessThan, cst.LessThan: cst.GreaterThan,
         cst.GreaterThanEqual: cst.LessThanEqual, cst.LessThanEqual: cst.GreaterThanEqual}


def _count_polarity(op: cst.BaseCompOp, right: cst.CSTNode) -> int:
    """``torch.cuda.device_count() <op> right``."""
    n = _int(right)
    t = type(op)
    if t is cst.GreaterThan:
        return 1 if (n is None or n >= 0) else 0  # count > rank: at least one GPU
    if t is cst.GreaterThanEqual:
        return 1 if (n is None or n >= 1) else 0  # count >= world_size
    if t is cst.LessThan:
        return -1 if (n is None or n >= 1) else 0  # skipif(count < 2)
    if t is cst.LessThanEqual:
        return -1 if n == 0 else 0
    if t is cst.Equal:
        return -1 if n == 0 else (1 if n is not None and n >= 1 else 0)
    if t is cst.NotEqual:
        return 1 if n == 0 else 0
    return 0


def guard_polarity(facts, test: cst.BaseExpression) -> int:
    """+1 when ``test`` being true implies CUDA is usable, -1 when its negation does, else 0."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -guard_polarity(facts, test.expression)
    if isinstance(test, cst.BooleanOperation):
        pl, pr = guard_polarity(facts, test.left), guard_polarity(facts, test.right)
        if isinstance(test.operator, cst.And):
            return 1 if 1 in (pl, pr) else 0
        return -1 if -1 in (pl, pr) else (1 if pl == pr == 1 else 0)
    if isinstance(test, cst.IfExp):
        # `True if <test> else False` (a flag spelled out), `False if <test> else True`
        body, orelse = _bool(test.body), _bool(test.orelse)
        if body is not None and orelse is not None and body != orelse:
            return guard_polarity(facts, test.test) * (1 if body else -1)
        return 0
    if isinstance(test, cst.Call):
        q = facts.qualname(test.func)
        if q in ("torch.cuda.is_available", "torch.cuda.is_initialized", "torch.cuda.device_count"):
            return 1
        if isinstance(test.func, cst.Name) and test.func.value == "isinstance" and len(test.args) == 2:
            # `isinstance(x.data, torch.cuda.FloatTensor)`: the value is a CUDA tensor, so CUDA is up
            kinds = test.args[1].value
            elems = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
            quals = [facts.qualname(e) or "" for e in elems]
            if quals and all(q.startswith("torch.cuda.") and q.endswith("Tensor") for q in quals):
                return 1
            return 0
        if (isinstance(test.func, cst.Name) and test.func.value in ("all", "any") and len(test.args) == 1
                and isinstance(test.args[0].value, (cst.List, cst.Tuple))):
            # `all([x.is_cuda, ...])` is an `and`, `any([...])` an `or`
            pols = [guard_polarity(facts, e.value) for e in test.args[0].value.elements if isinstance(e, cst.Element)]
            if test.func.value == "all":
                return 1 if 1 in pols else 0
            return 1 if pols and all(p == 1 for p in pols) else 0
        return 0
    if isinstance(test, (cst.Name, cst.Attribute)):
        d = dotted(test)
        if d is None:
            return 0
        if d in facts.guard_flags or d.endswith(".is_cuda"):
            return 1
        last = d.rsplit(".", 1)[-1]
        if _NAMEISH_FLAG.search(last) and (not facts.is_torch(test, *facts.aliases.values())
                                           or _CONSTANT_FLAG.fullmatch(last)):
            # `TEST_CUDA`, `HAS_GPU` imported from a (torch) helper module are flags too
            # a user switch such as `args.cuda`, `use_gpu`: a deliberate choice
            return -1 if last.lower().startswith("no_") else 1
        return 0
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comp = test.comparisons[0]
        left, right, op = test.left, comp.comparator, comp.operator
        for a, b, o in ((left, right, op), (right, left, None)):
            if isinstance(a, cst.Call) and facts.is_torch(a.func, "torch.cuda.device_count"):
                if o is None:
                    flipped = _FLIP.get(type(op))
                    o = flipped() if flipped is not None else op
                return _count_polarity(o, b)
        for a, b in ((left, right), (right, left)):
            sv = string_value(b)
            if sv is None:
                continue
            if sv == "nccl" and isinstance(op, (cst.Equal, cst.Is, cst.NotEqual, cst.IsNot)):
                return 1 if isinstance(op, (cst.Equal, cst.Is)) else -1  # NCCL runs only on GPUs
            if not _is_device_expr(facts, a) and isinstance(a, (cst.Name, cst.Attribute, cst.Subscript)) \
                    and (sv.lower() in ("cuda", "gpu") or sv.lower().startswith("cuda:")):
                # `opt.test_mode == "GPU"`, `args.backend == "cuda"`: a user's choice of the CUDA device
                if isinstance(op, (cst.Equal, cst.Is)):
                    return 1
                if isinstance(op, (cst.NotEqual, cst.IsNot)):
                    return -1
            if _is_device_expr(facts, a):
                is_cuda = sv.startswith("cuda") or sv == "gpu"
                if isinstance(op, (cst.Equal, cst.Is)):
                    return 1 if is_cuda else (-1 if sv == "cpu" else 0)
                if isinstance(op, (cst.NotEqual, cst.IsNot)):
                    return 1 if sv == "cpu" else (-1 if is_cuda else 0)
        if isinstance(op, (cst.Equal, cst.Is, cst.NotEqual, cst.IsNot)):
            for b in (right, left):
                d = dotted(b) if isinstance(b, cst.Attribute) else None
                last = d.rsplit(".", 1)[-1] if d else ""
                if last and _CONSTANT_FLAG.fullmatch(last) and _NAMEISH_FLAG.search(last):
                    # `state.distributed_type == DistributedType.MULTI_GPU`, `kind is Backend.CUDA`
                    return 1 if isinstance(op, (cst.Equal, cst.Is)) else -1
    return 0


def _bool(node: cst.CSTNode) -> Optional[bool]:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def _is_device_expr(facts, node: cst.CSTNode) -> bool:
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "str":
        return bool(node.args) and _is_device_expr(facts, node.args[0].value)
    if (isinstance(node, cst.Attribute) and node.attr.value == "type" and isinstance(node.value, cst.Call)
            and facts.qualname(node.value.func) == "torch.device"):
        return True  # torch.device(device).type == "cuda"
    d = dotted(node)
    if d is None:
        return False
    last = d.rsplit(".", 1)[-1]
    return last == "type" or "device" in last.lower() or d in {dv.name for dv in facts.device_vars}


def is_availability_expr(facts, node: cst.CSTNode) -> bool:
    return guard_polarity(facts, node) == 1


_OTHER_ACCELERATOR_TESTS = frozenset({"torch.accelerator.is_available", "torch.backends.mps.is_available",
                                      "torch.xpu.is_available"})


def is_device_choice_test(facts, test: cst.BaseExpression) -> bool:
    """The test of a device choice (``a if <test> else b``): a CUDA guard, or an accelerator
    check (``torch.accelerator.is_available()``, the ``--fix-style accelerator`` definition)."""
    if guard_polarity(facts, test) != 0:
        return True
    return isinstance(test, cst.Call) and facts.qualname(test.func) in _OTHER_ACCELERATOR_TESTS


# ---------------------------------------------------------------------------------
# decorators and test marks
# ---------------------------------------------------------------------------------

def is_gpu_mark(facts, expr: cst.BaseExpression, marks: Optional[set] = None) -> bool:
    """Whether a decorator / pytest mark expression runs its target only where a CUDA GPU is
    usable. ``marks``: names the file binds to such marks (``model(facts).gpu_marks``)."""
    if isinstance(expr, (cst.List, cst.Tuple)):
        return any(isinstance(el, cst.Element) and is_gpu_mark(facts, el.value, marks) for el in expr.elements)
    call = expr if isinstance(expr, cst.Call) else None
    name = dotted(call.func if call is not None else expr)
    if name is None:
        return False
    if marks is None:
        marks = model(facts).gpu_marks
    if name in marks:
        return True
    last = name.rsplit(".", 1)[-1]
    q = facts.qualname(call.func if call is not None else expr)
    origin = q.rsplit(".", 1)[-1] if q else last  # `from helpers import requires_cuda as rc`
    if _GPU_ONLY_DECORATOR.fullmatch(last) or _GPU_ONLY_DECORATOR.fullmatch(origin):
        return True
    if ".mark." in f".{name}" and _GPU_MARKER.fullmatch(last):
        return True  # @pytest.mark.gpu
    if call is None:
        return False
    for a in call.args:
        if a.keyword is not None and _MIN_GPUS_KEYWORD.fullmatch(a.keyword.value):
            n = _int(a.value)
            if n is None or n >= 1:
                return True  # RunIf(min_cuda_gpus=1), whatever RunIf is imported as
    low = last.lower()
    if low in _SKIP_IF or low in _SKIP_UNLESS:
        a = call_arg(call, 0, "condition")
        if a is not None:
            pol = guard_polarity(facts, a.value)
            return pol == (-1 if low in _SKIP_IF else 1)
    return False


def decorator_guards(facts, node) -> bool:
    """Whether a decorator of ``node`` (FunctionDef/ClassDef) runs it only where CUDA is usable."""
    marks = model(facts).gpu_marks
    return any(is_gpu_mark(facts, dec.decorator, marks) for dec in node.decorators)


def param_guards(facts, call: cst.Call) -> bool:
    """``pytest.param("cuda", marks=<GPU mark>)``: the values run only with a GPU."""
    name = dotted(call.func)
    if name is None or name.rsplit(".", 1)[-1] != "param":
        return False
    a = call_arg(call, None, "marks")
    return a is not None and is_gpu_mark(facts, a.value)


_CAUGHT = frozenset({"Exception", "BaseException", "RuntimeError", "AssertionError", "torch.cuda.CudaError",
                     "torch.AcceleratorError"})


def try_guards(try_node: cst.CSTNode) -> bool:
    """``try: <CUDA probe> except RuntimeError:``: a failure without a GPU is handled, not a crash
    (a bare ``except``, or one catching Exception / RuntimeError / AssertionError)."""
    for h in getattr(try_node, "handlers", ()):
        t = h.type
        if t is None:
            return True
        kinds = [e.value for e in t.elements] if isinstance(t, cst.Tuple) else [t]
        if any(dotted(k) in _CAUGHT for k in kinds):
            return True
    return False


# ---------------------------------------------------------------------------------
# statements that make sure the rest of their block runs with a GPU
# ---------------------------------------------------------------------------------

def _is_nccl_init(facts, call: cst.Call) -> bool:
    f = call.func
    if type(f) is cst.Attribute and not f.attr.value.endswith("init_process_group"):
        return False  # `x.y.other()`: resolving the name cannot change its last part
    q = facts.qualname(call.func) or dotted(call.func) or ""
    if not q.endswith("init_process_group"):
        return False
    a = call_arg(call, 0, "backend")
    return a is not None and (string_value(a.value) or "").lower().startswith("nccl")


def _callee(call: cst.Call) -> Optional[str]:
    """``f`` for ``f(...)``, ``self.f(...)`` / ``obj.f(...)``."""
    if isinstance(call.func, cst.Name):
        return call.func.value
    if isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name):
        return call.func.attr.value
    return None


def _calls_ensuring(facts, call: cst.Call, ensuring: set) -> bool:
    """``call`` runs a function that makes sure of a GPU: ``f(...)`` / ``C(...)`` of the file or
    imported from the project, ``mod.f(...)`` of an imported module, ``self.m(...)`` of a
    method ``C.m``, ``obj.m(...)`` where the file binds ``obj`` to ``C(...)``. A method name
    alone is no evidence: ``model.eval()`` does not run a ``def eval`` of the file."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value in ensuring
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return False
    obj, meth = func.value.value, func.attr.value
    if obj in facts.aliases:  # `utils.check_gpu()`: a function of an imported module
        return meth in ensuring
    classes = {k.split(".")[0] for k in ensuring if k.endswith("." + meth)}
    if not classes:
        return False
    if obj in ("self", "cls"):
        return True
    return bool(_instances(facts).get(obj, set()) & classes)


def _instances(facts) -> dict:
    """name -> the file's classes whose instances the file binds to it (``r = Runner()``)."""
    out = getattr(facts, "_instances_of", None)
    if out is None:
        out = {}
        for (_, d), vals in facts.values.values.items():
            for v in vals:
                if isinstance(v, cst.Call) and isinstance(v.func, cst.Name):
                    out.setdefault(d, set()).add(v.func.value)
        facts._instances_of = out
    return out


def _small_ensures(facts, small: cst.BaseSmallStatement, ensuring: set) -> bool:
    t = type(small)  # concrete node classes: cheaper than isinstance() against LibCST's ABCs
    if t is cst.Assert:
        return guard_polarity(facts, small.test) == 1
    value = small.value if t is cst.Expr or t is cst.Assign or t is cst.AnnAssign else None
    if type(value) is not cst.Call:
        return False
    if _is_nccl_init(facts, value):
        return True
    return _calls_ensuring(facts, value, ensuring)


def statement_ensures_cuda(facts, stmt: cst.CSTNode, ensuring: Optional[set] = None) -> bool:
    """Whether the rest of ``stmt``'s block runs only with a usable GPU (it raises/exits otherwise)."""
    if ensuring is None:
        ensuring = model(facts).ensuring
    if type(stmt) is cst.SimpleStatementLine:
        for s in stmt.body:
            if _small_ensures(facts, s, ensuring):
                return True
        return False
    if type(stmt) is cst.If:
        pol = guard_polarity(facts, stmt.test)
        if pol == -1 and _raises(stmt.body):
            return True
        if pol == 1 and isinstance(stmt.orelse, cst.Else) and _raises(stmt.orelse.body):
            return True
    return False


def _suite_ensures(facts, body: cst.BaseSuite, ensuring: set) -> bool:
    """A function body whose top-level statements make sure of a GPU before it can return."""
    for stmt in body.body:
        if statement_ensures_cuda(facts, stmt, ensuring):
            return True
        if isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, cst.Return) for s in stmt.body):
            return False
        if isinstance(stmt, cst.If) and ends_with_exit(stmt.body) and guard_polarity(facts, stmt.test) == 0:
            return False  # an early return on another condition: the check may be skipped
    return False


def function_ensures_cuda(facts, fn: cst.FunctionDef) -> bool:
    """A function that raises or exits unless a GPU is usable (``assert torch.cuda.is_available()``,
    ``if device.type != "cuda": raise``, ``init_process_group("nccl")``) is CUDA-only by design:
    on a CPU-only machine it fails whatever it did before the check."""
    return isinstance(fn.body, cst.IndentedBlock) and _suite_ensures(facts, fn.body, model(facts).ensuring)


def unguarded_device_definition(facts, stmt: Optional[cst.CSTNode], value: cst.CSTNode) -> bool:
    """``value`` is what ``stmt`` assigns to one of the file's device variables, with no
    availability check (``device = torch.device("cuda:0")``): the fix guards it in place."""
    if stmt is None:
        return False
    for dv in facts.device_vars:
        if dv.node is stmt and not dv.guarded:
            for small in stmt.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is value:
                    return True
    return False


# CUDA runtime calls that raise without a GPU: a library function making one unconditionally
# is CUDA-only by design (its caller decides whether it runs)
_RUNTIME = frozenset({"torch.cuda.current_device", "torch.cuda.set_device", "torch.cuda.synchronize",
                      "torch.cuda.current_stream", "torch.cuda.get_device_properties",
                      "torch.cuda.get_device_capability", "torch.cuda.Stream", "torch.cuda.Event"})


# the last parts of _RUNTIME's names: a file that spells none of them calls none of them
_RUNTIME_WORD = re.compile(b"|".join(sorted({q.rsplit(".", 1)[-1].encode() for q in _RUNTIME})))


def calls_cuda_runtime(facts, fn: cst.FunctionDef) -> bool:
    """``fn`` calls the CUDA runtime (``torch.cuda.current_device()`` ...) in a statement of its
    body that no condition or ``try`` encloses."""
    if not isinstance(fn.body, cst.IndentedBlock) or not model(facts).spells_runtime:
        return False
    for stmt in fn.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for n in nodes(stmt):
            if isinstance(n, (cst.IfExp, cst.BooleanOperation, cst.Lambda)):
                break
            if isinstance(n, cst.Call) and facts.qualname(n.func) in _RUNTIME:
                return True
    return False


# ---------------------------------------------------------------------------------
# the per-file model
# ---------------------------------------------------------------------------------

class GuardModel:
    """File-level guard facts, computed once (``model(facts)``)."""

    def __init__(self, facts) -> None:
        self._facts = weakref.ref(facts)  # weak: the facts keep this model (no reference cycle)
        self.gpu_marks: set = set()  # names bound to a GPU-requiring mark/decorator
        self.ensuring: set = set()  # function / class / method names whose call ensures CUDA
        self.guarded_classes: set = set()  # ClassDef nodes whose __init__ ensures CUDA
        self.cuda_extension = False  # an autograd.Function feeding a compiled CUDA kernel
        self.cuda_only_functions: set = set()  # FunctionDefs that import a CUDA-only package
        self.file_guarded = False
        self.spells_runtime = _RUNTIME_WORD.search(facts.source) is not None  # see calls_cuda_runtime
        self._scan(facts.module)
        if _CUDA_ONLY_IMPORT.search(facts.source):
            self._scan_cuda_only_imports(facts.module)

    @property
    def facts(self):
        return self._facts()

    def _scan(self, module: cst.Module) -> None:
        f = self.facts
        funcs: list = []  # (name, FunctionDef, ClassDef or None)
        classes: list = []
        for stmt in module.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for s in stmt.body:
                    if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name):
                        name = s.targets[0].target.value
                        if name != "pytestmark" and is_gpu_mark(f, s.value, self.gpu_marks):
                            self.gpu_marks.add(name)
            elif isinstance(stmt, cst.FunctionDef):
                funcs.append((stmt.name.value, stmt, None))
            elif isinstance(stmt, cst.ClassDef):
                classes.append(stmt)
                for m in stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else ():
                    if isinstance(m, cst.FunctionDef):
                        funcs.append((m.name.value, m, stmt))
        for stmt in module.body:  # `pytestmark = ...` after the marks it uses are known
            if isinstance(stmt, cst.SimpleStatementLine):
                for s in stmt.body:
                    if (isinstance(s, (cst.Assign, cst.AnnAssign)) and s.value is not None
                            and any(dotted(t) == "pytestmark" for t in _targets(s))
                            and is_gpu_mark(f, s.value, self.gpu_marks)):
                        self.file_guarded = True
        # the project's functions this file imports that exit/raise without a GPU (devlint.project)
        self.ensuring |= f.project.cuda_entry
        # functions that exit/raise without a GPU; a call of one may make another ensure (2 rounds)
        for _ in range(2):
            changed = False
            for name, fn, cls in funcs:
                # a method is `Class.method`: only a call on an instance of that class runs it
                key = name if cls is None else (cls.name.value if name == "__init__" else f"{cls.name.value}.{name}")
                if key in self.ensuring or not isinstance(fn.body, cst.IndentedBlock):
                    continue
                if _suite_ensures(f, fn.body, self.ensuring):
                    self.ensuring.add(key)
                    if cls is not None and name == "__init__":
                        self.guarded_classes.add(cls)
                    changed = True
            if not changed:
                break
        self.cuda_extension = any(self._is_extension_function(c) for c in classes)
        for c in classes:
            if self._declares_cuda_availability(c):
                self.guarded_classes.add(c)
        # every project script that imports this module requires CUDA (devlint.project)
        self.file_guarded = self.file_guarded or self.cuda_extension or f.project.cuda_only

    # ---- code built on a CUDA-only package (TensorRT, CuPy, PyCUDA, Triton kernels ...) ------
    def _scan_cuda_only_imports(self, module: cst.Module) -> None:
        for stmt in module.body:
            if isinstance(stmt, cst.SimpleStatementLine) and any(
                    _cuda_only_import(s, _CUDA_ONLY_FILE) for s in stmt.body):
                self.file_guarded = True
                return
        for n in nodes(module, into_scopes=True):
            if isinstance(n, cst.FunctionDef) and isinstance(n.body, cst.IndentedBlock):
                # only an import the function always runs: `if fp16: from apex import amp`
                # makes that branch CUDA-only, not the whole function
                for line in n.body.body:
                    if isinstance(line, cst.SimpleStatementLine) and any(
                            isinstance(st, (cst.Import, cst.ImportFrom)) and _cuda_only_import(st, _CUDA_ONLY_FUNCTION)
                            for st in line.body):
                        self.cuda_only_functions.add(n)
                        break

    # ---- CUDA extension code -----------------------------------------------------------
    def _extension_names(self) -> set:
        names: set = set()
        for stmt in self.facts.module.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for s in stmt.body:
                if isinstance(s, cst.ImportFrom) and not isinstance(s.names, cst.ImportStar):
                    mod = dotted(s.module) if s.module is not None else ""
                    for al in s.names:
                        local = dotted(al.asname.name if al.asname else al.name) or ""
                        full = f"{mod}.{dotted(al.name)}" if mod else (dotted(al.name) or "")
                        if full.split(".")[0] != "torch" and _EXTENSION_MODULE.search(full):
                            names.add(local)
                elif isinstance(s, cst.Import):
                    for al in s.names:
                        full = dotted(al.name) or ""
                        local = dotted(al.asname.name) if al.asname else full.split(".")[0]
                        if full.split(".")[0] != "torch" and _EXTENSION_MODULE.search(full):
                            names.add(local or "")
                elif (isinstance(s, cst.Assign) and isinstance(s.value, cst.Call)
                      and self.facts.qualname(s.value.func) in _CPP_EXTENSION_LOADERS):
                    for t in s.targets:
                        if isinstance(t.target, cst.Name):
                            names.add(t.target.value)
        return names

    def _declares_cuda_availability(self, cls: cst.ClassDef) -> bool:
        """A backend class whose own ``is_available()`` asks for CUDA (Lightning's
        ``CUDAAccelerator``): the framework uses its other methods only when it answers yes."""
        if not isinstance(cls.body, cst.IndentedBlock):
            return False
        for m in cls.body.body:
            if isinstance(m, cst.FunctionDef) and m.name.value == "is_available":
                code = self.facts.module.code_for_node(m.body)
                return "cuda" in code.lower() or guard_polarity(self.facts, _returned(m)) == 1
        return False

    def _is_extension_function(self, cls: cst.ClassDef) -> bool:
        if not any(self.facts.qualname(b.value) in _AUTOGRAD_FUNCTION for b in cls.bases):
            return False
        ext = None
        for node in _calls(cls):
            root = dotted(node.func)
            if root is None:
                continue
            if root.startswith("torch.ops.") and root.split(".")[2] not in _TORCH_OPS_BUILTIN:
                return True
            if ext is None:
                ext = self._extension_names()
            if root.split(".")[0] in ext:
                return True
        return False


def _returned(fn: cst.FunctionDef) -> cst.BaseExpression:
    for st in statements(fn.body):
        if isinstance(st, cst.Return) and st.value is not None:
            return st.value
    return cst.Name("None")


# packages that only run on an NVIDIA GPU: code importing them has no CPU path
_CUDA_ONLY_FILE = frozenset({"tensorrt", "torch_tensorrt", "pycuda", "cupy", "apex", "flash_attn", "cuda",
                            "cutlass"})
_CUDA_ONLY_FUNCTION = _CUDA_ONLY_FILE | {"triton"}
_CUDA_ONLY_IMPORT = re.compile(rb"^[ \t]*(?:import|from)[ \t]+(?:tensorrt|torch_tensorrt|pycuda|cupy|apex|flash_attn"
                               rb"|triton|cuda|cutlass)\b", re.M)


def _cuda_only_import(s: cst.CSTNode, roots: frozenset) -> bool:
    if isinstance(s, cst.Import):
        return any((dotted(al.name) or "").split(".")[0] in roots for al in s.names)
    if isinstance(s, cst.ImportFrom) and s.module is not None and not s.relative:
        return (dotted(s.module) or "").split(".")[0] in roots
    return False


def _targets(s) -> list:
    return [t.target for t in s.targets] if isinstance(s, cst.Assign) else [s.target]


def _calls(node: cst.CSTNode):
    for n in nodes(node, into_scopes=True):
        if isinstance(n, cst.Call):
            yield n


def model(facts) -> GuardModel:
    """The file's guard model, computed once and kept on the facts object."""
    m = getattr(facts, "_guard_model", None)
    if m is None or m.facts is not facts:
        m = GuardModel(facts)
        facts._guard_model = m
    return m
