from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from devlint.analysis.batches import BatchLoop, Loaders, dataset_classes, dataset_inputs
from devlint.analysis.checkpoints import is_test_file
from devlint.analysis.dataflow import DEVICE, HOST, HOST_ARG_CALLS, ORIGIN, Leaf, Origins, is_functional_loss, \
    operands, passed_args, returned_values
from devlint.analysis.scripts import device_aware, fed_models, model_constructions, smoke_test_library
from devlint.callargs import with_keyword
from devlint.diagnostic import Applicability
from devlint.facts import CONTAINER, TENSOR, call_arg, dotted
from devlint.fixes import choose_device, composed_replacements, legacy_on_device, mapped_to_device, method_call, \
    torch_ref
from devlint.rule import Invalid, Rule
from devlint.walk import nodes

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
# what each kind of edit is called in the message (the message lists exactly the edits made)
_EDIT_WORDS = {
    "batch": ("moving the batch in {n} loop", "moving the batch in {n} loops"),
    "device": ("`device={d}` on {n} new tensor", "`device={d}` on {n} new tensors"),
    "to": ("`.to({d})` after {n} `torch.from_numpy`", "`.to({d})` after {n} `torch.from_numpy` calls"),
    "legacy": ("`.to({d})` after {n} legacy tensor constructor", "`.to({d})` after {n} legacy tensor constructors"),
    "map": ("`.to({d})` on what {n} `map` makes", "`.to({d})` on what {n} `map` calls make"),
    "use": ("`.to({d})` at {n} direct use of data-set tensors", "`.to({d})` at {n} direct uses of data-set tensors"),
    "load": ("`map_location={d}` on {n} `torch.load`", "`map_location={d}` on {n} `torch.load` calls"),
    "cpu": ("`.cpu()` before {n} `.numpy()`", "`.cpu()` before {n} `.numpy()` calls"),
}


def _subexpressions(e: cst.BaseExpression) -> list:
    """The parts of an expression a value can be moved in, one level down: a call's receiver and
    arguments, both sides of an operation, the elements of a display, the value of an
    attribute or subscript, the branches of a conditional."""
    if isinstance(e, cst.Call):
        recv = [e.func.value] if isinstance(e.func, cst.Attribute) else []
        return recv + [a.value for a in e.args if not a.star]
    if isinstance(e, (cst.BinaryOperation, cst.BooleanOperation)):
        return [e.left, e.right]
    if isinstance(e, cst.UnaryOperation):
        return [e.expression]
    if isinstance(e, cst.Comparison):
        return [e.left, *(c.comparator for c in e.comparisons)]
    if isinstance(e, (cst.Tuple, cst.List, cst.Set)):
        return [el.value for el in e.elements if not isinstance(el, cst.StarredElement)]
    if isinstance(e, (cst.Attribute, cst.Subscript)):
        return [e.value]
    if isinstance(e, cst.IfExp):
        return [e.body, e.orelse]
    return []


@dataclass
class _Scope:
    node: Optional[cst.CSTNode]  # FunctionDef or None (module level)
    body: cst.CSTNode
    seeds_loaders: dict = field(default_factory=dict)  # param name -> origin known
    models: set = field(default_factory=set)
    moved: set = field(default_factory=set)  # loops whose batch is moved
    flow: Optional[Origins] = None
    cls: Optional[cst.ClassDef] = None  # a method of a Module class of the file: its class


