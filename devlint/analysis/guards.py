"""The guard model: where does the file itself make sure a CUDA GPU is usable?

Rules ask these questions (never re-derive them); ``devlint.facts.ContextTracker`` uses
them to keep ``t.guarded`` during the traversal.

* :func:`guard_polarity` — does a test being true (+1) or false (-1) imply CUDA is usable:
  ``torch.cuda.is_available()``, a flag assigned from it, ``device.type == "cuda"``,
  ``"cuda" in device``, ``device.startswith("cuda")``,
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
  functions/classes whose call ensures CUDA), ``guarded_classes``, ``gpu_classes`` (GPU
  trainers: a method wraps the model in ``DistributedDataParallel(..., device_ids=...)``
  unconditionally, or a base of the file or the project does).

A file or function *name* is never a guard: ``train_gpu.py`` still crashes on a laptop.
This module imports nothing from ``devlint.facts`` (facts imports it); it reads the facts
object it is given (``qualname``, ``is_torch``, ``aliases``, ``guard_flags``, ``device_vars``).
"""

from __future__ import annotations

import re
import weakref
from typing import Optional

import libcst as cst

from devlint import lazyre
from devlint.project import CUDA_ONLY_PACKAGES, TRITON_INTERPRETER
from devlint.syntax import call_arg, dotted, is_library_module, is_main_guard, string_value
from devlint.walk import children, nodes, statements

EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit", "pytest.skip", "unittest.skip",
                        "pytest.exit", "raise_error"})

# a user switch or an imported flag in a condition: `args.cuda`, `use_gpu`, `TEST_CUDA`, `HAS_GPU`
_NAMEISH_FLAG = lazyre.compile(r"cuda|gpu|rocm|(?:^|_)hip(?:$|_)", re.I)  # ROCm builds run torch.cuda
_CONSTANT_FLAG = lazyre.compile(r"[A-Z][A-Z0-9_]*")
# a user switch for the CPU: `args.cpu`, `use_cpu`, `force_cpu`, `cpu_only`, `ONLY_CPU`
_CPU_FLAG = lazyre.compile(r"(?:(?:use|force|only|run_on|on)_)?cpu(?:_only)?", re.I)
# Decorators (and marks) that skip a test, or refuse to run a function, unless a CUDA GPU is present.
_GPU_ONLY_DECORATOR = lazyre.compile(
    r"skip_?if_?(no|lt_x|not)_?(cuda|gpu)s?|skip_?unless_?(cuda|gpu)s?|requires?_?(cuda|gpus?|multi_?gpu|nccl)"
    r"|needs?_?(cuda|gpus?)|only_?cuda|(cuda|gpu)_?only|(cuda|gpus?)_?required|requires?_?(cuda|gpu)_?\w*",
    re.I,
)
# `@pytest.mark.gpu`: a marker the project's conftest deselects without a GPU
_GPU_MARKER = lazyre.compile(r"(cuda|gpus?|multi_?gpus?)", re.I)
# `RunIf(min_cuda_gpus=1)`, `RunIf(min_gpus=2)`: the keyword says it, whatever the helper's name
_MIN_GPUS_KEYWORD = lazyre.compile(r"min_(cuda_)?gpus?|min_cuda_devices?|num_gpus", re.I)
_SKIP_IF = frozenset({"skipif", "skip_if"})
_SKIP_UNLESS = frozenset({"skipunless", "skip_unless"})
_AUTOGRAD_FUNCTION = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
_CPP_EXTENSION_LOADERS = frozenset({"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"})
_TORCH_OPS_BUILTIN = frozenset({"aten", "prims", "quantized", "_quantized", "higher_order", "profiler"})
# an imported module that is a compiled (CUDA) extension: `from . import _C`, `import fused_adam_cuda`
_EXTENSION_MODULE = lazyre.compile(r"(^|[._])(_C|_ext|ext|cuda|kernels?|triton|_?cuda_\w+|\w+_cuda)($|[._])")


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


def literal_truth(test: cst.BaseExpression) -> int:
    """+1 when ``test`` is always true, -1 when it is never true, written so in the code itself
    (``if False:``, ``if 0:``, ``if os.path.isfile(p) and False:``, ``a if True else b``): the
    author switched a branch off by hand, and a branch that never runs crashes nothing. 0 otherwise."""
    if isinstance(test, cst.Name):
        return {"True": 1, "False": -1, "None": -1}.get(test.value, 0)
    if isinstance(test, cst.Integer):
        return 1 if test.evaluated_value else -1
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -literal_truth(test.expression)
    if isinstance(test, cst.BooleanOperation):
        left, right = literal_truth(test.left), literal_truth(test.right)
        if isinstance(test.operator, cst.And):
            return -1 if -1 in (left, right) else (1 if left == right == 1 else 0)
        return 1 if 1 in (left, right) else (-1 if left == right == -1 else 0)
    return 0


# the node types a guard can be spelled as (anything else, a subscript, a literal, arithmetic, is 0)
_POLARITY_TYPES = frozenset({cst.UnaryOperation, cst.BooleanOperation, cst.IfExp, cst.Call, cst.Attribute,
                             cst.Name, cst.Comparison})


def guard_polarity(facts, test: cst.BaseExpression) -> int:
    """+1 when ``test`` being true implies CUDA is usable, -1 when its negation does, else 0.
    Memoised per test node in the file's facts (many questions ask it of the same tests), except
    while a project function's answer is being read (a cycle there stops short) and while the
    file's distributed model is being built (its answers read the model's earlier parts)."""
    if type(test) not in _POLARITY_TYPES:
        return 0
    state = facts.__dict__
    if state.get("_answering_now") or state.get("_building_model"):
        return _guard_polarity(facts, test)
    memo = state.get("_polarity")
    if memo is None:
        memo = state["_polarity"] = {}
    hit = memo.get(test)  # (keyed by the node itself: the memo keeps it alive, so no id is reused)
    if hit is None:
        hit = memo[test] = _guard_polarity(facts, test)
    return hit


def _guard_polarity(facts, test: cst.BaseExpression) -> int:
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
        if (q or dotted(test.func) or "").endswith((".cuda.is_available", ".cuda.device_count")):
            return 1  # a torch-compatible package's or CUDA binding's own check (`cupy.cuda.is_available()`)
        if q is None and not test.args:
            name = _callee(test)
            returned = _answering_functions(facts).get(name) if name in _defined_names(facts) else None
            asking = facts.__dict__.setdefault("_answering_now", set())
            if returned is not None and name not in asking:
                # `self.use_gpu()` whose body is `return len(self.opt.gpu_ids) > 0`
                asking.add(name)
                try:
                    if not isinstance(returned, _EarlyFalse):
                        return guard_polarity(facts, returned)
                    if guard_polarity(facts, returned.expression) == -1:
                        return 1
                    # (else what follows may still know it: `is_dist_avail_and_initialized()`)
                finally:
                    asking.discard(name)
        if q == "torch.distributed.is_initialized" or (not (q or "").startswith("torch.") and _callee(test) in distributed_model(facts).initialized_functions):
            # NCCL is the program's only process group: initialised means on GPUs
            return 1 if distributed_model(facts).nccl_only else 0
        if isinstance(test.func, cst.Name) and test.func.value == "isinstance" and len(test.args) == 2:
            # `isinstance(x.data, torch.cuda.FloatTensor)`: the value is a CUDA tensor, so CUDA is up
            kinds = test.args[1].value
            elems = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
            quals = [facts.qualname(e) or "" for e in elems]
            if quals and all(q.startswith("torch.cuda.") and q.endswith("Tensor") for q in quals):
                return 1
            return 0
        if (isinstance(test.func, cst.Attribute) and test.func.attr.value == "startswith" and len(test.args) == 1
                and (string_value(test.args[0].value) or "").lower() in ("cuda", "gpu")
                and (_is_device_expr(facts, test.func.value) or isinstance(test.func.value, (cst.Name, cst.Attribute)))):
            return 1  # `device.startswith("cuda")`: the CUDA device was chosen
        if (isinstance(test.func, cst.Name) and test.func.value in ("all", "any") and len(test.args) == 1
                and isinstance(test.args[0].value, (cst.List, cst.Tuple))):
            # `all([x.is_cuda, ...])` is an `and`, `any([...])` an `or`
            pols = [guard_polarity(facts, e.value) for e in test.args[0].value.elements if isinstance(e, cst.Element)]
            if test.func.value == "all":
                return 1 if 1 in pols else 0
            return 1 if pols and all(p == 1 for p in pols) else 0
        return 0
    if isinstance(test, cst.Attribute) and test.attr.value == "is_cuda" and _module_placement(test.value):
        return 1  # `next(self.parameters()).is_cuda`: the model lives on a GPU, so CUDA is up
    if isinstance(test, (cst.Name, cst.Attribute)):
        d = dotted(test)
        if d is None:
            return 0
        pol = _flag_polarity(facts, test, d)
        if pol and isinstance(test, cst.Name) and _switch_value(facts, test) is (pol == 1):
            return 0  # `use_cuda = True` set in the code (or passed so by every call): the CUDA branch always runs
        return pol
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comp = test.comparisons[0]
        left, right, op = test.left, comp.comparator, comp.operator
        if isinstance(op, (cst.In, cst.NotIn)) and (string_value(left) or "").lower() in ("cuda", "gpu") and (
                _is_device_expr(facts, right) or isinstance(right, (cst.Name, cst.Attribute))):
            # `if "cuda" in device:` (a device string, `str(x.device)`): the CUDA device was chosen
            return 1 if isinstance(op, cst.In) else -1
        for a, b, o in ((left, right, op), (right, left, None)):
            if isinstance(a, cst.Call) and facts.is_torch(a.func, "torch.cuda.device_count"):
                if o is None:
                    flipped = _FLIP.get(type(op))
                    o = flipped() if flipped is not None else op
                return _count_polarity(o, b)
        for a, b in ((left, right), (right, left)):
            sv = string_value(b)
            if sv is None and isinstance(b, cst.Call) and len(b.args) == 1 and facts.is_torch(b.func, "torch.device"):
                sv = string_value(b.args[0].value)  # `device == torch.device("cuda")`: as the string
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
        for a, b, o in ((left, right, op), (right, left, None)):
            if o is None:
                flipped = _FLIP.get(type(op))
                o = flipped() if flipped is not None else op
            pol = _gpu_option_polarity(facts, a, o, b) or _world_size_polarity(facts, a, o, b)
            if pol:
                return pol
            # `spect.type() == "torch.cuda.HalfTensor"`: the value is a CUDA tensor
            sv = string_value(b)
            if (sv is not None and sv.startswith("torch.cuda.") and isinstance(a, cst.Call) and not a.args
                    and isinstance(a.func, cst.Attribute) and a.func.attr.value == "type"):
                if isinstance(o, (cst.Equal, cst.Is)):
                    return 1
                if isinstance(o, (cst.NotEqual, cst.IsNot)):
                    return -1
        pol = _switch_compared(facts, left, op, right)
        if pol:
            return pol
        if isinstance(op, (cst.Equal, cst.Is, cst.NotEqual, cst.IsNot)):
            for b in (right, left):
                d = dotted(b) if isinstance(b, cst.Attribute) else None
                last = d.rsplit(".", 1)[-1] if d else ""
                if last and _CONSTANT_FLAG.fullmatch(last) and _NAMEISH_FLAG.search(last):
                    # `state.distributed_type == DistributedType.MULTI_GPU`, `kind is Backend.CUDA`
                    return 1 if isinstance(op, (cst.Equal, cst.Is)) else -1
    return 0


