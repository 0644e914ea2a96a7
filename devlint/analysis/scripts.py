"""Is a file a script that trains or evaluates, or a library module (DL010)?

* ``is_main_guard(stmt)`` (from devlint.syntax): ``if __name__ == "__main__":``;
* ``trains(body)``: an optimizer step, a loss backward or a loop (nested scopes included);
* ``smoke_test_library(module)``: a module of classes/functions whose only feeding code is a
  smoke test (a ``__main__`` block or a ``def test():`` that runs a model once), with no
  training anywhere;
* ``device_aware(module, facts)``: the file's code already deals with devices (or calls a project helper that does);
* ``model_constructions(facts, fn, body)``: ``name = <nn.Module>(...)`` statements of one scope;
* ``fed_models(...)``: which of them are fed data (called, trained, or handed to a helper).
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from devlint import lazyre
from devlint.project import DEVICE_WORDS
from devlint.syntax import is_main_guard, names_read
from devlint.facts import MODULE, dotted, string_value
from devlint.walk import nodes, statements


def trains(body: cst.CSTNode) -> bool:
    """An optimizer step, a loss backward, or a loop over anything but a literal list of cases
    (``for shape in [(1, 3), (2, 3)]:`` is a smoke test, ``for x, y in loader:`` is not)."""
    for n in nodes(body, into_scopes=True):
        if isinstance(n, cst.While) or (isinstance(n, cst.For) and not isinstance(n.iter, (cst.List, cst.Tuple,
                                                                                              cst.Set))):
            return True
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("backward", "step"):
            return True
    return False


def smoke_test_library(module: cst.Module) -> bool:
    """Classes/functions, constants and imports, and at most a ``__main__`` block, where nothing
    trains: the model is only run once on a random input (``def test(): print(Net()(x).shape)``,
    the model zoo layout), which is no script to port."""
    defs = [s for s in module.body if isinstance(s, (cst.ClassDef, cst.FunctionDef))]
    if not defs:
        return False
    rest = [s for s in module.body if not isinstance(s, (cst.ClassDef, cst.FunctionDef, cst.SimpleStatementLine))
            and not _declarative(s)]
    mains = [s for s in rest if is_main_guard(s)]
    if len(mains) != len(rest):
        return False
    # module-level simple statements: only imports, constants, docstrings (no model is fed there)
    for s in module.body:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    return False
    return not any(trains(m.body) for m in mains) and not any(
        trains(d.body) for d in defs if isinstance(d, cst.FunctionDef))


def _declarative(stmt: cst.CSTNode) -> bool:
    """``try: from x import A`` / ``except ImportError: A = B``, ``if sys.version_info ...:``:
    a block of imports and plain assignments (an import fallback), which runs nothing."""
    if not isinstance(stmt, (cst.Try, cst.If)) or is_main_guard(stmt):
        return False
    for st in statements(stmt):
        if isinstance(st, (cst.Expr,)) and isinstance(st.value, cst.Call):
            return False
        if isinstance(st, (cst.For, cst.While, cst.With, cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(st, (cst.Assign, cst.AnnAssign)) and st.value is not None and any(
                isinstance(n, cst.Call) for n in nodes(st.value)):
            return False
    return True


# Any of these in a name, attribute or keyword means the file already deals with devices.
_AWARE_WORD = lazyre.compile(r"cuda|device|accelerator|map_location|^(?:mps|xpu|xla|hpu|npu)$", re.I)
_DEVICE_STRING = lazyre.compile(r"(?:cuda|cpu|mps|xpu|xla|hpu|npu|meta)(?::\d+)?")
_DTYPES = frozenset(
    """float float16 float32 float64 half double bfloat16 int int8 int16 int32 int64 long short
    uint8 bool complex64 complex128 cfloat cdouble""".split()
)
_MODULE_USE = frozenset({"parameters", "named_parameters", "train", "eval", "state_dict",
                         "load_state_dict", "zero_grad"})


def device_aware(module: cst.Module, facts) -> bool:
    """The file's code (not its comments) deals with devices: a name, attribute or keyword
    mentions cuda/device/accelerator/map_location/mps/xpu..., a device string (``"cpu"``,
    ``"cuda:0"``), or a ``.to(...)`` with anything but a dtype."""
    placing = facts.project.placing  # project helpers that place values (devlint.project)
    if not placing and not DEVICE_WORDS.search(facts.source):
        return False
    for n in nodes(module, into_scopes=True):
        if placing and type(n) is cst.Call and _calls_placing(n.func, placing):
            return True
        if isinstance(n, cst.Name) and _AWARE_WORD.search(n.value):
            return True
        if isinstance(n, cst.SimpleString):
            v = string_value(n)
            if v is not None and _DEVICE_STRING.fullmatch(v):
                return True
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "to":
            if not all(_is_dtype(facts, a) for a in n.args):
                return True
    return False


def _calls_placing(func: cst.BaseExpression, placing: frozenset) -> bool:
    """``to_var(x)``, ``utils.to_var(x)``: a call of a project helper that places values."""
    if isinstance(func, cst.Name):
        return func.value in placing
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.attr.value in placing


def _is_dtype(facts, arg: cst.Arg) -> bool:
    if arg.keyword is not None:
        return arg.keyword.value in ("dtype", "non_blocking", "copy", "memory_format")
    q = facts.qualname(arg.value)
    return q is not None and q.startswith("torch.") and q.rsplit(".", 1)[-1] in _DTYPES


def model_constructions(facts, fn: Optional[cst.FunctionDef], body: cst.CSTNode):
    """``(Assign, name)`` for each ``name = <nn.Module>(...)`` in one scope: a torch.nn class, a
    Module subclass of the file, a ``torchvision.models`` factory; an imported class only when
    the scope uses it as a Module (``name.parameters()``, ``name.eval()`` ...)."""
    used = None
    for n in statements(body):
        if not (isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name)
                and isinstance(n.value, cst.Call)):
            continue
        name, value = n.targets[0].target.value, n.value
        if facts.kind_of(value, fn) == MODULE:
            q = facts.qualname(value.func) or ""
            if not (q == "torch.compile" or q.startswith("torch.nn.utils") or _weightless(facts, value)):
                yield n, name
            continue
        d = dotted(value.func)
        if d is None or facts.qualname(value.func) is None:
            continue
        if facts.aliases.get(d.split(".")[0], "").split(".")[0] in ("torch", "numpy", "pandas", "sklearn"):
            continue
        last = d.rsplit(".", 1)[-1]
        factory = "." in d and d.split(".")[-2] == "models" and last[:1].islower()
        if not (last[:1].isupper() or factory):
            continue
        if used is None:
            used = {c.func.value.value for c in nodes(body)
                    if isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute)
                    and isinstance(c.func.value, cst.Name) and c.func.attr.value in _MODULE_USE}
        if name in used:
            yield n, name


# torch.nn layers that hold no parameters or buffers: nothing of theirs to place on a device
_WEIGHTLESS = frozenset(
    """Flatten Unflatten Identity ReLU ReLU6 LeakyReLU ELU SELU CELU GELU SiLU Mish Tanh Sigmoid Hardtanh
    Hardsigmoid Hardswish Softplus Softsign Softmax Softmax2d LogSoftmax LogSigmoid Tanhshrink Threshold
    Dropout Dropout1d Dropout2d Dropout3d AlphaDropout MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d
    AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d
    AdaptiveMaxPool3d Upsample UpsamplingNearest2d UpsamplingBilinear2d PixelShuffle PixelUnshuffle
    ZeroPad2d ConstantPad1d ConstantPad2d ReflectionPad1d ReflectionPad2d ReplicationPad2d ChannelShuffle
    Fold Unfold CosineSimilarity PairwiseDistance""".split())


def _weightless(facts, call: cst.Call) -> bool:
    """``nn.Unflatten(2, size)``, ``nn.Sequential(nn.ReLU(), nn.Flatten())``: a torch.nn layer (or
    a Sequential of them) without parameters or buffers is no model to place."""
    q = facts.qualname(call.func) or ""
    if not q.startswith("torch.nn."):
        return False
    last = q.rsplit(".", 1)[-1]
    if last in _WEIGHTLESS:
        return True
    if last == "Sequential" and call.args:
        return all(a.keyword is None and not a.star and isinstance(a.value, cst.Call) and _weightless(facts, a.value)
                   for a in call.args)
    return False


def fed_models(facts, functions: dict, fn: Optional[cst.FunctionDef], body: cst.CSTNode, names: set,
               loaders: dict, seeds: dict) -> set:
    """Which of ``names`` (models built in one scope) are fed data: called (``model(x)``), trained
    (their parameters go to a ``torch.optim`` optimizer in a scope that loops), or passed to a
    function of the file (``functions``: name -> FunctionDef) that calls the parameter.

    For such a function, ``seeds[fn_name] = (model_params, loader_params)`` collects the
    parameters that receive a model and those that receive a loader of ``loaders`` (name ->
    whether it yields tensors): its batches need the device too.
    """
    fed: set = set()
    trained: set = set()
    has_loop = False
    for n in nodes(body):
        if isinstance(n, cst.For):
            has_loop = True
        if not isinstance(n, cst.Call):
            continue
        if isinstance(n.func, cst.Name) and n.func.value in names:
            fed.add(n.func.value)
        if (facts.qualname(n.func) or "").startswith("torch.optim.") and n.args:
            trained |= names_read(n.args[0].value) & names
        callee = functions.get(n.func.value) if isinstance(n.func, cst.Name) else None
        if callee is not None and callee is not fn:
            fed |= _seed_callee(callee, n, names, loaders, seeds)
    return fed | (trained if has_loop else set())


def _seed_callee(fn: cst.FunctionDef, call: cst.Call, models: set, loaders: dict, seeds: dict) -> set:
    params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    kw = {p.name.value for p in fn.params.kwonly_params} | set(params)
    fed, fed_params, loader_params = set(), set(), {}
    for i, a in enumerate(call.args):
        if a.star:
            break
        pname = a.keyword.value if a.keyword is not None else (params[i] if i < len(params) else None)
        if pname is None or pname not in kw or not isinstance(a.value, cst.Name):
            continue
        v = a.value.value
        if v in models:
            if any(isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == pname
                   for n in nodes(fn.body)):
                fed.add(v)
                fed_params.add(pname)
        elif v in loaders:
            loader_params[pname] = loaders[v]
    if fed_params:  # batches only need the device where they meet the model
        got_models, got_loaders = seeds.setdefault(fn.name.value, (set(), {}))
        got_models |= fed_params
        for pname, known in loader_params.items():
            got_loaders[pname] = got_loaders.get(pname, True) and known
    return fed
