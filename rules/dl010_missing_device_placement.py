from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Optional

import libcst as cst

from devlint.diagnostic import Applicability
from devlint.facts import DEVICE_LESS_FACTORIES, MODULE, call_arg, dotted, string_value
from devlint.fixes import choose_device
from devlint.rule import Invalid, Rule
from devlint.walk import children, nodes, statements

# Any of these in a name, attribute or keyword means the file already deals with devices.
_AWARE_BYTES = re.compile(rb"cuda|device|accelerator|mps|xpu|xla|hpu|npu|map_location|\.to\(")
_AWARE_WORD = re.compile(r"cuda|device|accelerator|map_location|^(?:mps|xpu|xla|hpu|npu)$", re.I)
_DEVICE_STRING = re.compile(r"(?:cuda|cpu|mps|xpu|xla|hpu|npu|meta)(?::\d+)?")
_DTYPES = frozenset(
    """float float16 float32 float64 half double bfloat16 int int8 int16 int32 int64 long short
    uint8 bool complex64 complex128 cfloat cdouble""".split()
)
_MODULE_USE = frozenset({"parameters", "named_parameters", "train", "eval", "state_dict",
                         "load_state_dict", "zero_grad"})
_WRAPPERS = frozenset({"enumerate", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "iter"})
_MODULE_API = frozenset(
    """parameters named_parameters buffers named_buffers modules named_modules children named_children
    train eval state_dict load_state_dict zero_grad apply to cpu cuda half float double bfloat16
    requires_grad_ register_buffer register_forward_hook register_forward_pre_hook
    register_full_backward_hook add_module get_submodule""".split()
)
_BUILTINS = frozenset({"print", "len", "repr", "str", "type", "isinstance", "id", "hasattr", "getattr",
                       "setattr", "vars", "dir", "sum", "list", "tuple", "format", "deepcopy",
                       "copy.deepcopy", "copy.copy"})
_HOST_LIBS = frozenset({"numpy", "matplotlib", "pandas", "sklearn", "scipy"})
_HOST_ATTRS = frozenset({"shape", "dtype", "ndim", "is_cuda", "requires_grad"})
_HOST_METHODS = frozenset({"size", "dim", "item", "tolist", "numel", "numpy", "nelement", "stride"})


def _is_test_file(filename: str) -> bool:
    p = PurePath(filename)
    name = p.name
    return name.startswith("test_") or name.endswith(("_test.py", "_tests.py")) or name == "conftest.py"