def _leaf_key(node: cst.CSTNode) -> str:
    d = dotted(node)
    return d if d is not None else cst.Module([]).code_for_node(node.with_changes(lpar=(), rpar=())) \
        if hasattr(node, "lpar") else cst.Module([]).code_for_node(node)


def _formula(test: cst.BaseExpression, leaves: dict, polarity) -> tuple:
    """``test`` as ``("and"|"or", a, b)``, ``("not", a)`` or ``("leaf", key)``, noting each
    leaf's guard polarity in ``leaves``."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return ("not", _formula(test.expression, leaves, polarity))
    if isinstance(test, cst.BooleanOperation):
        op = "and" if isinstance(test.operator, cst.And) else "or"
        return (op, _formula(test.left, leaves, polarity), _formula(test.right, leaves, polarity))
    key = _leaf_key(test)
    pol = polarity(test)
    if leaves.get(key, pol) != pol:
        pol = 0  # (one spelling read two ways: it says nothing)
    leaves[key] = pol
    return ("leaf", key)


def _leaf_nodes(test: cst.BaseExpression):
    """The parts ``_formula`` splits ``test`` into."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        yield from _leaf_nodes(test.expression)
    elif isinstance(test, cst.BooleanOperation):
        yield from _leaf_nodes(test.left)
        yield from _leaf_nodes(test.right)
    else:
        yield test


def _holds(f: tuple, values: dict) -> bool:
    if f[0] == "leaf":
        return values[f[1]]
    if f[0] == "not":
        return not _holds(f[1], values)
    if f[0] == "and":
        return _holds(f[1], values) and _holds(f[2], values)
    return _holds(f[1], values) or _holds(f[2], values)


_PATH_LEAVES = 8


def path_implies_cuda(path: list, polarity) -> bool:
    """The enclosing ``if`` branches (``[(test, 1 | -1)]``: the test holds, or fails) leave no
    way to get here without CUDA, by elimination: ``if not cuda and not mps: (CPU) elif
    args.gpu is not None and cuda: ... elif mps: ... else: model.cuda()`` reaches the ``else``
    only with CUDA. Each test is split into its ``and`` / ``or`` / ``not`` parts; a part whose
    truth implies CUDA (guard polarity 1) is taken false, since CUDA is not there, and every
    other part may be either: where no choice makes every branch on the way taken, the
    branch runs only with CUDA. (A spelling is one value along the way: the tests of one
    ``if``/``elif`` chain are read at once.)"""
    if not any(polarity(leaf) == 1 for test, _ in path for leaf in _leaf_nodes(test)):
        return False  # nothing on the way says anything about CUDA (asked before spelling any part)
    leaves: dict = {}
    formulas = [(_formula(test, leaves, polarity), want == 1) for test, want in path]
    if 1 not in leaves.values():
        return False  # nothing on the way says anything about CUDA
    free = [k for k, pol in leaves.items() if pol != 1]
    if len(free) > _PATH_LEAVES:
        return False
    values = {k: False for k, pol in leaves.items() if pol == 1}
    for bits in range(1 << len(free)):
        for i, k in enumerate(free):
            values[k] = bool(bits >> i & 1)
        if all(_holds(f, values) == want for f, want in formulas):
            return False  # a way here without CUDA
    return True


def _switch_compared(facts, a: cst.CSTNode, op: cst.BaseCompOp, b: cst.CSTNode) -> int:
    """``args.cuda > 0``, ``use_gpu == 1``, ``opt.cuda is True``, ``args.cuda != 0``: a user's
    switch compared with a number or a bool says what the switch says (``== 0`` its negation)."""
    if not isinstance(a, (cst.Name, cst.Attribute)):
        return 0
    n = _int(b)
    if n is None and isinstance(b, cst.Name) and b.value in ("True", "False"):
        n = 1 if b.value == "True" else 0
    if n is None:
        return 0
    d = dotted(a)
    pol = _flag_polarity(facts, a, d) if d is not None else 0
    if not pol:
        return 0
    t = type(op)
    if t in (cst.GreaterThan,) and n >= 0 or t is cst.GreaterThanEqual and n >= 1:
        return pol
    if t in (cst.Equal, cst.Is):
        return pol if n else -pol
    if t in (cst.NotEqual, cst.IsNot):
        return -pol if n else pol
    return 0


# a user's GPU option: a count (`num_gpu`, `args.ngpu`, `n_gpus`, `len(gpu_ids)`) or an id (`args.gpu`,
# `gpu_id`); compared with a number or `None` it is the user's explicit choice of a GPU, like `args.cuda`
_GPU_OPTION = lazyre.compile(r"(?:^|_)(?:n_?|num_?)?gpus?(?:_?(?:ids?|index|count|num))?$|^(?:n|num)_?gpus?$|^ngpus?$", re.I)
_GPU_COUNT = lazyre.compile(r"^(?:n_?|num_?)gpus?|gpus?_?(?:count|num)$|^ngpus?$", re.I)
_GPU_LIST = lazyre.compile(r"gpus?_?ids$|gpus$", re.I)


def _gpu_option_polarity(facts, a: cst.CSTNode, op: cst.BaseCompOp, b: cst.CSTNode) -> int:
    """``args.gpu is not None``, ``num_gpu == 1``, ``args.ngpu > 0``, ``len(gpu_ids) > 0``,
    ``gpu_id >= 0``: +1 when the comparison says the user chose a GPU, -1 for the opposite."""
    count = element = False
    if isinstance(a, cst.Call) and isinstance(a.func, cst.Name) and a.func.value == "len" and len(a.args) == 1:
        a, count = a.args[0].value, True
    elif (isinstance(a, cst.Subscript) and len(a.slice) == 1 and isinstance(a.slice[0].slice, cst.Index)
          and _int(a.slice[0].slice.value) is not None):
        a, element = a.value, True  # `opt.gpus[0] >= 0`: the first GPU id of the option (-1: the CPU)
    if not isinstance(a, (cst.Name, cst.Attribute)) or facts.is_torch(a, *facts.aliases.values()):
        return 0
    d = dotted(a)
    last = d.rsplit(".", 1)[-1] if d else ""
    if not last or not _GPU_OPTION.search(last):
        return 0
    t = type(op)
    if isinstance(b, cst.Name) and b.value == "None" and not count:
        if t in (cst.IsNot, cst.NotEqual):
            return 1
        return -1 if t in (cst.Is, cst.Equal) else 0
    n = _int(b)
    if n is None and isinstance(b, cst.UnaryOperation) and isinstance(b.operator, cst.Minus):
        m = _int(b.expression)
        n = -m if m is not None else None
    typed = n is None and not count and re.fullmatch(r"-?\d+", string_value(b) or "") is not None
    if typed:
        n = int(string_value(b))  # `args.visible_gpus != '-1'`: the option as typed, -1 its "no GPU"
    if n is None:
        return 0
    if not typed and not element and (count or _GPU_COUNT.search(last) or _GPU_LIST.search(last)):
        return _count_polarity(op, b) if n >= 0 else 0
    # an id: -1 (or any negative) is the usual "no GPU" value
    if t is cst.GreaterThanEqual:
        return 1 if n >= 0 else 0
    if t is cst.GreaterThan:
        return 1 if n >= -1 else 0
    if t is cst.NotEqual:
        return 1 if n < 0 else 0
    if t is cst.Equal:
        return 1 if n >= 0 else -1
    if t is cst.LessThan:
        return -1 if n <= 0 else 0
    return 0


def _world_size_polarity(facts, a: cst.CSTNode, op: cst.BaseCompOp, b: cst.CSTNode) -> int:
    """In a program whose process group is NCCL only, a world size above one means the
    program runs distributed, on GPUs: ``world_size > 1`` is +1, ``get_world_size() == 1`` -1."""
    n = _int(b)
    if n is None or not distributed_model(facts).nccl_only or not is_world_size(facts, a):
        return 0
    t = type(op)
    if t in (cst.GreaterThan, cst.NotEqual):
        return 1 if n == 1 else 0
    if t is cst.GreaterThanEqual:
        return 1 if n == 2 else 0
    if t in (cst.Equal, cst.LessThanEqual):
        return -1 if n == 1 else 0
    if t is cst.LessThan:
        return -1 if n == 2 else 0
    return 0


def is_world_size(facts, node: cst.CSTNode) -> bool:
    """``dist.get_world_size()``, a name ending in ``world_size``, or a call of a function of
    the file that returns either (or 1 when the process group is not initialised)."""
    if isinstance(node, cst.Call):
        if facts.qualname(node.func) == "torch.distributed.get_world_size":
            return True
        name = _callee(node)
        return name is not None and name in distributed_model(facts).world_size_functions
    d = dotted(node)
    return d is not None and d.rsplit(".", 1)[-1].lower().endswith("world_size")