class MissingDevicePlacement(Rule):
    """
    ## What it does
    Flags legacy CPU-only training or evaluation scripts: a file that builds an
    `nn.Module` (a `torch.nn` class, a subclass defined or imported in the file, a
    `torchvision.models` factory) and feeds it data (calls it, or trains it over a
    DataLoader) without choosing a device anywhere. One finding per file, at the
    model's construction, naming what the port needs.

    Off by default: it is porting advice (the script runs, only without the GPU), not a
    crash or a wasted copy. Select it to port: `devlint --select DL010 --fix train.py`,
    or `extend-select = ["DL010"]` in the config.

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
    on values that come back from the model. A legacy constructor over data written in
    the call (`torch.LongTensor([[1, 2]])`) becomes `torch.tensor(..., dtype=torch.int64,
    device=device)`; over a variable (`torch.LongTensor(batch)`, whose meaning depends on
    what `batch` holds) it is followed by `.to(device)`. A tensor that also feeds a
    `TensorDataset`/`DataLoader` stays on the host (its batches move in the loop) and
    moves where it is used directly (`model(X_test.to(device))`). Tensors made per call in
    the model's own methods (an RNN's initial state in `forward`, `init_hidden()`) and in
    the file's helpers they call are created on the device too. On a CPU-only machine the
    program computes exactly what it did before. The port must be complete: every tensor
    that reaches the model or a loss is created on the device, moved with its batch or at
    its use, or comes out of the model. When one cannot be placed (its origin is unknown,
    it comes from code the file cannot see, or a data-set tensor is mixed with other
    values under one name bound by a loop or updated in place), there is no fix and the
    message names the value that would stay on the host. A complete port is unsafe (the
    message says why) when a loader's dataset may yield non-tensors, the model is handed
    to code the file cannot see, or a host library reads values now on the device.
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
        # a layer without parameters, built in a helper: nothing to place
        "import torch\nfrom torch import nn\ndef regroup(x, h, w):\n"
        "    unflatten = nn.Sequential(nn.Unflatten(2, torch.Size([h, w])))\n    return unflatten(x)\n"
        "print(regroup(torch.ones(1, 4, 6), 2, 3).shape)\n",
        # a model module whose import fallback and `__main__` smoke test train nothing
        "import torch\nfrom torch import nn\ntry:\n    from fancy import SyncBatchNorm as BN\n"
        "except ImportError:\n    BN = nn.BatchNorm2d\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.bn = BN(3)\n    def forward(self, x):\n        return self.bn(x)\n"
        "if __name__ == '__main__':\n    model = Net()\n    print(model(torch.randn(1, 3, 4, 4)).shape)\n",
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
        # the tutorial shape: Python lists rebound to a legacy tensor, then used whole
        Invalid(
            "import torch\nfrom torch import nn\n\nmodel = nn.Embedding(5, 2)\nbatch = [[1, 2], [3, 4]]\n"
            "batch = torch.LongTensor(batch)\nprint(model(batch).sum().item())\n",
            "import torch\nfrom torch import nn\n\n"
            "device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
            "model = nn.Embedding(5, 2).to(device)\nbatch = [[1, 2], [3, 4]]\n"
            "batch = torch.LongTensor(batch).to(device)\nprint(model(batch).sum().item())\n",
        ),
        # the batches come from code this file cannot see: a port would leave `x` on the host
        Invalid(
            "import torch\nfrom torch import nn\nfrom mylib import load_batches\n\nmodel = nn.Linear(4, 2)\n"
            "for x in load_batches():\n    print(model(x))\n",
        ),
    ]

    # ------------------------------------------------------------------------------
    def finish(self) -> None:
        name = self.ctx.filename
        if is_test_file(name) or name.endswith("_tests.py") or self.facts.device_vars or self.facts.multi_gpu:
            return
        module = self.ctx.module
        self.functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
        scopes = [_Scope(None, module)] + [_Scope(fn, fn.body) for fn in self.functions.values()]
        found = [(sc, node, name) for sc in scopes for node, name in model_constructions(self.facts, sc.node, sc.body)]
        if not found or device_aware(module, self.facts):
            return
        self.datasets_classes = dataset_classes(module, self.facts)
        if smoke_test_library(module):
            return
        try:
            self._port(module, scopes, found)
        finally:
            # the edits' and the origins' callbacks close over this rule: let them go, so the
            # file's tree is freed when the lint ends (no reference cycle)
            for sc in scopes:
                sc.flow = None
            self.edits, self.scopes, self.method_flows = {}, [], {}

    @staticmethod
    def _is_loss(call: cst.Call) -> bool:
        return (dotted(call.func) or "").endswith("Loss")

    # ---- the port ----------------------------------------------------------------
    def _edit(self, node: cst.CSTNode, kind: str, fn) -> None:
        self.edits[node] = (kind, fn)

    def _port(self, module: cst.Module, scopes: list, found: list) -> None:
        choice = choose_device(self.ctx, prefer_input=False)
        self.dev = choice.expr
        self.edits: dict = {}  # original node -> (kind, edit function)
        self.models_moved: list = []
        self.model_classes: dict = {}  # model name -> its class in the file
        self.method_flows: dict = {}  # a method of a model's class -> the origins of its values
        self._visiting: set = set()
        self.reasons: list = []  # why a complete port is still unsafe
        self.leftovers: dict = {}  # value that would stay on the host -> why
        self.loop_why: dict = {}  # a loader loop whose batch cannot be moved -> why
        self._following: set = set()  # functions of the file whose returns are being followed
        self.scopes = scopes

        by_scope: dict = {}
        for sc, node, name in found:
            by_scope.setdefault(id(sc), (sc, []))[1].append((node, name))
        fed_any = []
        callee_seeds: dict = {}  # function name -> (parameters given a model, parameters given a loader)
        for sc, items in by_scope.values():
            fed = fed_models(self.facts, self.functions, sc.node, sc.body, {name for _, name in items},
                             self._loaders(sc).names, callee_seeds)
            fed_any.extend((sc, node, name) for node, name in items if name in fed)
        if not fed_any:
            return
        for sc, node, name in fed_any:
            sc.models.add(name)
            if isinstance(node.value, cst.Call) and self._is_loss(node.value) and not node.value.args:
                continue  # a loss without arguments holds no tensor: nothing to move
            self._edit(node.value, "model", lambda u: method_call(u, "to", self.dev))
            self.models_moved.append(name)
        for sc in scopes:
            seeds = callee_seeds.get(sc.node.name.value if sc.node is not None else None)
            if seeds is not None:
                sc.models |= seeds[0]
                sc.seeds_loaders = seeds[1]
        self.dataset_inputs = dataset_inputs(module, self.facts, self.datasets_classes)
        visiting: set = set()
        self._visiting, self.method_flows = visiting, {}
        classes = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
        self.model_classes = {name: classes[dotted(node.value.func)] for _, node, name in fed_any
                              if isinstance(node.value, cst.Call) and dotted(node.value.func) in classes}
        for sc in scopes:
            sc.flow = Origins(self.facts, sc.body, sc.node, outer=scopes[0].flow, visiting=visiting,
                              call_leaf=lambda c, sc=sc: self._model_call(sc, c) or self._local_call(sc, c),
                              loop_leaf=lambda lp, name, sc=sc: self._loop_leaf(sc, lp, name),
                              name_leaf=lambda n, sc=sc: frozenset() if n in self._callables(sc) else None,
                              param_leaves=lambda o, n, sc=sc: self._passed(sc, n),
                              call_element=lambda c, i, sc=sc: self._local_element(sc, c, i))
        for sc in scopes:
            if sc.models or sc.seeds_loaders or any(self._model_call(sc, n) for n in nodes(sc.body)
                                                    if isinstance(n, cst.Call)):
                self._batches(sc)
                self._analyze(sc)
        for sc in self._method_scopes(module):
            self._analyze(sc, strict=False)
        for n in nodes(module, into_scopes=True):
            if isinstance(n, cst.Call) and self.facts.is_torch(n.func, "torch.load") and \
                    call_arg(n, 1, "map_location") is None and not any(a.star for a in n.args):
                self._edit(n, "load", lambda u: with_keyword(u, "map_location", self.dev))
        primary = [f for f in fed_any if not (isinstance(f[1].value, cst.Call) and self._is_loss(f[1].value))]
        self._report(module, (primary or fed_any)[0], choice)

    # ---- where values come from (devlint.analysis.dataflow) ------------------------------
    def _callables(self, sc: _Scope) -> set:
        """Models callable in ``sc``: its own, and the module's that it does not rebind."""
        if sc.node is None:
            return sc.models
        own = sc.flow.binds.keys() | sc.flow.params if sc.flow is not None else set()
        return sc.models | (self.scopes[0].models - own)

    def _model_call(self, sc: _Scope, call: cst.Call) -> Optional[frozenset]:
        f, models = call.func, self._callables(sc)
        if sc.cls is not None:  # inside a method: `self(x)`, `self.fc(x)`, `self.init_hidden(n)`
            me = sc.node.params.params[0].name.value
            if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == me:
                if f.attr.value in _MODULE_API:
                    return None
                made = self._method_returns(sc.cls, f.attr.value)
                return made if made is not None else frozenset({Leaf(DEVICE, call, None)})
            root = f
            while isinstance(root, (cst.Attribute, cst.Subscript)):
                root = root.value
            if isinstance(root, cst.Name) and root.value == me:
                return frozenset({Leaf(DEVICE, call, None)})
        if (isinstance(f, cst.Name) and (f.value in models or self._model_alias(sc, f.value))) or (
                isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value in models
                and f.attr.value not in _MODULE_API):  # model(x), model.forward(x), model.predict(x)
            if isinstance(f, cst.Attribute):
                made = self._method_returns(self.model_classes.get(f.value.value), f.attr.value)
                if made is not None:
                    return made
            return frozenset({Leaf(DEVICE, call, None)})
        return None

    def _method_scopes(self, module: cst.Module) -> list:
        """The methods of the file's Module classes (but ``__init__``, whose tensors are parameters,
        buffers or attributes): a tensor they create per call next to the model's inputs or
        submodules (an RNN's initial state in ``forward``) must be created on the device too.
        Their inputs are on the device (every parameter but ``self``)."""
        out = []
        for cls in module.body:
            if not (isinstance(cls, cst.ClassDef) and cls.name.value in self.facts.module_classes):
                continue
            for meth in cls.body.body:
                if not isinstance(meth, cst.FunctionDef) or meth.name.value == "__init__" or not meth.params.params:
                    continue
                sc = _Scope(meth, meth.body, cls=cls)
                me = meth.params.params[0].name.value
                sc.flow = Origins(self.facts, meth.body, meth, outer=self.scopes[0].flow, visiting=self._visiting,
                                  call_leaf=lambda c, sc=sc: self._model_call(sc, c) or self._local_call(sc, c),
                                  name_leaf=lambda n, me=me: frozenset() if n == me else None,
                                  param_leaves=lambda o, n, meth=meth: frozenset({Leaf(DEVICE, meth, None)}))
                out.append(sc)
        self.scopes.extend(out)
        return out

    def _method_returns(self, cls: Optional[cst.ClassDef], name: str) -> Optional[frozenset]:
        """``model.init_hidden()``: what a method of the model's class (not its forward) returns
        is made there (``torch.zeros(1, self.hidden)`` must be created on the device too);
        calls of the module itself or its submodules inside it (``self.fc(x)``) are the model's
        output. None for the forward pass, or a method the class does not define."""
        if cls is None or name in ("forward", "__call__"):
            return None
        meth = next((m for m in cls.body.body if isinstance(m, cst.FunctionDef) and m.name.value == name), None)
        if meth is None or not meth.params.params or (cls.name.value, name) in self._following:
            return None
        flow = self.method_flows.get(meth)
        if flow is None:
            me = meth.params.params[0].name.value

            def on_self(call: cst.Call) -> Optional[frozenset]:
                f = call.func
                while isinstance(f, cst.Attribute):
                    if isinstance(f.value, cst.Name) and f.value.value == me:
                        made = self._method_returns(cls, f.attr.value)
                        return made if made is not None else frozenset({Leaf(DEVICE, call, None)})
                    f = f.value
                if isinstance(f, cst.Name) and f.value == me:
                    return frozenset({Leaf(DEVICE, call, None)})
                return None

            flow = Origins(self.facts, meth.body, meth, outer=self.scopes[0].flow, visiting=self._visiting,
                           call_leaf=on_self, name_leaf=lambda n: frozenset() if n == me else None)
            self.method_flows[meth] = flow
        self._following.add((cls.name.value, name))
        try:
            out: frozenset = frozenset()
            for v in returned_values(meth):
                out |= flow.leaves(v)
            return out
        finally:
            self._following.discard((cls.name.value, name))

    def _model_alias(self, sc: _Scope, name: str) -> bool:
        """``for net in [net_a, net_b]:`` / ``for net, opt in zip(nets, opts):`` over the models."""
        if sc.flow is None or name in self._callables(sc):
            return False
        sites = sc.flow.binds.get(name, [])
        for site in sites:
            seq = site.value
            if site.kind != "for":
                return False
            if isinstance(seq, cst.Name):
                seqs = sc.flow.binds.get(seq.value) or (self.scopes[0].flow.binds.get(seq.value, []))
                if len(seqs) != 1:
                    return False
                seq = seqs[0].value
            if not (isinstance(seq, (cst.List, cst.Tuple)) and seq.elements and all(
                    isinstance(e.value, cst.Name) and e.value.value in self._callables(sc) for e in seq.elements)):
                return False
        return bool(sites)

    def _local_call(self, sc: _Scope, call: cst.Call) -> Optional[frozenset]:
        """A function of the file: its value comes from what it returns."""
        fn = self.functions.get(call.func.value) if isinstance(call.func, cst.Name) else None
        if fn is None or fn.name.value in self._following:
            return None
        callee = next(c for c in self.scopes if c.node is fn)
        values = returned_values(fn)
        if not values:
            return None
        self._following.add(fn.name.value)
        try:
            out: frozenset = frozenset()
            for v in values:
                out |= callee.flow.leaves(v)
            return out
        finally:
            self._following.discard(fn.name.value)

    def _local_element(self, sc: _Scope, call: cst.Call, i: int) -> Optional[frozenset]:
        """``a, b = f()``: element ``i`` of what a function of the file returns, when every
        ``return`` of it is a tuple long enough."""
        fn = self.functions.get(call.func.value) if isinstance(call.func, cst.Name) else None
        if fn is None or fn.name.value in self._following or self._model_call(sc, call) is not None:
            return None
        values = returned_values(fn)
        if not values or not all(isinstance(v, cst.Tuple) and len(v.elements) > i and not any(
                isinstance(e, cst.StarredElement) for e in v.elements) for v in values):
            return None
        callee = next(c for c in self.scopes if c.node is fn)
        self._following.add(fn.name.value)
        try:
            out: frozenset = frozenset()
            for v in values:
                out |= callee.flow.leaves(v.elements[i].value)
            return out
        finally:
            self._following.discard(fn.name.value)

    def _loop_leaf(self, sc: _Scope, loop: cst.For, name: str) -> Optional[frozenset]:
        lp = next((lp for lp in sc.moved if lp.node is loop), None)
        if lp is not None:
            return frozenset({Leaf(DEVICE, loop, None)}) if name in lp.names else frozenset()
        why = self.loop_why.get(loop)
        return frozenset({Leaf(HOST, loop, None, why)}) if why else None

    def _passed(self, sc: _Scope, name: str) -> Optional[frozenset]:
        """What the file's calls of ``sc``'s function pass for parameter ``name``."""
        flows = {id(c.body): c for c in self.scopes}
        args = passed_args(sc.node, name, [c.body for c in self.scopes])
        out: frozenset = frozenset()
        for body, expr, element in args or ():
            caller = flows[id(body)]
            if element is None:
                out |= caller.flow.leaves(expr)
                continue
            known = self._local_element(caller, expr, element) if isinstance(expr, cst.Call) else None
            out |= known if known is not None else frozenset(
                {Leaf(HOST, expr, None, f"unpacked from `{self.ctx.module.code_for_node(expr)}`")})
        return out or None

    def _loaders(self, sc: _Scope) -> Loaders:
        return Loaders(self.facts, self.ctx.module, sc.body, self.datasets_classes, sc.seeds_loaders)

    def _batches(self, sc: _Scope) -> None:
        loaders = self._loaders(sc)
        for n in nodes(sc.body):
            if isinstance(n, cst.For):
                lp, why = loaders.batch_loop(n)
                if why is not None:
                    self.loop_why[n] = why
                if lp is not None:
                    sc.moved.add(lp)
                    if not lp.known:
                        self.reasons.append(f"`{lp.source}` may yield non-tensors")
                    self._move_batch(lp)

    def _analyze(self, sc: _Scope, strict: bool = True) -> None:
        """Place what the model, a loss or an operation with a device value reads in one scope.
        ``strict``: a value that cannot be placed is a leftover (in a method of a Module class,
        whose inputs are assumed on the device, only creation sites are placed)."""
        flow = sc.flow
        sinks, ops, numpy_calls = [], [], []
        for n in nodes(sc.body):
            if isinstance(n, cst.Call):
                if self._model_call(sc, n) is not None or is_functional_loss(self.facts.qualname(n.func)):
                    sinks.extend(a.value for a in n.args)  # every tensor the model or a loss reads
                if self.facts.qualname(n.func) not in HOST_ARG_CALLS:
                    ops.append(n)
                if isinstance(n.func, cst.Attribute) and n.func.attr.value == "numpy" and not n.args:
                    numpy_calls.append(n)
                if sc.cls is None:
                    self._opaque_use(n, self._callables(sc))
            elif isinstance(n, (cst.BinaryOperation, cst.Comparison, cst.AugAssign, cst.Subscript)):
                ops.append(n)
        for e in sinks:
            self._place_expr(sc, e, strict=strict)
        # a tensor next to a device value in an operation must be there too (unknowns may be numbers)
        for _ in range(10):
            changed = False
            for op in ops:
                parts = operands(op)
                if any(self._on_device(flow.leaves(p)) for p in parts):
                    for p in parts:
                        target = isinstance(op, cst.AugAssign) and p is op.target
                        changed = self._place_expr(sc, p, strict=False, target=target) or changed
            if not changed:
                break
        if sc.cls is not None:
            return
        for op in ops:
            if isinstance(op, cst.Call) and (self.facts.qualname(op.func) or "").split(".")[0] in _HOST_LIBS:
                if any(self._on_device(flow.leaves(a.value)) for a in op.args):
                    self.reasons.append(f"`{self.ctx.module.code_for_node(op.func)}` reads values that are "
                                        "now on the device")
        for call in numpy_calls:
            recv = call.func.value
            if isinstance(recv, cst.Call) and isinstance(recv.func, cst.Attribute) and recv.func.attr.value == "cpu":
                continue
            if self._on_device(flow.leaves(recv)):
                self._edit(call, "cpu", lambda u: u.with_changes(func=u.func.with_changes(
                    value=method_call(u.func.value, "cpu"))))

    def _on_device(self, leaves) -> bool:
        return any(lf.kind == DEVICE or (lf.kind == ORIGIN and lf.node in self.edits) for lf in leaves)

    def _place_expr(self, sc: _Scope, e: cst.BaseExpression, strict: bool, target: bool = False,
                    seen: Optional[set] = None) -> bool:
        """Place what ``e`` is built from: a data-set tensor moved at this use (``model(X[:4])``
        -> ``model(X[:4].to(device))``: the data set stays on the host, its loader's batches move
        in the loop), every other creation site on the device. A name that mixes a data-set
        tensor with other values is followed to its bindings (``inp = torch.cat([X, h])``: ``X``
        moves there). True when a new edit was made."""
        if e in self.edits:
            return False
        if not target and self._held_expr(sc, e, set()) and self.facts.kind_of(e, sc.node) != CONTAINER and \
                not isinstance(e, (cst.Tuple, cst.List, cst.Set, cst.Dict)):
            self._edit(e, "use", lambda u: method_call(u, "to", self.dev))
            return True
        leaves = sc.flow.leaves(e)
        held = [lf for lf in leaves if self._held(lf)]
        if not held:
            changed = False
            for lf in leaves:
                changed = self._place(lf, strict) or changed
            return changed
        if isinstance(e, cst.Name) and not target:
            bound = self._bindings_of(sc, e.value)
            seen = set() if seen is None else seen
            if bound is not None and (id(bound[0]), e.value) not in seen:
                seen.add((id(bound[0]), e.value))
                changed = False
                for site in bound[1]:
                    changed = self._place_expr(bound[0], site.value, strict, seen=seen) or changed
                return changed
        parts = [] if target else _subexpressions(e)
        if not parts:  # bound by a loop or an unpacking, or updated in place
            for lf in held:
                self.leftovers.setdefault(lf.name, "assigned in place" if target else
                                          f"it also feeds `{self.dataset_inputs[lf.name]}` and is mixed "
                                          "with other values")
            return False
        changed = False
        for p in parts:
            changed = self._place_expr(sc, p, strict, seen=seen) or changed
        return changed

    def _bindings_of(self, sc: _Scope, name: str) -> Optional[tuple]:
        """``(scope, sites)`` when every binding of ``name`` seen from ``sc`` is a plain assignment."""
        if name in sc.flow.binds:
            owner = sc
        elif name not in sc.flow.params and name in self.scopes[0].flow.binds:
            owner = self.scopes[0]
        else:
            return None
        sites = owner.flow.binds[name]
        if not all(st.kind == "assign" and st.index is None for st in sites):
            return None
        return owner, sites

    def _held(self, lf: Leaf) -> bool:
        """A creation site bound to a name that also feeds a Dataset/DataLoader."""
        return lf.kind == ORIGIN and lf.name in self.dataset_inputs

    def _held_expr(self, sc: _Scope, e: cst.BaseExpression, seen: set) -> bool:
        """``e`` is a tensor made only of values that feed a Dataset/DataLoader (``X``, ``X[:4]``,
        ``X_test = X[-8:]``, ``X.float() / 255``), numbers aside: it can be moved where it is used."""
        if isinstance(e, cst.Name):
            if e.value in self.dataset_inputs:  # the data set's own tensor, not a namesake
                return any(self._held(lf) for lf in sc.flow.leaves(e))
            if e.value in seen or len(seen) > 20:
                return False
            seen.add(e.value)
            bound = self._bindings_of(sc, e.value)
            return bound is not None and all(self._held_expr(bound[0], st.value, seen) for st in bound[1])
        if isinstance(e, cst.Subscript):
            return self._held_expr(sc, e.value, seen)
        if isinstance(e, cst.Attribute):
            return e.attr.value in ("T", "mT", "data") and self._held_expr(sc, e.value, seen)
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute):
            return self._held_expr(sc, e.func.value, seen) and not any(sc.flow.leaves(a.value) for a in e.args)
        if isinstance(e, cst.BinaryOperation):
            sides = [x for x in (e.left, e.right) if sc.flow.leaves(x)]
            return bool(sides) and all(self._held_expr(sc, x, seen) for x in sides)
        if isinstance(e, cst.UnaryOperation):
            return self._held_expr(sc, e.expression, seen)
        return False

    def _place(self, lf: Leaf, strict: bool) -> bool:
        """Create ``lf`` on the device; True when a new edit was made. A value that cannot be
        placed and reaches the model (``strict``) is a leftover: the port would be incomplete."""
        if lf.kind == DEVICE or lf.node in self.edits:
            return False
        code = self.ctx.module.code_for_node
        if lf.kind == ORIGIN and not self._held(lf):
            q = self.facts.qualname(lf.node.func) or ""
            if q == "" and dotted(lf.node.func) == "map":  # map(torch.LongTensor, zip(*batch))
                v = "v" if self.ctx.module.code_for_node(self.dev) != "v" else "t"
                self._edit(lf.node, "map", lambda u: mapped_to_device(u, self.dev, v))
            elif q.endswith("from_numpy"):
                self._edit(lf.node, "to", lambda u: method_call(u, "to", self.dev))
            elif q.count(".") == 1 and q.endswith("Tensor"):  # torch.LongTensor(data)
                t, _ = torch_ref(self.facts)
                kind, _ = legacy_on_device(lf.node, t, self.dev)
                self._edit(lf.node, kind, lambda u: legacy_on_device(u, t, self.dev)[1])
            else:
                self._edit(lf.node, "device", lambda u: with_keyword(u, "device", self.dev))
            return True
        if strict and not self._held(lf):
            label = lf.name or " ".join(code(lf.node).split())[:40]
            self.leftovers.setdefault(label, lf.why or "of unknown origin")
        return False

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

    def _move_batch(self, lp: BatchLoop) -> None:
        d = self.ctx.module.code_for_node(self.dev)
        if lp.form == "tuple":
            names = [n for n in lp.names if n != "_"]
            src = f"{', '.join(names)} = {', '.join(f'{n}.to({d})' for n in names)}\n"
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
        self._edit(lp.node.body, "batch", lambda u, stmt=stmt: u.with_changes(body=[stmt, *u.body]))

    # ---- report ------------------------------------------------------------------------
    def _report(self, module: cst.Module, first, choice) -> None:
        sc, node, name = first
        dev = module.code_for_node(self.dev)  # the configured device name (--device-name / device-name)
        message = (f"`{name}` is built and fed data but no device is chosen anywhere in the file: it runs "
                   "on the CPU even where a GPU is available")
        if self.leftovers:
            stays = "; ".join(f"`{v}` would stay on the host ({why})" for v, why in self.leftovers.items())
            self.report(node.value, f"{message} (no automatic port: {stays})", None)
            return
        counts: dict = {}
        for kind, _ in self.edits.values():
            counts[kind] = counts.get(kind, 0) + 1
        parts = ["a device variable"]
        if self.models_moved:
            parts.append(", ".join(f"`{n}.to({dev})`" for n in dict.fromkeys(self.models_moved)))
        for kind, (one, many) in _EDIT_WORDS.items():
            n = counts.get(kind, 0)
            if n:
                parts.append((one if n == 1 else many).format(n=n, d=dev))
        message += f" (missing: {'; '.join(parts)})"
        replacements = composed_replacements(module, {n: e[1] for n, e in self.edits.items()})
        reasons = list(dict.fromkeys(self.reasons))
        if reasons:
            fix = choice.fix(Applicability.UNSAFE,
                             "port to a device variable (unsafe: " + "; ".join(reasons) + ")", replacements)
        else:
            fix = choice.fix(Applicability.SAFE, "port to a device variable", replacements)
        self.report(node.value, message, fix)