def _names(expr: cst.CSTNode) -> set:
    """Names an expression reads (not attribute names, not keyword names)."""
    out: set = set()
    stack = [expr]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            out.add(n.value)
        elif isinstance(n, cst.Attribute):
            stack.append(n.value)
        elif isinstance(n, cst.Arg):
            stack.append(n.value)
        elif isinstance(n, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
            continue
        else:
            stack.extend(children(n, trivia=False))
    return out


def _target_names(target: cst.CSTNode) -> list:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _target_names(el.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    if isinstance(target, cst.Subscript):
        n = target.value
        while isinstance(n, cst.Subscript):
            n = n.value
        return [n.value] if isinstance(n, cst.Name) else []
    return []


def _is_main_guard(stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.If) or not isinstance(stmt.test, cst.Comparison):
        return False
    parts = [stmt.test.left] + [c.comparator for c in stmt.test.comparisons]
    return any(isinstance(p, cst.Name) and p.value == "__name__" for p in parts)


def _trains(body: cst.CSTNode) -> bool:
    """An optimizer step, a loss backward or a loop: the code trains or evaluates."""
    for n in nodes(body, into_scopes=True):
        if isinstance(n, (cst.For, cst.While)):
            return True
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("backward", "step"):
            return True
    return False


def _smoke_test_library(module: cst.Module) -> bool:
    """A library module (classes or functions) whose only feeding code is a `__main__` shape smoke test.

    DL010 is for scripts that train or evaluate (issue 16 item 7): a module that defines
    models and runs them once on a random input under `if __name__ == "__main__":` is not one.
    """
    defs = [s for s in module.body if isinstance(s, (cst.ClassDef, cst.FunctionDef))]
    if not defs:
        return False
    rest = [s for s in module.body if not isinstance(s, (cst.ClassDef, cst.FunctionDef, cst.SimpleStatementLine))]
    mains = [s for s in rest if _is_main_guard(s)]
    if not mains or len(mains) != len(rest):
        return False
    # module-level simple statements: only imports, constants, docstrings (no model is fed there)
    for s in module.body:
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    return False
    return not any(_trains(m.body) for m in mains) and not any(
        _trains(d.body) for d in defs if isinstance(d, cst.FunctionDef))


def _bindings(body: cst.CSTNode) -> dict:
    """name -> [(kind, value, statement)] for every binding site in a scope."""
    binds: dict = {}
    for n in statements(body):
        if isinstance(n, cst.Assign):
            for t in n.targets:
                for name in _target_names(t.target):
                    binds.setdefault(name, []).append(("assign", n.value, n))
        elif isinstance(n, (cst.AugAssign, cst.AnnAssign)) and n.value is not None:
            kind = "assign" if isinstance(n, cst.AnnAssign) else "aug"
            for name in _target_names(n.target):
                binds.setdefault(name, []).append((kind, n.value, n))
        elif isinstance(n, cst.For):
            for name in _target_names(n.target):
                binds.setdefault(name, []).append(("for", n.iter, n))
        elif isinstance(n, cst.With):
            for item in n.items:
                if item.asname is not None:
                    for name in _target_names(item.asname.name):
                        binds.setdefault(name, []).append(("with", item.item, n))
    return binds


def _kwarg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(value, keyword=cst.Name(name),
                   equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                         whitespace_after=cst.SimpleWhitespace("")))


def _add_kwarg(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    args = list(call.args)
    if args and not isinstance(args[-1].comma, cst.Comma):
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    elif args and isinstance(args[-1].comma, cst.Comma):
        # `f(\n    a,\n)`: keep the layout, put the new argument on its own line
        comma = args[-1].comma
        args.append(_kwarg(name, value).with_changes(comma=comma))
        args[-2] = args[-2].with_changes(comma=cst.Comma(whitespace_after=comma.whitespace_after))
        return call.with_changes(args=args)
    args.append(_kwarg(name, value))
    return call.with_changes(args=args)


def _method(value: cst.BaseExpression, meth: str, *args: cst.BaseExpression) -> cst.Call:
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(cst.Attribute(value, cst.Name(meth)), [cst.Arg(a) for a in args])


class _Edits(cst.CSTTransformer):
    """Applies edit functions keyed on original nodes, innermost first, so edits compose."""

    def __init__(self, edits: dict) -> None:
        super().__init__()
        self.edits = edits

    def on_leave(self, original_node, updated_node):
        fn = self.edits.get(original_node)
        return fn(updated_node) if fn is not None else updated_node


@dataclass
class _Loop:
    node: cst.For
    names: list  # batch names (tuple/list targets) or one name
    form: str  # "tuple", "name", "list", "dict"
    known: bool  # the loader's dataset yields tensors (TensorDataset, torchvision, a Dataset in the file)
    source: str  # the iterated name, for the message


@dataclass
class _Scope:
    node: Optional[cst.CSTNode]  # FunctionDef or None (module level)
    body: cst.CSTNode
    seeds_models: set = field(default_factory=set)
    seeds_loaders: dict = field(default_factory=dict)  # param name -> origin known


class MissingDevicePlacement(Rule):
    """
    ## What it does
    Flags legacy CPU-only training or evaluation scripts: a file that builds an
    `nn.Module` (a `torch.nn` class, a subclass defined or imported in the file, a
    `torchvision.models` factory) and feeds it data (calls it, or trains it over a
    DataLoader) without choosing a device anywhere. One finding per file, at the
    model's construction, naming what the port needs.

    ## Why is this bad?
    On a machine with a GPU the script silently trains on the CPU, often 10-50x slower,
    and nobody notices until a run takes all night. Files that already deal with
    devices, library modules that only define classes, and test files are never
    reported.

    ## Example
    ```python
    model = Net()
    for x, y in loader:
        loss = criterion(model(x), y)
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
    ```

    ## Fix safety
    The fix ports the file the way the PyTorch guides teach: one guarded device
    variable after the imports (`--fix-style accelerator` for the
    `torch.accelerator` form), `.to(device)` once after the model's construction,
    the batch moved at the top of each loop over a DataLoader or dataset (tuple,
    list and dict batches), `device=device` on tensor factories whose values meet
    the model, `map_location=device` on `torch.load`, and `.cpu()` before `.numpy()`
    on values that come back from the model. On a CPU-only machine the program
    computes exactly what it did before. It is safe when every step applies; it is
    unsafe (the message says why) when a batch's structure or a tensor's origin is
    unknown, so that a step may be missing or may move a non-tensor.
    """

    code = "DL010"
    # name, summary, default and prefilter: devlint/catalogue.py

    VALID = [
        # already device-aware
        "import torch\nfrom torch import nn\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "model = nn.Linear(4, 2).to(device)\nprint(model(torch.randn(3, 4, device=device)))\n",
        "import torch\nfrom torch import nn\nmodel = nn.Linear(4, 2)\nif torch.cuda.is_available():\n"
        "    model.cuda()\nprint(model(torch.randn(3, 4)))\n",
        # a library module: classes only
        "import torch\nfrom torch import nn\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(4, 2)\n    def forward(self, x):\n"
        "        return self.fc(x)\n",
        # built but never fed
        "import torch\nfrom torch import nn\nmodel = nn.Linear(4, 2)\nprint(sum(p.numel() for p in model.parameters()))\n",
        # a factory function returns the model: the caller decides the device
        "import torch\nfrom torch import nn\ndef build():\n    return nn.Sequential(nn.Linear(4, 2), nn.ReLU())\n",
        # a library module whose __main__ block is a shape smoke test (issue 16 item 7)
        "import torch\nfrom torch import nn\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(4, 2)\n    def forward(self, x):\n"
        "        return self.fc(x)\nif __name__ == '__main__':\n    net = Net()\n"
        "    print(net(torch.randn(3, 4)).shape)\n",
        # dtype conversions are not device placement, but the comment does not count either
        "import torch\nfrom torch import nn\nmodel = nn.Linear(4, 2)\nx = torch.randn(3, 4).to('cpu')\nprint(model(x))\n",
    ]
    INVALID = [
        Invalid(
            "import torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 2)\nx = torch.randn(3, 4)\n"
            "print(model(x).detach().numpy())\n",
            "import torch\nfrom torch import nn\n\n"
            "device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
            "model = nn.Linear(4, 2).to(device)\nx = torch.randn(3, 4, device=device)\n"
            "print(model(x).detach().cpu().numpy())\n",
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader, TensorDataset\n\n"
            "ds = TensorDataset(torch.randn(8, 4), torch.randn(8, 1))\nnet = nn.Linear(4, 1)\n"
            "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
            "for xb, yb in DataLoader(ds, batch_size=4):\n    opt.zero_grad()\n"
            "    nn.functional.mse_loss(net(xb), yb).backward()\n    opt.step()\n",
            "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader, TensorDataset\n\n"
            "device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
            "ds = TensorDataset(torch.randn(8, 4), torch.randn(8, 1))\nnet = nn.Linear(4, 1).to(device)\n"
            "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
            "for xb, yb in DataLoader(ds, batch_size=4):\n    xb, yb = xb.to(device), yb.to(device)\n"
            "    opt.zero_grad()\n"
            "    nn.functional.mse_loss(net(xb), yb).backward()\n    opt.step()\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\nfrom mylib import load_batches\n\nmodel = nn.Linear(4, 2)\n"
            "for x in load_batches():\n    print(model(x))\n",
            "import torch\nfrom torch import nn\nfrom mylib import load_batches\n\n"
            "device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
            "model = nn.Linear(4, 2).to(device)\n"
            "for x in load_batches():\n    print(model(x))\n",
            unsafe=True,
        ),
    ]

    # ------------------------------------------------------------------------------
    def finish(self) -> None:
        if _is_test_file(self.ctx.filename) or self.facts.device_vars or self.facts.multi_gpu:
            return
        module = self.ctx.module
        self.functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
        self.datasets_classes = self._dataset_classes(module)
        self._module_use: dict = {}
        scopes = [_Scope(None, module)] + [_Scope(fn, fn.body) for fn in self.functions.values()]
        found = []
        for sc in scopes:
            for node, name in self._constructions(sc):
                found.append((sc, node, name))
        if not found:
            return
        if _AWARE_BYTES.search(self.facts.source) and self._device_aware(module):
            return
        if _smoke_test_library(module):
            return
        self._port(module, scopes, found)

    # ---- file-level evidence -----------------------------------------------------------
    def _device_aware(self, module: cst.Module) -> bool:
        for n in nodes(module, into_scopes=True):
            if isinstance(n, cst.Name) and _AWARE_WORD.search(n.value):
                return True
            if isinstance(n, cst.SimpleString):
                v = string_value(n)
                if v is not None and _DEVICE_STRING.fullmatch(v):
                    return True
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "to":
                if not all(self._is_dtype(a) for a in n.args):
                    return True
        return False

    def _is_dtype(self, arg: cst.Arg) -> bool:
        if arg.keyword is not None:
            return arg.keyword.value in ("dtype", "non_blocking", "copy", "memory_format")
        q = self.facts.qualname(arg.value)
        return q is not None and q.startswith("torch.") and q.rsplit(".", 1)[-1] in _DTYPES

    def _dataset_classes(self, module: cst.Module) -> set:
        out = set()
        for s in module.body:
            if isinstance(s, cst.ClassDef):
                for b in s.bases:
                    q = self.facts.qualname(b.value) or ""
                    if q.startswith("torch.utils.data") and q.endswith("Dataset") or (dotted(b.value) in out):
                        out.add(s.name.value)
        return out

    # ---- models ------------------------------------------------------------------
    def _is_module_ctor(self, value: cst.BaseExpression, scope, name: str, body) -> bool:
        if not isinstance(value, cst.Call):
            return False
        if self.facts.kind_of(value, scope) == MODULE:
            q = self.facts.qualname(value.func)
            if q == "torch.compile" or (q or "").startswith("torch.nn.utils"):
                return False
            return True
        d = dotted(value.func)
        if d is None or self.facts.qualname(value.func) is None:
            return False
        head = d.split(".")[0]
        q = self.facts.aliases.get(head, "")
        if q.split(".")[0] in ("torch", "numpy", "pandas", "sklearn"):
            return False
        last = d.rsplit(".", 1)[-1]
        factory = "." in d and d.split(".")[-2] == "models" and last[:1].islower()
        if not (last[:1].isupper() or factory):
            return False
        # an imported class or factory: only with Module usage in this scope
        used = self._module_use.get(id(body))
        if used is None:
            used = self._module_use[id(body)] = {
                n.func.value.value for n in nodes(body)
                if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                and isinstance(n.func.value, cst.Name) and n.func.attr.value in _MODULE_USE}
        return name in used

    def _constructions(self, sc: _Scope):
        for n in statements(sc.body):
            if isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Name):
                name = n.targets[0].target.value
                if self._is_module_ctor(n.value, sc.node, name, sc.body):
                    yield n, name

    @staticmethod
    def _is_loss(call: cst.Call) -> bool:
        d = dotted(call.func) or ""
        return d.endswith("Loss")

    # ---- the port ----------------------------------------------------------------
    def _port(self, module: cst.Module, scopes: list, found: list) -> None:
        choice = choose_device(self.ctx, prefer_input=False)
        self.dev = choice.expr
        self.edits: dict = {}
        self.reasons: list = []
        self.missing: dict = {"model": [], "batches": 0, "tensors": 0, "loads": 0, "numpy": 0}
        self._module_binds = _bindings(module)
        self._on_device: set = set()

        by_scope: dict = {}
        for sc, node, name in found:
            by_scope.setdefault(id(sc), (sc, []))[1].append((node, name))
        fed_any = []
        callee_seeds: dict = {}
        for sc, items in by_scope.values():
            fed = self._fed(sc, items, callee_seeds)
            fed_any.extend((sc, node, name) for node, name in items if name in fed)
        if not fed_any:
            return
        # place fed models; losses with arguments (class weights) move too
        fed_names_by_scope: dict = {}
        for sc, node, name in fed_any:
            fed_names_by_scope.setdefault(id(sc), set()).add(name)
            if isinstance(node.value, cst.Call) and self._is_loss(node.value) and not node.value.args:
                continue
            self.edits[node.value] = lambda u: _method(u, "to", self.dev)
            self.missing["model"].append(name)
        for sc in scopes:
            models = set(fed_names_by_scope.get(id(sc), set()))
            seeds = callee_seeds.get(sc.node.name.value if sc.node is not None else None)
            if seeds is not None:
                models |= seeds.seeds_models
                sc.seeds_loaders = seeds.seeds_loaders
            if models or sc.seeds_loaders:
                self._analyze(sc, models)
        for n in nodes(module, into_scopes=True):
            if isinstance(n, cst.Call) and self.facts.is_torch(n.func, "torch.load") and \
                    call_arg(n, 1, "map_location") is None and not any(a.star for a in n.args):
                self.edits[n] = lambda u: _add_kwarg(u, "map_location", self.dev)
                self.missing["loads"] += 1
        primary = [f for f in fed_any if not (isinstance(f[1].value, cst.Call) and self._is_loss(f[1].value))]
        self._report(module, (primary or fed_any)[0], choice)

    def _fed(self, sc: _Scope, items: list, callee_seeds: dict) -> set:
        names = {name for _, name in items}
        fed = set()
        has_loop = False
        for n in nodes(sc.body):
            if isinstance(n, cst.For):
                has_loop = True
            if not isinstance(n, cst.Call):
                continue
            if isinstance(n.func, cst.Name) and n.func.value in names:
                fed.add(n.func.value)
            q = self.facts.qualname(n.func) or ""
            if q.startswith("torch.optim.") and n.args:
                for name in _names(n.args[0].value) & names:
                    fed.add(("optim", name))
            if isinstance(n.func, cst.Name) and n.func.value in self.functions:
                self._seed_callee(sc, n, names, callee_seeds, fed)
        out = {f for f in fed if isinstance(f, str)}
        if has_loop:
            out |= {f[1] for f in fed if isinstance(f, tuple)}
        return out

    def _seed_callee(self, sc: _Scope, call: cst.Call, models: set, callee_seeds: dict, fed: set) -> None:
        fn = self.functions[call.func.value]
        if fn is sc.node:
            return
        params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
        kw = {p.name.value for p in fn.params.kwonly_params} | set(params)
        loaders = self._loaders(sc)
        fed_params: set = set()
        loader_params: dict = {}
        for i, a in enumerate(call.args):
            if a.star:
                break
            pname = a.keyword.value if a.keyword is not None else (params[i] if i < len(params) else None)
            if pname is None or pname not in kw or not isinstance(a.value, cst.Name):
                continue
            v = a.value.value
            if v in models:
                called = any(isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == pname
                             for n in nodes(fn.body))
                if called:
                    fed.add(v)
                    fed_params.add(pname)
            elif v in loaders:
                loader_params[pname] = loaders[v]
        if not fed_params:
            return  # batches only need the device where they meet the model
        seeds = callee_seeds.setdefault(fn.name.value, _Scope(fn, fn.body))
        seeds.seeds_models |= fed_params
        for pname, known in loader_params.items():
            seeds.seeds_loaders[pname] = seeds.seeds_loaders.get(pname, True) and known

    def _loaders(self, sc: _Scope) -> dict:
        """Names bound to a DataLoader or dataset in this scope (or module scope): name -> origin known."""
        out = dict(sc.seeds_loaders)
        bodies = [sc.body] if sc.node is None else [self.ctx.module, sc.body]
        for body in bodies:
            for n in statements(body):
                if isinstance(n, cst.Assign):
                    known = self._iterable_origin(n.value, out)
                    if known is None:
                        continue
                    for t in n.targets:
                        for name in _target_names(t.target):
                            out[name] = known
        return out

    def _iterable_origin(self, value: cst.BaseExpression, loaders: dict) -> Optional[bool]:
        """True: yields tensors; False: a DataLoader over something unknown; None: not a loader."""
        if not isinstance(value, cst.Call):
            return None
        q = self.facts.qualname(value.func) or ""
        d = dotted(value.func) or ""
        last = q.rsplit(".", 1)[-1]
        if q.startswith("torch.utils.data") and last == "DataLoader":
            a = call_arg(value, 0, "dataset")
            if a is None:
                return False
            if isinstance(a.value, cst.Name):
                return loaders.get(a.value.value, False)
            return bool(self._iterable_origin(a.value, loaders))
        if q.startswith("torch.utils.data") and last in ("TensorDataset", "random_split", "Subset",
                                                          "ConcatDataset"):
            if last in ("Subset", "random_split", "ConcatDataset"):
                a = call_arg(value, 0, "dataset" if last != "ConcatDataset" else "datasets")
                if a is not None and isinstance(a.value, cst.Name):
                    return loaders.get(a.value.value, False)
                return False
            return True
        if q.startswith("torchvision.datasets.") or d in self.datasets_classes:
            return True
        return None

    # ---- per-scope dataflow ---------------------------------------------------------------
    def _analyze(self, sc: _Scope, models: set) -> None:
        body = sc.body
        loaders = self._loaders(sc)
        binds = _bindings(body)
        flows: list = []  # (targets, value expr)
        exprs: list = []  # Call / BinaryOperation / Comparison nodes
        numpy_calls: list = []
        loops: list = []
        model_calls: list = []
        for n in nodes(body):
            if isinstance(n, cst.Assign):
                for t in n.targets:
                    flows.append((_target_names(t.target), n.value))
            elif isinstance(n, (cst.AugAssign, cst.AnnAssign)) and n.value is not None:
                flows.append((_target_names(n.target), n.value))
            elif isinstance(n, cst.NamedExpr):
                flows.append((_target_names(n.target), n.value))
            elif isinstance(n, cst.For):
                flows.append((_target_names(n.target), n.iter))
                loop = self._batch_loop(n, loaders)
                if loop is not None:
                    loops.append(loop)
            elif isinstance(n, (cst.Call, cst.BinaryOperation, cst.Comparison)):
                exprs.append(n)
                if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute):
                    meth = n.func.attr.value
                    if meth == "numpy" and not n.args:
                        numpy_calls.append(n)
                    elif meth in ("append", "extend", "add", "put") and n.args:
                        r = n.func.value
                        if isinstance(r, cst.Name):
                            flows.append(([r.value], n.args[0].value))
                if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in models:
                    model_calls.append(n)
                elif (isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                      and isinstance(n.func.value, cst.Name) and n.func.value.value in models
                      and n.func.attr.value not in _MODULE_API):
                    model_calls.append(n)  # model.forward(x), model.predict(x)
                if isinstance(n, cst.Call):
                    self._opaque_use(n, models)

        batch_names = set()
        for lp in loops:
            batch_names.update(lp.names)
            if not lp.known:
                self.reasons.append(f"`{lp.source}` may yield non-tensors")
            self._move_batch(lp)
        on_device = set(models) | batch_names
        self._on_device = on_device
        placed: set = set()  # names whose binding sites now create them on the device
        unresolved: set = set()

        params = set()
        if sc.node is not None:
            params = {p.name.value for p in (*sc.node.params.posonly_params, *sc.node.params.params,
                                                 *sc.node.params.kwonly_params)}
        visiting: set = set()

        def need(name: str, strict: bool) -> bool:
            """Make sure ``name`` is created on the device; False when its origin is unknown."""
            if name in on_device or name in placed or name in visiting:
                return True
            sites = binds.get(name)
            if sites is None and name not in params and sc.node is not None:
                sites = self._module_binds.get(name)
            if sites is None:
                ok = name not in params
                if not ok and strict:
                    unresolved.add(name)
                return ok
            visiting.add(name)
            ok = True
            for kind, value, _stmt in sites:
                if kind == "aug":
                    continue
                if kind == "with":
                    ok = False
                elif kind == "for":
                    if isinstance(value, cst.Call) and dotted(value.func) == "range":
                        continue
                    sub = [m for m in _names(value) if m in binds or m in self._module_binds or m in params]
                    if not sub:
                        ok = False
                    for m in sub:
                        ok = need(m, False) and ok
                elif isinstance(value, (cst.Name, cst.Subscript, cst.Attribute)) and not (
                        isinstance(value, cst.Name) and value.value in ("None", "True", "False")):
                    # `x = data[0]`, `x = batch.inputs`: placed where `data` / `batch` is
                    for m in _names(value):
                        ok = need(m, False) and ok
                elif self._place_value(value) is False:
                    ok = False
            visiting.discard(name)
            placed.add(name)
            if not ok and strict:
                unresolved.add(name)
            return ok

        for _ in range(10):
            before = (len(on_device), len(placed), len(self.edits))
            on_device |= placed
            changed = True
            while changed:
                changed = False
                for targets, value in flows:
                    if self._carries(value, on_device):
                        new = set(targets) - on_device
                        if new:
                            on_device |= new
                            changed = True
            for call in model_calls:
                for a in call.args:
                    self._place_operand(a.value, need, strict=True)
            for e in exprs:
                if not self._carries(e, on_device):
                    continue
                for op in self._operands(e):
                    if self._carries(op, on_device):
                        continue
                    self._place_operand(op, need, strict=False)
            if (len(on_device), len(placed), len(self.edits)) == before:
                break
        for e in exprs:
            if isinstance(e, cst.Call) and (self.facts.qualname(e.func) or "").split(".")[0] in _HOST_LIBS:
                if any(self._carries(a.value, on_device) for a in e.args):
                    self.reasons.append(f"`{self.ctx.module.code_for_node(e.func)}` reads values that are "
                                        "now on the device")
        for name in sorted(unresolved):
            self.reasons.append(f"cannot tell where `{name}` comes from")
        for call in numpy_calls:
            recv = call.func.value
            if not self._carries(recv, on_device):
                continue
            if isinstance(recv, cst.Call) and isinstance(recv.func, cst.Attribute) and recv.func.attr.value == "cpu":
                continue
            self.edits[call] = lambda u: u.with_changes(
                func=u.func.with_changes(value=_method(u.func.value, "cpu")))
            self.missing["numpy"] += 1

    def _opaque_use(self, call: cst.Call, models: set) -> None:
        """A model handed to code this file cannot see may be fed tensors there."""
        if not any(isinstance(a.value, cst.Name) and a.value.value in models for a in call.args):
            return
        d = dotted(call.func)
        if d is None or d in self.functions or d in _BUILTINS:
            return
        q = self.facts.qualname(call.func) or ""
        if q.split(".")[0] == "torch" or (isinstance(call.func, cst.Attribute) and dotted(call.func.value) in models):
            return
        self.reasons.append(f"the model is passed to `{d}`, which this file cannot see")

    def _carries(self, expr: cst.CSTNode, on_device: set) -> bool:
        """Whether the value of ``expr`` may live on the device: it reads a name that does,
        outside factory arguments and host-side reads (``x.size(0)``, ``len(x)``, ``x.shape``)."""
        stack = [expr]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Name):
                if n.value in on_device:
                    return True
            elif isinstance(n, cst.Attribute):
                if n.attr.value not in _HOST_ATTRS:
                    stack.append(n.value)
            elif isinstance(n, cst.Call):
                if n in self.edits and n is not expr and self._is_factory(n):
                    return True
                if self._is_factory(n) or dotted(n.func) in ("len", "range", "int", "float", "str", "bool"):
                    continue
                if isinstance(n.func, cst.Attribute) and n.func.attr.value in _HOST_METHODS:
                    continue
                stack.append(n.func)
                stack.extend(a.value for a in n.args)
            elif isinstance(n, cst.Arg):
                stack.append(n.value)
            elif isinstance(n, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
                continue
            else:
                stack.extend(children(n, trivia=False))
        return False

    def _is_factory(self, call: cst.Call) -> bool:
        q = self.facts.qualname(call.func) or ""
        last = q.rsplit(".", 1)[-1]
        return q.count(".") == 1 and q.startswith("torch.") and (
            last in DEVICE_LESS_FACTORIES or last in ("as_tensor", "from_numpy"))

    @staticmethod
    def _operands(e: cst.CSTNode) -> list:
        if isinstance(e, cst.Call):
            return [a.value for a in e.args]
        if isinstance(e, cst.BinaryOperation):
            return [e.left, e.right]
        if isinstance(e, cst.Comparison):
            return [e.left, *(c.comparator for c in e.comparisons)]
        return []

    def _place_operand(self, op: cst.BaseExpression, need, strict: bool) -> None:
        if isinstance(op, cst.Name):
            need(op.value, strict)
            return
        if isinstance(op, (cst.BinaryOperation, cst.UnaryOperation)):
            for sub in (op.left, op.right) if isinstance(op, cst.BinaryOperation) else (op.expression,):
                self._place_operand(sub, need, strict)
            return
        if isinstance(op, (cst.Tuple, cst.List)):
            for el in op.elements:
                self._place_operand(el.value, need, strict)
            return
        if isinstance(op, cst.Call):
            if self._place_value(op) is False and strict and not (_names(op) & self._on_device):
                self.reasons.append(f"cannot place `{self.ctx.module.code_for_node(op)}` on the device")

    def _place_value(self, value: cst.BaseExpression) -> Optional[bool]:
        """Make the value of a binding site live on the device. True: placed (or already
        on the device), None: not a tensor (literal), False: unknown."""
        if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString,
                              cst.ConcatenatedString, cst.Dict, cst.Set)):
            return None
        if isinstance(value, (cst.List, cst.Tuple)):
            return None if not any(isinstance(e.value, cst.Call) for e in value.elements) else False
        if isinstance(value, cst.Name) and value.value in ("None", "True", "False"):
            return None
        if isinstance(value, cst.Call):
            q = self.facts.qualname(value.func) or ""
            last = q.rsplit(".", 1)[-1]
            if q.count(".") == 1 and q.startswith("torch.") and (last in DEVICE_LESS_FACTORIES
                                                                 or last == "as_tensor"):
                if value in self.edits:
                    return True
                if any(a.star for a in value.args) or call_arg(value, None, "generator") or \
                        call_arg(value, None, "out"):
                    self.reasons.append(f"cannot add `device=` to `{self.ctx.module.code_for_node(value)}`")
                    return False
                self.edits[value] = lambda u: _add_kwarg(u, "device", self.dev)
                self.missing["tensors"] += 1
                return True
            if q in ("torch.from_numpy",):
                if value not in self.edits:
                    self.edits[value] = lambda u: _method(u, "to", self.dev)
                    self.missing["tensors"] += 1
                return True
            # a tensor method chain on a factory: `torch.arange(4).float()`
            if isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Call):
                inner = self._place_value(value.func.value)
                if inner:
                    return True
            if isinstance(value.func, cst.Name) and value.func.value in ("int", "float", "len", "range", "str",
                                                                         "list", "dict", "bool"):
                return None
        return False

    # ---- batches ---------------------------------------------------------------------
    def _batch_loop(self, node: cst.For, loaders: dict) -> Optional[_Loop]:
        it, target = node.iter, node.target
        while isinstance(it, cst.Call) and (dotted(it.func) in _WRAPPERS) and it.args:
            if dotted(it.func) == "enumerate":
                if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
                    return None
                target = target.elements[1].value
            it = it.args[0].value
        if isinstance(it, cst.Name):
            if it.value not in loaders:
                return None
            known, source = loaders[it.value], it.value
        else:
            known = self._iterable_origin(it, loaders)
            if known is None:
                return None
            source = self.ctx.module.code_for_node(it)
        if not isinstance(node.body, cst.IndentedBlock):
            self.reasons.append(f"the loop over `{source}` is on one line")
            return None
        if isinstance(target, (cst.Tuple, cst.List)):
            names = []
            for el in target.elements:
                if not isinstance(el.value, cst.Name):
                    self.reasons.append(f"cannot move the nested batch of `{source}`")
                    return None
                names.append(el.value.value)
            return _Loop(node, names, "tuple", known, source)
        if isinstance(target, cst.Name):
            form = self._batch_form(node.body, target.value)
            if form is None:
                self.reasons.append(f"cannot tell the structure of `{target.value}`")
                return None
            return _Loop(node, [target.value], form, known, source)
        return None

    @staticmethod
    def _batch_form(body: cst.CSTNode, name: str) -> Optional[str]:
        forms = set()
        for n in nodes(body):
            if isinstance(n, cst.Subscript) and isinstance(n.value, cst.Name) and n.value.value == name:
                if len(n.slice) == 1 and isinstance(n.slice[0].slice, cst.Index):
                    idx = n.slice[0].slice.value
                    if isinstance(idx, cst.SimpleString):
                        forms.add("dict")
                    elif isinstance(idx, cst.Integer):
                        forms.add("list")
                    else:
                        forms.add("?")
                else:
                    forms.add("?")
            elif isinstance(n, cst.Assign) and isinstance(n.value, cst.Name) and n.value.value == name and \
                    any(isinstance(t.target, (cst.Tuple, cst.List)) for t in n.targets):
                forms.add("list")
            elif isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and any(
                    isinstance(a.value, cst.Name) and a.value.value == name for a in n.args):
                forms.add("name")
        if forms == {"dict"}:
            return "dict"
        if forms == {"list"}:
            return "list"
        if forms == {"name"}:
            return "name"
        return None

    def _move_batch(self, lp: _Loop) -> None:
        d = self.ctx.module.code_for_node(self.dev)
        if lp.form == "tuple":
            names = [n for n in lp.names if n != "_"]
            lhs = ", ".join(names)
            rhs = ", ".join(f"{n}.to({d})" for n in names)
            src = f"{lhs} = {rhs}\n"
        elif lp.form == "dict":
            b = lp.names[0]
            k, v = ("k", "v") if not {"k", "v"} & self.facts.bound_names else ("key", "value")
            src = f"{b} = {{{k}: {v}.to({d}) for {k}, {v} in {b}.items()}}\n"
        elif lp.form == "list":
            b = lp.names[0]
            t = "t" if "t" not in self.facts.bound_names else "item"
            src = f"{b} = [{t}.to({d}) for {t} in {b}]\n"
        else:
            b = lp.names[0]
            src = f"{b} = {b}.to({d})\n"
        stmt = cst.parse_statement(src)
        self.edits[lp.node.body] = lambda u, stmt=stmt: u.with_changes(body=[stmt, *u.body])
        self.missing["batches"] += 1

    # ---- report ------------------------------------------------------------------------
    def _report(self, module: cst.Module, first, choice) -> None:
        sc, node, name = first
        m = self.missing
        dev = module.code_for_node(self.dev)  # the configured device name (--device-name / device-name)
        parts = ["a device variable"]
        if m["model"]:
            parts.append(", ".join(f"`{n}.to({dev})`" for n in dict.fromkeys(m["model"])))
        if m["batches"]:
            parts.append(f"moving the batch in {m['batches']} loop{'s' if m['batches'] > 1 else ''}")
        if m["tensors"]:
            parts.append(f"`device={dev}` on {m['tensors']} new tensor{'s' if m['tensors'] > 1 else ''}")
        if m["loads"]:
            parts.append("`map_location` on `torch.load`")
        if m["numpy"]:
            parts.append("`.cpu()` before `.numpy()`")
        message = (f"`{name}` is built and fed data but no device is chosen anywhere in the file: it runs "
                   f"on the CPU even where a GPU is available (missing: {'; '.join(parts)})")
        # one replacement per outermost edited node; edits nested in it are composed into it
        transformer = _Edits(self.edits)
        replacements = {}
        stack = [module]
        while stack:
            n = stack.pop()
            if n in self.edits:
                replacements[n] = n.visit(transformer)
            else:
                stack.extend(children(n))
        reasons = list(dict.fromkeys(self.reasons))
        if reasons:
            fix = choice.fix(Applicability.UNSAFE,
                             "port to a device variable (unsafe: " + "; ".join(reasons) + ")", replacements)
        else:
            fix = choice.fix(Applicability.SAFE, "port to a device variable", replacements)
        self.report(node.value, message, fix)