def _answering_functions(facts) -> dict:
    """Functions and methods of the file whose body is one ``return <test>`` (a docstring
    aside), by name: a call of one asks its test (``def use_gpu(self): return
    len(self.opt.gpu_ids) > 0``). A name defined twice with different bodies answers nothing.
    Computed once per file."""
    found = getattr(facts, "_answering_functions", None)
    if found is None:
        found = facts._answering_functions = {}  # registered first: a body may call another
        seen: dict = {}
        for n in _definitions(facts.module):
            if type(n) is not cst.FunctionDef or not isinstance(n.body, cst.IndentedBlock):
                continue
            body = [st for st in n.body.body if not (
                isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and isinstance(st.body[0], cst.Expr)
                and isinstance(st.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))]
            ret = None
            if (len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1
                    and isinstance(body[0].body[0], cst.Return) and body[0].body[0].value is not None):
                ret = body[0].body[0].value
            elif len(body) > 1 and _falsy_return_if(body[0]):
                # `if not torch.cuda.is_available(): return False` first, whatever follows: a truthy
                # answer means CUDA is usable (asked as `_EarlyFalse`, see guard_polarity)
                ret = _EarlyFalse(test=body[0].test)
            name = n.name.value
            if name in seen and (ret is None or seen[name] is None or type(ret) is not type(seen[name])
                                 or facts.module.code_for_node(ret) != facts.module.code_for_node(seen[name])):
                seen[name] = None
            elif name not in seen:
                seen[name] = ret
        found.update((k, v) for k, v in seen.items() if v is not None and not (
            isinstance(v, cst.Call) and _callee(v) == k))
    return found


_DEF_NAME = lazyre.compile(rb"\bdef\s+([^\s(:\[]+)")  # (any identifier, non-ASCII ones too; `def f[T](...)`)


def _defined_names(facts) -> frozenset:
    """The names the file's text defines with ``def`` (a superset: one scan of the bytes per
    file), so that a call of a function the file does not define never builds the answers."""
    got = facts.__dict__.get("_defined_names")
    if got is None:
        got = facts.__dict__["_defined_names"] = frozenset(
            m.decode("utf-8", "replace") for m in _DEF_NAME.findall(facts.source))
    return got


def _definitions(module: cst.Module):
    """Every function and class definition of the module, nested ones included, in source
    order: a walk over statements only (a definition is never inside an expression)."""
    for st in statements(module):
        if type(st) in (cst.FunctionDef, cst.ClassDef):
            yield st
            yield from _definitions(st.body)


class _EarlyFalse(cst.UnaryOperation):
    """The answer of a function that first returns something falsy when ``test`` holds: it
    answers for CUDA only where ``test`` true says CUDA is not usable (polarity -1)."""

    def __init__(self, test: cst.BaseExpression) -> None:
        super().__init__(operator=cst.Not(), expression=test)


def _falsy_return_if(st: cst.BaseStatement) -> bool:
    """``if <test>: return`` / ``return False`` / ``return None`` / ``return 0``, no ``else``."""
    if not (isinstance(st, cst.If) and st.orelse is None):
        return False
    inner = st.body.body if isinstance(st.body, cst.IndentedBlock) else [st.body]
    if len(inner) != 1:
        return False
    small = inner[0].body if isinstance(inner[0], (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else []
    if len(small) != 1 or not isinstance(small[0], cst.Return):
        return False
    v = small[0].value
    return v is None or (isinstance(v, cst.Name) and v.value in ("False", "None")) or (
        isinstance(v, cst.Integer) and v.value == "0")


def _module_placement(node: cst.CSTNode) -> bool:
    """``next(self.parameters())`` / ``next(model.buffers())``: where a model's weights are."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "next"
            and node.args):
        return False
    inner = node.args[0].value
    return (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute)
            and inner.func.attr.value in ("parameters", "buffers"))


def _flag_polarity(facts, test: cst.BaseExpression, d: str) -> int:
    """A name or attribute used as a test: an availability flag, a user's switch (``args.cuda``,
    ``use_gpu``, ``args.cpu``), a CUDA tensor's ``is_cuda``."""
    if d in facts.guard_flags or d.endswith(".is_cuda") or d in distributed_model(facts).nccl_flags:
        return 1
    last = d.rsplit(".", 1)[-1]
    if _CPU_FLAG.fullmatch(last) and not facts.is_torch(test, *facts.aliases.values()):
        return -1  # `if not args.cpu:` / `if use_cpu:`: the user's choice of the CPU
    if _NAMEISH_FLAG.search(last) and (not facts.is_torch(test, *facts.aliases.values())
                                       or _CONSTANT_FLAG.fullmatch(last)):
        # `TEST_CUDA`, `HAS_GPU` imported from a (torch) helper module are flags too
        # a user switch such as `args.cuda`, `use_gpu`: a deliberate choice
        return -1 if last.lower().startswith("no_") else 1
    return 0


def _switch_value(facts, name: cst.Name, depth: int = 4) -> Optional[bool]:
    """The value the switch ``name`` (a read of it) holds whatever the program is run with, or
    None when whoever runs the program may choose it. Such a switch is set in the code: the
    program gets the branch it selects, so ``if use_cuda: x = x.cuda()`` crashes without CUDA when
    it says True (and never runs when it says False). It is
    - a module-level name bound once, to ``True`` or ``False`` (``use_cuda = True``), read at
      module level or from a function that does not bind it itself; or such a name of a project
      module the file imports (``from constants import *``), bound nowhere in the file;
    - a parameter of a script's function every call of which, in the file, passes the same such
      value: a literal, the parameter's default, or another such switch (``load_model(cfg,
      gpu=True)``, ``gpu = True`` in the ``__main__`` block, then ``load(cfg, gpu)``).
    A switch read from the command line, a config or an availability check, a parameter of a
    function called from elsewhere or passed around, is the user's choice."""
    if depth <= 0:
        return None
    chain = _switch_scopes(facts).get(id(name))
    if chain is None or (chain and isinstance(chain[0], (cst.ClassDef, cst.Lambda))):
        return None  # (read in a class body or a lambda: not followed)
    # the function whose name it reads: the innermost that binds it (a class body binds nothing
    # its methods can read), else the module
    binder = next((fn for fn in chain if isinstance(fn, cst.FunctionDef) and name.value in facts.assigned_in.get(fn, ())),
                  None)
    if binder is not None:
        return _param_switch(facts, binder, name.value, depth) if binder is chain[0] else None
    values = facts.values
    value = _bool(values.sole_value(name.value, None)) if values is not None else None
    if value is None and not any(name.value in names for names in facts.rebound.values()) and not any(
            name.value in names for scope, names in facts.assigned_in.items() if scope is not None):
        # bound in the file only by an import, if at all: a project module it imports may set it
        # once (`USE_CUDA = True` in constants.py, `from constants import *`)
        value = next((v == "1" for k, _, v in (f.partition("=") for f in facts.project.switches)
                      if k == name.value), None)
    if value is None or _setting_cell(facts, name.value) or any(
            name.value in names and _declares_global(scope, name.value)
            for scope, names in facts.assigned_in.items() if isinstance(scope, cst.FunctionDef)):
        return None  # (a function that declares it `global` and binds it may change it at run time)
    return value


def switch_truth(facts, test: cst.BaseExpression, fn: Optional[cst.FunctionDef]) -> int:
    """+1 / -1 when ``test`` is a parameter of a script's function that every call in the file
    leaves at, or sets to, the same literal (``_param_switch``: ``def cost(x, unnormalize=False)``
    never called with ``unnormalize``), or its ``not``; else 0 (``fn``: the function the test is
    in). A branch that value never selects never runs. A module-level ``resume = False`` is not
    one: it is the knob a user flips."""
    sign = 1
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, sign = test.expression, -sign
    if not isinstance(test, cst.Name) or test.value in ("True", "False", "None"):
        return 0
    if not (isinstance(fn, cst.FunctionDef) and any(p.name.value == test.value for p in (
            *fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params))):
        return 0  # (a module-level `resume = False` is a knob the user sets, as a flag is)
    v = _param_switch(facts, fn, test.value, 4)
    return 0 if v is None else (sign if v else -sign)


def code_set_switch(facts, test: cst.BaseExpression) -> Optional[bool]:
    """The truth of ``test`` when it is a switch the code sets (``_switch_value``: ``use_cuda =
    True`` once at module level, a script's parameter every call sets so) or its ``not``; None
    when whoever runs the program may choose it."""
    sign = True
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, sign = test.expression, not sign
    if type(test) is not cst.Name:
        return None
    v = _switch_value(facts, test)
    return None if v is None else v == sign


def _declares_global(fn: cst.FunctionDef, name: str) -> bool:
    return any(isinstance(n, cst.Global) and any(g.name.value == name for g in n.names)
               for n in nodes(fn, into_scopes=True))


def _switch_scopes(facts) -> dict:
    """id(Name) -> the scopes (functions, classes, lambdas) around it, innermost first, for the
    names that look like switches (read once per file, when a switch is first asked about)."""
    return _module_names(facts)[0]


def _module_names(facts) -> tuple:
    """``(switch scopes, calls, uses)`` of the file, read in one walk of every node in source
    order (see :func:`_switch_scopes` and :func:`_name_uses`)."""
    got = facts.__dict__.get("_module_names")
    if got is None:
        scopes: dict = {}
        calls: dict = {}
        uses: dict = {}
        stack: list = [(facts.module, ())]
        while stack:
            node, chain = stack.pop()
            t = type(node)
            if t is cst.Name:
                v = node.value
                uses[v] = uses.get(v, 0) + 1
                if _NAMEISH_FLAG.search(v) or _CPU_FLAG.fullmatch(v):
                    scopes[id(node)] = chain
                continue
            if t is cst.Call and type(node.func) is cst.Name:
                calls.setdefault(node.func.value, []).append(node)
            elif t is cst.SimpleString:
                v = string_value(node)
                if v is not None:
                    uses[v] = uses.get(v, 0) + 1
            inner = (node, *chain) if t is cst.FunctionDef or t is cst.ClassDef or t is cst.Lambda else chain
            stack.extend((child, inner) for child in reversed(children(node, trivia=False)))
        got = facts.__dict__["_module_names"] = (scopes, calls, uses)
    return got


def _param_switch(facts, fn: cst.CSTNode, param: str, depth: int) -> Optional[bool]:
    """``param`` of the script's module-level function ``fn``, never rebound there: the one value
    every call of ``fn`` in the file gives it (see _switch_value). (Answered once per file.)"""
    cache = facts.__dict__.setdefault("_param_switches", {})
    key = (id(fn), param, depth)
    if key not in cache:
        cache[key] = None  # (a switch that passes itself on answers nothing)
        cache[key] = _param_switch_uncached(facts, fn, param, depth)
    return cache[key]


def _param_switch_uncached(facts, fn: cst.CSTNode, param: str, depth: int) -> Optional[bool]:
    module = facts.module
    if not is_script(facts) or not isinstance(fn, cst.FunctionDef) or param in facts.rebound.get(fn, ()) \
            or not any(s is fn for s in module.body):
        return None  # (the cheap questions first: most files are libraries)
    positional = [*fn.params.posonly_params, *fn.params.params]
    declared = next((p for p in (*positional, *fn.params.kwonly_params) if p.name.value == param), None)
    if declared is None:
        return None
    index = next((i for i, p in enumerate(positional) if p is declared), None)
    calls = _calls_of(facts, fn)
    if not calls:
        return None
    seen = set()
    for call in calls:
        if any(a.star for a in call.args):
            return None  # `f(*args, **kw)`: what it passes is not spelled here
        arg = call_arg(call, index, param)
        value = arg.value if arg is not None else declared.default
        if value is None:
            return None
        v = _bool(value)
        if v is None and isinstance(value, cst.Name):
            v = _switch_value(facts, value, depth - 1)
        if v is None:
            return None
        seen.add(v)
    return seen.pop() if len(seen) == 1 else None


def is_script(facts) -> bool:
    """The file is a program, not a library whose functions others call: it has a ``__main__``
    block, or it runs work at its top (a notebook, an exported notebook) and no module of the
    project imports it."""
    got = facts.__dict__.get("_script")
    if got is None:
        module = facts.module
        got = facts.__dict__["_script"] = any(is_main_guard(s) for s in module.body) or (
            not is_library_module(module) and not facts.project.imported)
    return got


def _calls_of(facts, fn: cst.FunctionDef) -> Optional[list]:
    """The calls of module-level function ``fn`` in the file, or None when its name is also used
    otherwise (passed as a value, exported in ``__all__``, rebound): then others may call it."""
    name = fn.name.value
    calls, uses = _name_uses(facts)
    found = calls.get(name, [])
    rebound = any(name in names for names in facts.rebound.values())
    # (every use of the name, but the definition's own, is the callee of one of those calls)
    return found if uses.get(name, 0) - 1 == len(found) and not rebound else None


def _name_uses(facts) -> tuple:
    """``(calls, uses)`` of the file, read in one walk: ``calls`` maps a name to the calls
    ``name(...)``; ``uses`` counts every ``Name`` node spelling it (definitions included) and
    every string literal that equals it (``__all__``, ``getattr(mod, "f")``)."""
    return _module_names(facts)[1:]


_CELL_MARKER = "# devlint-cell-"  # (devlint.notebook joins a notebook's code cells with these comments)
_SETTINGS_MARKER_END = " settings"  # (and tags the cells of the notebook's settings section so)


def _cell_marker(lines) -> Optional[str]:
    return next((line.comment.value for line in lines if line.comment is not None
                 and line.comment.value.startswith(_CELL_MARKER)), None)


def notebook_cells(facts) -> list:
    """A notebook's code cells as ``(marker, statements)``: the marker comment that opens the cell
    and the module-level statements in it. Empty for a file that is not a notebook. (Read once.)"""
    out = facts.__dict__.get("_notebook_cells")
    if out is not None:
        return out
    out = facts.__dict__["_notebook_cells"] = []
    if _CELL_MARKER.encode() not in facts.source:
        return out
    for i, stmt in enumerate(facts.module.body):
        # (the comments above a module's first statement are the module's header)
        lead = list(stmt.leading_lines) if i else [*facts.module.header, *stmt.leading_lines]
        marker = _cell_marker(lead)
        if marker is not None or not out:
            out.append((marker, []))
        out[-1][1].append(stmt)
    return out


def _setting_cell(facts, name: str) -> bool:
    """In a notebook, ``name = True`` alone in a cell of its own: a setting the reader edits
    before running the cells below (tutorials say "set this to False without a GPU"), chosen as
    a command-line flag is, not code that runs whatever the reader wants."""
    for marker, stmts in notebook_cells(facts):
        for stmt in stmts:
            if (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                    and isinstance(stmt.body[0], cst.Assign) and len(stmt.body[0].targets) == 1
                    and isinstance(stmt.body[0].targets[0].target, cst.Name)
                    and stmt.body[0].targets[0].target.value == name):
                return marker is not None and len(stmts) == 1
    return False


def _settings_statements(facts) -> set:
    """In a notebook, the statements of the cells of its settings section (a markdown heading
    such as "Setting" or "Hyperparameters", see devlint.notebook) that only assign values: the
    notebook tells its reader to edit them before running the rest, so a CUDA device chosen there
    (``DEVICE = torch.device("cuda:0")``, ``Config(device="cuda")``) is the reader's choice, as a
    command-line flag is. A cell that also runs code, or moves a value there (``.cuda()``,
    ``.to(...)``), is no such setting."""
    out: set = set()
    for marker, stmts in notebook_cells(facts):
        if marker is None or not marker.endswith(_SETTINGS_MARKER_END):
            continue
        if all(_only_assigns(stmt) for stmt in stmts):
            out.update(stmts)
    return out


def _only_assigns(stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for s in stmt.body:
        if isinstance(s, cst.Expr) and isinstance(s.value, (cst.SimpleString, cst.ConcatenatedString)):
            continue  # a note
        if not isinstance(s, (cst.Assign, cst.AnnAssign)) or s.value is None:
            return False
        if any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _MOVES
               for n in nodes(s.value)):
            return False
    return True


_MOVES = frozenset({"cuda", "to", "cpu"})


def _bool(node: cst.CSTNode) -> Optional[bool]:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def _is_device_expr(facts, node: cst.CSTNode) -> bool:
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "str":
        return bool(node.args) and _is_device_expr(facts, node.args[0].value)
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "getattr"
            and len(node.args) in (2, 3) and string_value(node.args[1].value) == "type"):
        return True  # `getattr(dev, "type", "")`: `dev.type` read without failing on a non-device
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
    if name in marks or name in facts.project.gpu_decorators:
        return True  # (a decorator of the project whose wrapper calls the function only with CUDA)
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


def _runs_wrapped_only_with_cuda(facts, fn: cst.FunctionDef) -> bool:
    """``def deco(func)`` returning an inner function that calls ``func`` only where CUDA is usable:
    under an availability check, or after one that returns or raises without CUDA (a skip). The
    project index reads other modules' decorators the same way (``Summary.gpu_decorators``)."""
    params = fn.params.params
    if len(params) != 1 or fn.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) \
            or not isinstance(fn.body, cst.IndentedBlock):
        return False
    func = params[0].name.value
    inner = {d.name.value: d for d in fn.body.body if isinstance(d, cst.FunctionDef)}
    returned = [s.value.value for st in fn.body.body if isinstance(st, cst.SimpleStatementLine)
                for s in st.body if isinstance(s, cst.Return) and isinstance(s.value, cst.Name)]
    if len(returned) != 1 or returned[0] not in inner or not isinstance(inner[returned[0]].body, cst.IndentedBlock):
        return False
    body = list(inner[returned[0]].body.body)
    calls = 0
    for i, st in enumerate(body):
        if isinstance(st, cst.If):
            pol = _availability_check(facts, st.test)
            orelse = st.orelse.body if isinstance(st.orelse, cst.Else) else st.orelse
            if pol == -1 and ends_with_exit(st.body):
                return calls == 0 and _calls_name(body[i + 1:], func) > 0  # a skip: the rest is guarded
            if pol != 0:
                guarded, other = (st.body, orelse) if pol == 1 else (orelse, st.body)
                if other is not None and _calls_name([other], func):
                    return False
                calls += _calls_name([guarded], func) if guarded is not None else 0
                continue
        if _calls_name([st], func):
            return False
    return calls > 0


def _availability_check(facts, test: cst.BaseExpression) -> int:
    """+1 for ``torch.cuda.is_available()`` / ``torch.cuda.device_count() [> 0]``, -1 for its ``not``
    (read while the guard model is being built: no question that needs the model)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -_availability_check(facts, test.expression)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(
            test.comparisons[0].operator, (cst.GreaterThan, cst.GreaterThanEqual)):
        test = test.left
    if isinstance(test, cst.Call) and facts.qualname(test.func) in ("torch.cuda.is_available",
                                                                     "torch.cuda.device_count"):
        return 1
    return 0


def _calls_name(stmts, func: str) -> int:
    return sum(1 for st in stmts for n in nodes(st)
               if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == func)


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


_OOM_ERRORS = frozenset({"torch.cuda.OutOfMemoryError", "torch.OutOfMemoryError", "OutOfMemoryError"})
# what a handler for GPU memory running out says: "CUDA out of memory", "OOM", `is_oom(err)`
_OOM_WORDS = lazyre.compile(r"out of memory|out_of_memory|(?:^|[^A-Za-z])OOM(?:[^A-Za-z]|$)|(?:^|_)oom(?:_|$)")


def oom_handler(handler: cst.ExceptHandler) -> bool:
    """``except torch.cuda.OutOfMemoryError:``, or ``except RuntimeError:`` whose handler speaks of
    running out of memory (``if "out of memory" in str(e):``, ``is_oom_exception(err)``, a message
    saying OOM): the fallback of GPU work that ran out of GPU memory. It runs only where a GPU is,
    so what it moves back with ``.cuda()`` is on a GPU path."""
    t = handler.type
    if t is None:
        return False
    kinds = {dotted(k) for k in ([e.value for e in t.elements] if isinstance(t, cst.Tuple) else [t])}
    if kinds & _OOM_ERRORS:
        return True
    if "RuntimeError" not in kinds:
        return False
    for n in nodes(handler.body, into_scopes=False):
        if isinstance(n, cst.SimpleString) and _OOM_WORDS.search(n.value):
            return True
        if isinstance(n, cst.FormattedStringText) and _OOM_WORDS.search(n.value):
            return True
        if isinstance(n, cst.Call) and _OOM_WORDS.search((dotted(n.func) or "").rsplit(".", 1)[-1]):
            return True
    return False


# ---------------------------------------------------------------------------------
# statements that make sure the rest of their block runs with a GPU
# ---------------------------------------------------------------------------------

def expects_error(node: cst.With) -> bool:
    """``with pytest.raises(...)`` / ``with self.assertRaises(...)``: a test that wants its body to
    raise; a call there that fails without CUDA is what it checks, not a portability bug. Also
    ``with contextlib.suppress(Exception):``, the ``try`` of :func:`try_guards` spelled as a context:
    a failure without a GPU is swallowed, not a crash."""
    for item in node.items:
        call = item.item
        if isinstance(call, cst.Call):
            d = dotted(call.func) or ""
            if d in ("pytest.raises", "raises") or (d.startswith("self.") and d[5:] in _ASSERT_RAISES):
                return True
            if d.rsplit(".", 1)[-1] == "suppress" and call.args and all(
                    dotted(a.value) in _CAUGHT for a in call.args):
                return True  # `with contextlib.suppress(Exception):` is a `try`/`except Exception: pass`
    return False


_ASSERT_RAISES = frozenset({"assertRaises", "assertRaisesRegex", "assertRaisesRegexp"})


def _nccl_by_helper(facts, call: cst.Call) -> bool:
    """``setup(rank, world_size, "nccl")`` where ``setup`` (a project function the file imports,
    ``ProjectFacts.backend_helpers``) starts its process group with the backend it is handed."""
    name = call.func.value
    for entry in facts.project.backend_helpers:
        fn, index, param = entry.split(":")
        if fn == name:
            a = call_arg(call, int(index) if int(index) >= 0 else None, param)
            if a is not None and _backend(facts, a.value) == "nccl":
                return True
    return False


def cuda_mesh(facts, call: cst.Call) -> bool:
    """``init_device_mesh("cuda", (world_size,))``: a device mesh over the ranks' GPUs. It
    starts the default process group when none is up (NCCL, CUDA's backend) and sets each
    rank's CUDA device, so it raises without one; what follows runs on GPUs."""
    f = call.func
    name = f.attr.value if type(f) is cst.Attribute else f.value if type(f) is cst.Name else ""
    if name != "init_device_mesh" or (facts.qualname(f) or "").rsplit(".", 1)[0] not in _MESH_MODULES:
        return False
    a = call_arg(call, 0, "device_type")
    return a is not None and string_value(a.value) == "cuda"


_MESH_MODULES = frozenset({"torch.distributed.device_mesh", "torch.distributed"})


def _is_nccl_init(facts, call: cst.Call) -> bool:
    f = call.func
    if type(f) is cst.Attribute and not f.attr.value.endswith("init_process_group"):
        return False  # `x.y.other()`: resolving the name cannot change its last part
    q = facts.qualname(call.func) or dotted(call.func) or ""
    if not q.endswith("init_process_group"):
        return False
    if call in distributed_model(facts).gpu_inits:
        return True
    a = call_arg(call, 0, "backend")
    return a is not None and _backend(facts, a.value) == "nccl"


# the platform tests that pick a process-group backend: NCCL does not exist on Windows
_OS_TESTS = ("os.name", "sys.platform", "platform.system")


def os_backend(value) -> Optional[str]:
    """``"gloo" if os.name == "nt" else "nccl"`` (or ``sys.platform`` / ``platform.system()``):
    the backend everywhere but Windows, where NCCL does not exist; not a CPU fallback."""
    if type(value) is not cst.IfExp:
        return None
    a, b = string_value(value.body), string_value(value.orelse)
    if a is None or b is None or {a.lower(), b.lower()} != {"gloo", "nccl"}:
        return None
    names = {dotted(n) for n in nodes(value.test) if isinstance(n, (cst.Attribute, cst.Name))}
    return "nccl" if names & set(_OS_TESTS) else None


def _backend(facts, value: cst.CSTNode) -> Optional[str]:
    """The backend a process group is initialised with: a literal, or a name / option the
    file binds only to one literal (``args.dist_backend = "nccl"``, ``--dist-backend`` whose
    default is ``"nccl"``, a parameter defaulting to it), or chosen by the platform only."""
    if type(value) is cst.IfExp:
        return os_backend(value)
    sv = string_value(value)
    if sv is not None:
        return "nccl" if sv.lower().startswith("nccl") else sv.lower()
    d = dotted(value)
    if d is None:
        return None
    bound = distributed_model(facts).string_bindings.get(d.rsplit(".", 1)[-1])
    if bound is None or len(bound) != 1:
        return None
    (b,) = bound
    return "nccl" if b.startswith("nccl") else b


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


# Lightning launchers: built with a GPU accelerator, they refuse to start on a machine without one
_LAUNCHERS = frozenset({"Trainer", "Fabric", "LightningLite"})
_LAUNCHER_WORD = lazyre.compile(rb"Trainer|Fabric|LightningLite")


def _names_launcher(facts) -> bool:
    """The file spells a Lightning launcher's name (read once per file)."""
    got = facts.__dict__.get("_names_launcher")
    if got is None:
        got = facts.__dict__["_names_launcher"] = _LAUNCHER_WORD.search(facts.source) is not None
    return got


def gpu_launcher(facts, call: cst.Call, classes: Optional[dict] = None) -> bool:
    """``pl.Trainer(accelerator="gpu")``, ``Fabric(accelerator="cuda")``, ``Trainer(gpus=2)``, or
    a ``LightningLite`` subclass of the file built so: construction raises without a GPU."""
    name = (dotted(call.func) or "").rsplit(".", 1)[-1]
    if name not in _LAUNCHERS and not (classes and name in classes):
        return False
    acc = call_arg(call, None, "accelerator")
    if acc is not None:
        sv = (string_value(acc.value) or "").lower()
        return sv in ("gpu", "cuda")
    gpus = call_arg(call, None, "gpus")
    return gpus is not None and isinstance(gpus.value, cst.Integer) and int(gpus.value.value, 0) > 0


def _small_ensures(facts, small: cst.BaseSmallStatement, ensuring: set) -> bool:
    t = type(small)  # concrete node classes: cheaper than isinstance() against LibCST's ABCs
    if t is cst.Assert:
        return guard_polarity(facts, small.test) == 1 or small in device_asserts(facts)[0]
    value = small.value if t is cst.Expr or t is cst.Assign or t is cst.AnnAssign else None
    if type(value) is not cst.Call:
        return False
    if _is_nccl_init(facts, value) or _nccl_collective(facts, value) or _pin(facts, value):
        return True
    if type(value.func) in (cst.Name, cst.Attribute) and cuda_mesh(facts, value):
        return True  # `init_device_mesh("cuda", (ws,))`: a process group over the ranks' GPUs
    if type(value.func) is cst.Name and _nccl_by_helper(facts, value):
        return True  # `setup(rank, world_size, "nccl")`: a project helper starts the NCCL group
    if type(value.func) in (cst.Name, cst.Attribute) and _names_launcher(facts) and gpu_launcher(facts, value):
        return True  # `trainer = pl.Trainer(accelerator="gpu")`: what follows runs with a GPU
    if t is cst.Expr and type(value.func) is cst.Attribute and value.func.attr.value in _RAISES_WITHOUT_CUDA:
        return True  # `unet.enable_xformers_memory_efficient_attention()`: diffusers raises without CUDA
    if facts.mentions(ASKS_FLASH_WORD) and requests_flash_attention(value):
        return True  # `from_pretrained(..., attn_implementation="flash_attention_2")` raises without a GPU
    return _calls_ensuring(facts, value, ensuring)


_DEVICE_QUERIES = frozenset({"torch.cuda.get_device_name", "torch.cuda.get_device_capability",
                             "torch.cuda.get_device_properties"})


def _queries_device(facts, node: cst.CSTNode) -> bool:
    return any(type(n) is cst.Call and facts.qualname(n.func) in _DEVICE_QUERIES for n in nodes(node))


def device_asserts(facts) -> tuple:
    """(asserts that check which GPU the program runs on, the statements binding the query they
    check): ``assert torch.cuda.get_device_capability() >= (8, 9)``, or ``name =
    torch.cuda.get_device_name(0)`` then ``assert "B200" in name``. The program states that it
    needs that GPU: without one it stops there, as ``assert torch.cuda.is_available()`` does,
    and the query feeding the assert is part of that check. (Read once per file.)"""
    got = facts.__dict__.get("_device_asserts")
    if got is not None:
        return got
    asserts: set = set()
    queries: set = set()
    if facts.mentions(b"get_device_") and facts.mentions(b"assert"):
        for n in nodes(facts.module, into_scopes=True):
            if type(n) not in (cst.Module, cst.IndentedBlock):
                continue
            body = list(n.body)
            for i, st in enumerate(body):
                small = st.body[0] if type(st) is cst.SimpleStatementLine and len(st.body) == 1 else None
                if type(small) is cst.Assert and _queries_device(facts, small.test):
                    asserts.add(small)
                    continue
                if type(small) is not cst.Assign or len(small.targets) != 1 \
                        or type(small.targets[0].target) is not cst.Name or not _queries_device(facts, small.value):
                    continue
                name = small.targets[0].target.value
                nxt = body[i + 1] if i + 1 < len(body) else None
                check = nxt.body[0] if type(nxt) is cst.SimpleStatementLine and len(nxt.body) == 1 else None
                if type(check) is cst.Assert and any(type(x) is cst.Name and x.value == name for x in nodes(check.test)):
                    asserts.add(check)
                    queries.add(st)
    got = facts.__dict__["_device_asserts"] = (frozenset(asserts), frozenset(queries))
    return got


ASKS_FLASH_WORD = b"flash_attention_"
_FLASH_IMPLEMENTATIONS = frozenset({"flash_attention_2", "flash_attention_3"})


def requests_flash_attention(call: cst.Call) -> bool:
    """``AutoModel.from_pretrained(name, attn_implementation="flash_attention_2", ...)`` (also
    ``use_flash_attention_2=True``, and further calls chained on it): transformers' check of the
    request raises without a usable GPU (``_check_and_enable_flash_attn_2``: ImportError when
    ``flash_attn`` is missing, as on every CPU-only build; ValueError on a CUDA build with no GPU)."""
    node: cst.CSTNode = call
    while type(node) is cst.Call:
        for a in node.args:
            if a.keyword is None:
                continue
            if a.keyword.value == "attn_implementation" and string_value(a.value) in _FLASH_IMPLEMENTATIONS:
                return True
            if a.keyword.value == "use_flash_attention_2" and type(a.value) is cst.Name and a.value.value == "True":
                return True
        func = node.func
        node = func.value if type(func) is cst.Attribute else None
    return False


# library methods documented to raise when CUDA is absent: diffusers' (and its copies')
# `set_use_memory_efficient_attention_xformers` raises ValueError("torch.cuda.is_available() should be
# True but is False ..."), which `enable_xformers_memory_efficient_attention()` calls on every attention layer
_RAISES_WITHOUT_CUDA = frozenset({"enable_xformers_memory_efficient_attention"})


def _pin(facts, call: cst.Call) -> bool:
    """``torch.cuda.set_device(local_rank)`` in a block that also starts a process group: one GPU
    per rank, a multi-GPU launch; what follows it in that block is part of it."""
    f = call.func
    return (type(f) is cst.Attribute and f.attr.value == "set_device" and facts.mentions(b"init_process_group")
            and call in distributed_model(facts).pins)


def _nccl_collective(facts, call: cst.Call) -> bool:
    """``dist.all_reduce(t)`` where no condition encloses it, in a program whose process groups are
    NCCL only: a collective raises unless a process group is up, and every one is on GPUs."""
    f = call.func
    if type(f) is not cst.Attribute or f.attr.value not in _COLLECTIVES or not facts.mentions(b"distributed"):
        return False
    q = facts.qualname(f) or ""
    return q.startswith("torch.distributed.") and distributed_model(facts).nccl_only


DDP_WORD = b"DistributedDataParallel"


def ddp_on_gpus(call: cst.Call) -> bool:
    """``DistributedDataParallel(model, device_ids=[rank])`` (any ``*DistributedDataParallel``):
    a list of device ids places the replica on those GPUs, and DDP refuses them for a module
    on the CPU, so the call and its arguments run only with GPUs. ``device_ids=None``, or ids
    the code computes (``ids if cuda else None``), say nothing."""
    name = (dotted(call.func) or "").rsplit(".", 1)[-1]
    if not name.endswith("DistributedDataParallel"):
        return False
    ids = call_arg(call, None, "device_ids")
    if ids is None or type(ids.value) not in (cst.List, cst.Tuple) or not ids.value.elements:
        return False
    return all(not (type(e.value) is cst.Name and e.value.value == "None") and not isinstance(e, cst.StarredElement)
               for e in ids.value.elements)


def reads_gpu_wrapper(facts, expr: cst.CSTNode, scope) -> bool:
    """``model.module.netE(...)``, ``model.module.save(...)``: the expression's chain starts at
    ``N.module`` where every value bound to ``N`` is the result of a function that wraps the
    model in ``DataParallel`` only when its caller asked for GPUs (``ProjectFacts.gpu_wrappers``).
    Only the wrapper has ``.module``, so the expression (what its call's arguments hold included,
    evaluated after the callee) runs only on that GPU path."""
    wrappers = facts.project.gpu_wrappers
    node = expr
    while wrappers:
        t = type(node)
        if t is cst.Call or t is cst.Subscript:
            node = node.func if t is cst.Call else node.value
        elif t is cst.Attribute:
            if node.attr.value == "module" and type(node.value) is cst.Name:
                return _wrapped_for_gpus(facts, node.value.value, scope, wrappers)
            node = node.value
        else:
            return False
    return False


def _wrapped_for_gpus(facts, name: str, scope, wrappers: frozenset) -> bool:
    values = facts.values
    vals = values.bound_values(name, scope)
    if vals is None and scope is not None and not values.binds(name, scope):
        vals = values.bound_values(name, None)  # a module-level model read in a function
    return bool(vals) and all(type(v) is cst.Call and type(v.func) is cst.Name and v.func.value in wrappers
                              for v in vals)


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
        return _chain_ensures(facts, stmt, ensuring)
    return False


def _chain_ensures(facts, stmt: cst.If, ensuring: set) -> bool:
    """``if <GPU test>: ... elif <other>: raise ... else: raise ...``: every branch but the
    guarded ones leaves, so what follows the chain runs only with a GPU. A branch that makes
    sure of a GPU itself counts as guarded (``if launcher == "pytorch": torch.cuda.set_device(r);
    init_process_group(...) elif launcher == "slurm": ... else: raise``)."""
    guarded = False
    node: Optional[cst.CSTNode] = stmt
    while isinstance(node, cst.If):
        if guard_polarity(facts, node.test) == 1 or _suite_ensures(facts, node.body, ensuring):
            guarded = True
        elif not _raises(node.body):
            return False
        node = node.orelse
    if not guarded or not isinstance(node, cst.Else):
        return False
    return _raises(node.body) or _suite_ensures(facts, node.body, ensuring)


def _suite_ensures(facts, body: cst.BaseSuite, ensuring: set) -> bool:
    """A function body whose top-level statements make sure of a GPU before it can return."""
    for stmt in body.body:
        if statement_ensures_cuda(facts, stmt, ensuring):
            return True
        if isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, cst.Return) for s in stmt.body):
            return False
        if isinstance(stmt, cst.If) and guard_polarity(facts, stmt.test) == 0 and _exits_somewhere(stmt):
            return False  # an early return on another condition: the check may be skipped
    return False


def _exits_somewhere(stmt: cst.If) -> bool:
    """A branch of the ``if`` / ``elif`` / ``else`` chain returns (``raise`` stops the program:
    no caller goes on without a GPU)."""
    node: Optional[cst.CSTNode] = stmt
    while isinstance(node, cst.If):
        if _returns(node.body):
            return True
        node = node.orelse
    return isinstance(node, cst.Else) and _returns(node.body)


def _returns(body: cst.BaseSuite) -> bool:
    last = body.body[-1] if body.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1]
    return isinstance(last, (cst.Return, cst.Continue, cst.Break))


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


def checked_later(facts, fn: Optional[cst.FunctionDef], name: str, stmt: Optional[cst.CSTNode]) -> bool:
    """``device = "cuda"`` in a function that later tests ``device`` together with
    ``torch.cuda.is_available()`` (``if device.type == "cuda" and not torch.cuda.is_available():
    return torch.device("cpu")``): a choice the function validates before it is used."""
    if fn is None or stmt is None or not isinstance(fn.body, cst.IndentedBlock):
        return False
    seen = False
    for st in statements(fn.body):
        if st is stmt:
            seen = True
            continue
        if not seen or not isinstance(st, (cst.If, cst.Assert)):
            continue
        test = st.test
        names = {n.value for n in nodes(test) if isinstance(n, cst.Name)}
        if name in names and any(isinstance(c, cst.Call) and facts.qualname(c.func) == "torch.cuda.is_available"
                                 for c in nodes(test)):
            return True
    return False


# CUDA runtime calls that raise without a GPU: a library function making one unconditionally
# is CUDA-only by design (its caller decides whether it runs)
_RUNTIME = frozenset({"torch.cuda.current_device", "torch.cuda.set_device", "torch.cuda.synchronize",
                      "torch.cuda.current_stream", "torch.cuda.get_device_properties",
                      "torch.cuda.get_device_capability", "torch.cuda.Stream", "torch.cuda.Event"})


# the last parts of _RUNTIME's names: a file that spells none of them calls none of them
_RUNTIME_WORD = lazyre.compile(b"|".join(sorted({q.rsplit(".", 1)[-1].encode() for q in _RUNTIME})))


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
        # ClassDef nodes built to train on GPUs (every method, __init__ included, is CUDA-only):
        # a method wraps the model in DistributedDataParallel(device_ids=...) unconditionally,
        # or a base (this file's or the project's) does
        self.gpu_classes: set = set()
        self.cuda_extension = False  # an autograd.Function feeding a compiled CUDA kernel
        # FunctionDefs that run only with CUDA: they import a CUDA-only package or launch a Triton
        # kernel, or the project uses them (or their class) only where CUDA is required anyway
        self.cuda_only_functions: set = set()
        self.file_guarded = False
        # IndentedBlocks that run only with CUDA: a `__main__` block launching a GPU kernel
        self.cuda_only_blocks: set = set()
        # a notebook's settings cells (assignments under a "Settings" heading): the reader's choice
        self.settings_statements: set = _settings_statements(facts)
        # `name = torch.cuda.get_device_name(0)` asserted on by the next statement
        self.asserted_queries: frozenset = device_asserts(facts)[1]
        self.spells_runtime = _RUNTIME_WORD.search(facts.source) is not None  # see calls_cuda_runtime
        self._scan(facts.module)
        if _CUDA_ONLY_IMPORT.search(facts.source):
            self._scan_cuda_only_imports(facts.module)
        if facts.project.kernel_functions or may_launch_kernels(facts.source):
            self._scan_kernel_launches(facts.module)
        if facts.project.cuda_callers:
            self._used_only_with_cuda(facts.module, facts.project.cuda_callers)
        if facts.project.extensions and not self.file_guarded:
            self.file_guarded = self._imports_project_extension(facts.module, facts.project.extensions)

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
                if _runs_wrapped_only_with_cuda(f, stmt):
                    self.gpu_marks.add(stmt.name.value)  # a decorator of the file that skips without CUDA
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
        if b"DistributedDataParallel" in f.source or f.project.gpu_bases:
            self._gpu_trainers(classes)
        if _names_launcher(f):
            self._gpu_launched(module, classes)
        # every project script that imports this module requires CUDA (devlint.project)
        # ... or the program cannot start without CUDA: what it imports imports a CUDA-only package
        self.file_guarded = self.file_guarded or self.cuda_extension or f.project.cuda_only or f.project.cuda_imports

    def _gpu_trainers(self, classes: list) -> None:
        f = self.facts
        by_name = {c.name.value: c for c in classes}
        for c in classes:
            if any(dotted(b.value) in f.project.gpu_bases for b in c.bases) or any(
                    _ddp_with_device_ids(f, st) for m in c.body.body if isinstance(m, cst.FunctionDef)
                    and isinstance(m.body, cst.IndentedBlock) for st in m.body.body):
                self.gpu_classes.add(c)
        for _ in range(3):  # a class of this file deriving one
            more = {c for c in classes if c not in self.gpu_classes and any(
                by_name.get(dotted(b.value) or "") in self.gpu_classes for b in c.bases)}
            if not more:
                break
            self.gpu_classes |= more

    def _gpu_launched(self, module: cst.Module, classes: list) -> None:
        """``class Lite(LightningLite)`` whose every construction in the file asks for GPUs
        (``Lite(accelerator="gpu", ...).run(args)``): Lightning refuses to start such a launcher
        without one, so the methods it runs are CUDA-only."""
        lites = {c.name.value: c for c in classes if any(
            (dotted(b.value) or "").rsplit(".", 1)[-1] in _LAUNCHERS for b in c.bases)}
        if not lites:
            return
        made: dict = {}
        for n in nodes(module, into_scopes=True):
            if type(n) is cst.Call and isinstance(n.func, cst.Name) and n.func.value in lites:
                made.setdefault(n.func.value, []).append(gpu_launcher(self.facts, n, lites))
        for name, gpu in made.items():
            if gpu and all(gpu):
                self.guarded_classes.add(lites[name])

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
                    if (isinstance(line, cst.SimpleStatementLine) and any(
                            _cuda_only_import(st, _CUDA_ONLY_FUNCTION) or _imports_or_skips(st) for st in line.body)) \
                            or _import_or_leave(line):
                        self.cuda_only_functions.add(n)
                        break

    def _used_only_with_cuda(self, module: cst.Module, names: frozenset) -> None:
        """Top-level functions and classes (every method) that the project uses only in code
        requiring CUDA anyway (``ProjectFacts.cuda_callers``), and methods (``"Class.method"``)
        that it calls only where CUDA is."""
        for stmt in module.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value in names:
                self.cuda_only_functions.add(stmt)
            elif isinstance(stmt, cst.ClassDef) and stmt.name.value in names:
                self.cuda_only_functions.update(n for n in nodes(stmt, into_scopes=True) if type(n) is cst.FunctionDef)
            elif isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock):
                prefix = stmt.name.value + "."
                for d in stmt.body.body:
                    if type(d) is cst.FunctionDef and prefix + d.name.value in names:
                        self.cuda_only_functions.add(d)
                        self.cuda_only_functions.update(
                            n for n in nodes(d, into_scopes=True) if type(n) is cst.FunctionDef)

    def _scan_kernel_launches(self, module: cst.Module) -> None:
        """A function that launches a GPU kernel runs only on a GPU, and so does what it
        allocates for the kernel: Triton compiles for the device its tensors are on and has no
        CPU backend in a stock install. Importing ``triton`` alone says nothing (it installs
        with torch); a launch does:

        * ``kernel[grid](x, out, ...)`` where ``kernel`` is decorated ``@triton.jit`` (also
          under ``@triton.autotune`` / ``@triton.heuristics``);
        * a call of a Helion kernel (``@helion.kernel``: compiled to Triton);
        * ``triton.testing.do_bench(...)``, which times on the GPU's own clock;
        * a call of a function that always launches one: of this file (the wrapper's caller,
          and its caller), or of a project module the file imports
          (``ProjectFacts.kernel_functions``: ``from triton_kernels import max_with_atomics``).

        Always: a statement of the function's body, also in a loop or a ``with`` it always
        enters, not one branch's (``if provider == "triton": ...``) or a ``try``'s."""
        f = self.facts
        kernels, launchers = kernel_definitions(f, module)
        launchers |= f.project.kernel_functions
        if not kernels and not launchers and b"do_bench" not in f.source:
            return
        funcs = [n for n in nodes(module, into_scopes=True) if type(n) is cst.FunctionDef
                 and n.name.value not in kernels and isinstance(n.body, cst.IndentedBlock)]
        for _ in range(4):  # a wrapper's caller, its caller ...
            found = [n for n in funcs if n not in self.cuda_only_functions
                     and always_launches(f, n.body, kernels, launchers)]
            if not found:
                break
            self.cuda_only_functions.update(found)
            launchers |= {n.name.value for n in found}
        for st in module.body:  # `if __name__ == "__main__": ... kernel_wrapper(x)`
            if is_main_guard(st) and isinstance(st.body, cst.IndentedBlock) \
                    and always_launches(f, st.body, kernels, launchers):
                self.cuda_only_blocks.add(st.body)

    @staticmethod
    def _imports_project_extension(module: cst.Module, extensions: frozenset) -> bool:
        """The file imports a CUDA extension the project compiles (``import swin_window_process``,
        ``import _raymarching as _backend`` even lazily in a function): what it hands that
        kernel must be on a GPU, so the file is CUDA-only by design."""
        for n in nodes(module, into_scopes=True):
            if isinstance(n, cst.Import):
                for al in n.names:
                    local = dotted(al.asname.name) if al.asname else (dotted(al.name) or "").split(".")[0]
                    if local in extensions or dotted(al.name) in extensions:
                        return True
            elif isinstance(n, cst.ImportFrom) and not isinstance(n.names, cst.ImportStar):
                for al in n.names:
                    local = dotted(al.asname.name) if al.asname else dotted(al.name)
                    if local in extensions:
                        return True
        return False

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
                      and (self.facts.qualname(s.value.func) in _CPP_EXTENSION_LOADERS
                           or self._loads_extension(s.value))):
                    for t in s.targets:
                        if isinstance(t.target, cst.Name):
                            names.add(t.target.value)
        return names

    def _loads_extension(self, call: cst.Call) -> bool:
        """``ext_loader.load_ext("_ext", [...])``, ``importlib.import_module("pkg._C")``: a
        project's loader handing back a compiled extension module (named like one)."""
        q = self.facts.qualname(call.func) or ""
        name = dotted(call.func) or ""
        last = name.rsplit(".", 1)[-1]
        if q.startswith("torch.") or not ("load_ext" in last or last in ("import_module", "load_extension")):
            return False
        return any(_EXTENSION_MODULE.search(string_value(a.value) or "") for a in call.args
                   if string_value(a.value))

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


def _ddp_with_device_ids(facts, st: cst.CSTNode) -> bool:
    """``st`` (a simple statement) builds ``DistributedDataParallel(..., device_ids=[...])``."""
    if not isinstance(st, cst.SimpleStatementLine):
        return False
    for n in nodes(st):
        if type(n) is cst.Call and (dotted(n.func) or "").endswith("DistributedDataParallel"):
            ids = call_arg(n, None, "device_ids")
            if ids is not None and not (isinstance(ids.value, cst.Name) and ids.value.value == "None"):
                return True
    return False


def _returned(fn: cst.FunctionDef) -> cst.BaseExpression:
    for st in statements(fn.body):
        if isinstance(st, cst.Return) and st.value is not None:
            return st.value
    return cst.Name("None")


# packages that only run on an NVIDIA GPU: code importing them has no CPU path
# decorators that make a function a GPU kernel: Triton's (launched as ``kernel[grid](...)``)
# and Helion's (called directly; it compiles to Triton)
_TRITON_KERNEL = frozenset({"triton.jit", "triton.autotune", "triton.heuristics"})
_CALLED_KERNEL = frozenset({"helion.kernel"})
# library calls that run only on a GPU: Triton's benchmark timers read the device's clock
_GPU_TIMERS = frozenset({"triton.testing.do_bench", "triton.testing.do_bench_cudagraph"})


def may_launch_kernels(source: bytes) -> bool:
    """Cheap text gate for :meth:`GuardModel._scan_kernel_launches`; a file that turns on
    Triton's CPU interpreter (``os.environ["TRITON_INTERPRET"] = "1"``) runs its kernels anywhere."""
    if not ((b"triton" in source and (b"](" in source or b"do_bench" in source)) or b"helion.kernel" in source):
        return False
    return b"TRITON_INTERPRET" not in source or TRITON_INTERPRETER.search(source) is None



def kernel_definitions(facts, module: cst.Module) -> tuple:
    """(names of the file's Triton kernels, names of its kernels called directly (Helion))."""
    kernels: set = set()
    called: set = set()
    for n in nodes(module, into_scopes=True):
        if type(n) is cst.FunctionDef and n.decorators:
            for d in n.decorators:
                q = facts.qualname(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or ""
                if q in _TRITON_KERNEL:
                    kernels.add(n.name.value)
                elif q in _CALLED_KERNEL:
                    called.add(n.name.value)
    return kernels, called


def _every_branch_launches(facts, st: cst.If, kernels: set, launchers: set) -> bool:
    branch: Optional[cst.CSTNode] = st
    while type(branch) is cst.If:
        if not isinstance(branch.body, cst.IndentedBlock) or not always_launches(facts, branch.body, kernels, launchers):
            return False
        branch = branch.orelse
    return (type(branch) is cst.Else and isinstance(branch.body, cst.IndentedBlock)
            and always_launches(facts, branch.body, kernels, launchers))


def _always_run(body: cst.IndentedBlock):
    """The simple statements a block always runs: its own, and those of the loops and
    ``with`` blocks in it (not a branch's, a ``try``'s or a nested scope's)."""
    for st in body.body:
        if isinstance(st, cst.SimpleStatementLine):
            yield st
        elif isinstance(st, (cst.For, cst.While, cst.With)) and isinstance(st.body, cst.IndentedBlock):
            yield from _always_run(st.body)


def always_launches(facts, body: cst.IndentedBlock, kernels: set, launchers: set) -> bool:
    """``body`` always launches a GPU kernel (see ``GuardModel._scan_kernel_launches``); so
    does an ``if``/``else`` every branch of which does (``if source == "torch":
    do_bench(...) else: do_bench(...)``)."""
    for st in body.body:
        if type(st) is cst.If and _every_branch_launches(facts, st, kernels, launchers):
            return True
    for st in _always_run(body):
        for c in nodes(st):
            if type(c) is not cst.Call:
                continue
            func = c.func
            if type(func) is cst.Subscript and type(func.value) is cst.Name and func.value.value in kernels:
                return True
            if type(func) is cst.Name and func.value in launchers:
                return True
            if type(func) is cst.Attribute and func.attr.value in ("do_bench", "do_bench_cudagraph") \
                    and facts.qualname(func) in _GPU_TIMERS:
                return True
    return False


# (``triton`` installs with torch on Linux, so importing it says nothing until a kernel runs)
_CUDA_ONLY_FILE = frozenset(CUDA_ONLY_PACKAGES) - {"triton"}
_CUDA_ONLY_FUNCTION = _CUDA_ONLY_FILE | {"triton"}
_CUDA_ONLY_IMPORT = lazyre.compile(rb"^[ \t]*(?:import|from)[ \t]+(?:" + "|".join(CUDA_ONLY_PACKAGES).encode() + rb")\b",
                               re.M)


def _cuda_only_import(s: cst.CSTNode, roots: frozenset) -> bool:
    if isinstance(s, cst.Import):
        return any((dotted(al.name) or "").split(".")[0] in roots for al in s.names)
    if isinstance(s, cst.ImportFrom) and s.module is not None and not s.relative:
        return (dotted(s.module) or "").split(".")[0] in roots
    return False


def _imports_or_skips(s: cst.CSTNode) -> bool:
    """``pytest.importorskip("flash_attn")``: the test runs on only where the package imports."""
    call = s.value if isinstance(s, (cst.Expr, cst.Assign)) else None
    if not (isinstance(call, cst.Call) and (dotted(call.func) or "").endswith("importorskip") and call.args):
        return False
    name = string_value(call.args[0].value)
    return name is not None and name.split(".")[0] in _CUDA_ONLY_FILE


_LEAVING_CALLS = ("skip", "skipTest", "exit", "_exit", "quit")


def _import_or_leave(stmt: cst.CSTNode) -> bool:
    """``try: import flash_attn`` whose every handler leaves the function (``return``,
    ``raise``, ``pytest.skip(...)``, ``self.skipTest(...)``, ``sys.exit(...)``): what follows
    runs only where the CUDA-only package imports."""
    if not isinstance(stmt, cst.Try) or not stmt.handlers or not isinstance(stmt.body, cst.IndentedBlock):
        return False
    body = stmt.body.body
    if not body or not all(isinstance(ln, cst.SimpleStatementLine)
                           and all(isinstance(st, (cst.Import, cst.ImportFrom)) for st in ln.body) for ln in body):
        return False
    if not any(_cuda_only_import(st, _CUDA_ONLY_FILE) for ln in body for st in ln.body):
        return False
    for h in stmt.handlers:
        last = h.body.body[-1] if isinstance(h.body, cst.IndentedBlock) and h.body.body else None
        small = last.body[-1] if isinstance(last, cst.SimpleStatementLine) and last.body else None
        if not (isinstance(small, (cst.Return, cst.Raise)) or (
                isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
                and (dotted(small.value.func) or "").rsplit(".", 1)[-1] in _LEAVING_CALLS)):
            return False
    return True


def _targets(s) -> list:
    return [t.target for t in s.targets] if isinstance(s, cst.Assign) else [s.target]


def _calls(node: cst.CSTNode):
    for n in nodes(node, into_scopes=True):
        if isinstance(n, cst.Call):
            yield n


# ---------------------------------------------------------------------------------
# the process group: a program whose only process group is NCCL runs distributed only on GPUs
# ---------------------------------------------------------------------------------

_COLLECTIVES = frozenset({"all_reduce", "reduce", "broadcast", "all_gather", "all_gather_into_tensor", "gather",
                          "scatter", "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single"})


class DistributedModel:
    """What the file says about ``torch.distributed`` (``distributed_model(facts)``, once per file).

    * ``string_bindings``: last name part -> the string literals the file binds it to
      (``args.dist_backend = "nccl"``, ``add_argument("--dist-backend", default="nccl")``).
    * ``nccl_only``: the file initialises a process group, always with NCCL.
    * ``nccl_flags``: conditions under which it does (``if args.distributed: ...
      init_process_group(backend=args.dist_backend)``), or under which the model is wrapped in
      ``DistributedDataParallel(..., device_ids=[...])`` (device ids: a module on GPUs): a GPU
      guard wherever they are tested.
    * ``initialized_functions``: functions of the file answering "is the process group up"
      (``if not dist.is_initialized(): return False`` ... ``return True``).
    * ``world_size_functions``: functions returning ``dist.get_world_size()`` (or 1 without one).
    * ``gpu_inits``: ``init_process_group`` calls whose own block also pins this rank's GPU with
      ``torch.cuda.set_device`` (outside any condition): a process group of one GPU per rank,
      whatever its backend.
    """

    def __init__(self) -> None:
        self.string_bindings: dict = {}
        self.gpu_inits: set = set()
        self.pins: set = set()  # the `set_device` calls of those blocks: part of the launch
        self.nccl_only = False
        self.nccl_flags: set = set()
        self.initialized_functions: set = set()  # (and the project's that the file imports)
        self.world_size_functions: set = set()

    def build(self, facts) -> None:
        self.initialized_functions |= facts.project.dist_checks
        if b"DistributedDataParallel" in facts.source:
            self._ddp_flags(facts)
        if b"init_process_group" not in facts.source:
            # the scripts importing this module start only NCCL process groups (devlint.project)
            self.nccl_only = facts.project.nccl_only
            if self.nccl_only:
                self._functions(facts)
                self._collective_flags(facts, [n for n in nodes(facts.module, into_scopes=True) if type(n) is cst.If])
            return
        module = facts.module
        inits: list = []
        ifs: list = []
        funcs: list = []
        for n in nodes(module, into_scopes=True):
            t = type(n)
            if t is cst.Assign and len(n.targets) == 1:
                sv = string_value(n.value) if type(n.value) is not cst.IfExp else os_backend(n.value)
                d = dotted(n.targets[0].target)
                if sv is not None and d is not None:
                    self.string_bindings.setdefault(d.rsplit(".", 1)[-1], set()).add(sv.lower())
            elif t is cst.Param and n.default is not None:
                sv = string_value(n.default)
                if sv is not None:  # `def init_dist(launcher, backend="nccl")`
                    self.string_bindings.setdefault(n.name.value, set()).add(sv.lower())
            elif t is cst.IndentedBlock:
                self._pinned_group(facts, n)
            elif t is cst.Call:
                f = n.func
                last = f.attr.value if type(f) is cst.Attribute else (f.value if type(f) is cst.Name else "")
                if last == "add_argument":
                    self._option(n)
                elif last.endswith("init_process_group"):
                    inits.append(n)
            elif t is cst.If:
                ifs.append(n)
            elif t is cst.FunctionDef:
                funcs.append(n)
        self.nccl_only = bool(inits) and all(_is_nccl_init(facts, c) for c in inits)
        if not self.nccl_only:
            return
        for node in ifs:
            d = dotted(node.test) if isinstance(node.test, (cst.Name, cst.Attribute)) else None
            if d is not None and isinstance(node.body, cst.IndentedBlock) and any(
                    isinstance(st, cst.SimpleStatementLine) and any(
                        type(sm) is cst.Expr and type(sm.value) is cst.Call and _is_nccl_init(facts, sm.value)
                        for sm in st.body)
                    for st in node.body.body):
                self.nccl_flags.add(d)
        for fn in funcs:
            self._classify(facts, fn)
        self._collective_flags(facts, ifs)

    def _collective_flags(self, facts, ifs: list) -> None:
        """``if self.distributed: avg = t.cuda(); dist.reduce(avg, dst=0)``: in a program whose
        process groups are NCCL only, a flag whose branch runs a collective selects a GPU branch."""
        for node in ifs:
            d = dotted(node.test) if isinstance(node.test, (cst.Name, cst.Attribute)) else None
            if d is None or not isinstance(node.body, cst.IndentedBlock):
                continue
            for n in nodes(node.body):
                if type(n) is cst.Call and (facts.qualname(n.func) or "").startswith("torch.distributed.") and \
                        (facts.qualname(n.func) or "").rsplit(".", 1)[-1] in _COLLECTIVES:
                    self.nccl_flags.add(d)
                    break

    def _pinned_group(self, facts, block: cst.IndentedBlock) -> None:
        """A block (with the ``try`` bodies in it) that both starts a process group and calls
        ``torch.cuda.set_device``: each rank of that group owns a GPU."""
        inits: list = []
        pins: list = []
        todo = list(block.body)
        while todo:
            st = todo.pop()
            if type(st) is cst.Try and isinstance(st.body, cst.IndentedBlock):
                todo += st.body.body
            elif type(st) is cst.SimpleStatementLine:
                for sm in st.body:
                    v = sm.value if type(sm) in (cst.Expr, cst.Assign) else None
                    if type(v) is not cst.Call:
                        continue
                    q = facts.qualname(v.func) or dotted(v.func) or ""
                    if q.endswith("init_process_group"):
                        inits.append(v)
                    elif q == "torch.cuda.set_device":
                        pins.append(v)
        if pins and inits:
            self.gpu_inits.update(inits)
            self.pins.update(pins)

    def _ddp_flags(self, facts) -> None:
        """``if distributed: model = DistributedDataParallel(model, device_ids=[...])``: DDP takes
        device ids only for a module on GPUs, so that condition selects a GPU branch."""
        for n in nodes(facts.module, into_scopes=True):
            if type(n) is not cst.If or not isinstance(n.test, (cst.Name, cst.Attribute)):
                continue
            if not isinstance(n.body, cst.IndentedBlock):
                continue
            for st in n.body.body:
                if not isinstance(st, cst.SimpleStatementLine):
                    continue
                for sm in st.body:
                    value = sm.value if type(sm) in (cst.Assign, cst.Expr) else None
                    if type(value) is not cst.Call:
                        continue
                    callee = (dotted(value.func) or "").rsplit(".", 1)[-1]
                    ids = call_arg(value, None, "device_ids")
                    if callee.endswith("DistributedDataParallel") and ids is not None and not (
                            isinstance(ids.value, cst.Name) and ids.value.value == "None"):
                        self.nccl_flags.add(dotted(n.test))

    def _functions(self, facts) -> None:
        for n in nodes(facts.module, into_scopes=True):
            if type(n) is cst.FunctionDef:
                self._classify(facts, n)

    def _option(self, call: cst.Call) -> None:
        default = call_arg(call, None, "default")
        sv = string_value(default.value) if default is not None else None
        if sv is None:
            return
        dest = call_arg(call, None, "dest")
        name = string_value(dest.value) if dest is not None else None
        if name is None:
            flags = [string_value(a.value) for a in call.args if a.keyword is None]
            longs = [f for f in flags if f and f.startswith("--")]
            name = (longs[0] if longs else (flags[0] if flags and flags[0] else "")).lstrip("-").replace("-", "_")
        if name:
            self.string_bindings.setdefault(name, set()).add(sv.lower())

    def _classify(self, facts, fn: cst.FunctionDef) -> None:
        if not isinstance(fn.body, cst.IndentedBlock):
            return
        returns = [st for st in statements(fn.body) if isinstance(st, cst.Return)]
        if not returns or any(r.value is None for r in returns):
            return
        if all(_int(r.value) == 1 or is_world_size(facts, r.value) for r in returns) and any(
                _int(r.value) != 1 for r in returns):
            self.world_size_functions.add(fn.name.value)
            return
        body = fn.body.body
        last = body[-1]
        if not (isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Return)
                and _bool(last.body[-1].value) is True):
            return
        found = False
        for st in body[:-1]:
            if not (isinstance(st, cst.If) and st.orelse is None and isinstance(st.body, cst.IndentedBlock)
                    and len(st.body.body) == 1 and isinstance(st.body.body[0], cst.SimpleStatementLine)
                    and isinstance(st.body.body[0].body[-1], cst.Return)
                    and _bool(st.body.body[0].body[-1].value) is False):
                return
            found = found or guard_polarity(facts, st.test) == -1
        if found:
            self.initialized_functions.add(fn.name.value)


def distributed_model(facts) -> DistributedModel:
    """The file's :class:`DistributedModel`, computed once (registered before it is built:
    building it asks guard questions that read its earlier parts)."""
    m = getattr(facts, "_distributed_model", None)
    if m is None:
        m = facts._distributed_model = DistributedModel()
        state = facts.__dict__
        state["_building_model"] = state.get("_building_model", 0) + 1  # (guard answers are not kept meanwhile)
        try:
            m.build(facts)
        finally:
            state["_building_model"] -= 1
    return m


def model(facts) -> GuardModel:
    """The file's guard model, computed once and kept on the facts object."""
    m = getattr(facts, "_guard_model", None)
    if m is None or m.facts is not facts:
        m = GuardModel(facts)
        facts._guard_model = m
    return m
