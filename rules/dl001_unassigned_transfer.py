from __future__ import annotations

import libcst as cst

from devlint.analysis.usage import usage_of
from devlint.facts import CONVERSIONS, PARAM, TENSOR
from devlint.rule import Invalid, Rule, safe, unsafe
from devlint.walk import nodes


class UnassignedTransfer(Rule):
    """
    ## What it does
    Flags a tensor conversion (`.to(...)`, `.cuda()`, `.cpu()`, `.half()`, `.float()`,
    `.double()`, `.type(...)`, ...) used as a bare statement whose result is thrown away.

    ## Why is this bad?
    Tensor conversions return a **new** tensor and leave the original untouched, so
    `x.to(device)` on its own line does nothing: `x` stays on the CPU and the next
    operation with a GPU tensor fails with a device-mismatch error (or silently runs
    on the CPU). `nn.Module.to()` is different: it moves the module in place, so
    `model.to(device)` is correct and never flagged. devlint tells the two apart from
    evidence in the file (constructors, `nn.Parameter`, `register_buffer`,
    annotations, how the value is used, and how it is bound: a parameter moved exactly
    like a sibling parameter that is a known tensor, an item of a tuple batch from a
    DataLoader, an element of a list of tensors, a value unpacked from a function of the
    file that returns tensors); when there is no evidence it stays silent, and a value
    used as a Module or a mapping (`model(**batch)`: a `BatchEncoding` moves in place)
    is never taken for a tensor. A conversion bracketed by two clock reads with only bare
    calls between (`ev0.record()`, `x.to(d)`, `ev1.record()`) is the copy a benchmark
    times on purpose, and is not flagged.

    ## Example
    ```python
    x = torch.randn(8, 4)
    x.to(device)
    ```

    ## Use instead
    ```python
    x = torch.randn(8, 4)
    x = x.to(device)
    ```

    ## Fix safety
    Assigning the result back is safe for a plain name, attribute, subscript or a
    registered buffer. For an `nn.Parameter` the fix moves its data
    (`p.data = p.data.to(...)`) so the attribute stays a Parameter; it is marked
    unsafe because gradients and optimizer state are not moved with it.
    """

    code = "DL001"
    # name, summary, default and prefilter: devlint/catalogue.py

    VALID = [
        "import torch\nx = torch.zeros(3)\nx = x.to('cpu')\n",
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\nmodel.to('cpu')\n",
        "import torch.nn as nn\ncriterion = nn.CrossEntropyLoss()\ncriterion.cuda()\n",
        "import torch.nn as nn\nclass M(nn.Module):\n    def f(self, d):\n        self.to(d)\n",
        "import torch.nn as nn\nlayers = nn.ModuleList([nn.Linear(2, 2)])\nlayers.to('cpu')\n",
        "def f(batch, device):\n    batch.to(device)\n",  # no evidence: BatchEncoding.to is in place
        "import torch\nx = torch.zeros(3)\ny = x.to('cpu')\n",
        # a DataLoader over a dataset of unknown items: a batch may be a BatchEncoding
        "from torch.utils.data import DataLoader\nfor batch in DataLoader(ds):\n    batch.to('cpu')\n",
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "loader = DataLoader(TensorDataset(torch.ones(4, 2)))\nfor batch in loader:\n    batch.to('cpu')\n",
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "loader = DataLoader(TensorDataset(torch.ones(4, 2)), collate_fn=Batch)\n"
        "for x, y in loader:\n    x.to('cpu')\n",
        # unknown values stay silent: only a `.to()` (a Module or a batch does that too)
        "def f(x, device):\n    x.to(device)\n    return x\n",
        # indexed like an array but never shown to be a tensor: a numpy array has no `.to`
        "def f(arr, device):\n    arr[:, 0] = 0\n    return arr\n",
        # a dict whose items are called: Modules, moved in place
        "def f(nets, d):\n    nets['g'] = nets['g'].to(d)\n    nets['d'].to(d)\n    return nets['d'](1)\n",
        # a Lightning module moves in place
        "import lightning as L\nclass M(L.LightningModule):\n    pass\nm = M()\nm.to('cpu')\n",
        # a loop over a list of unknown items
        "def f(items, d):\n    for t in items:\n        t.to(d)\n",
        # a sibling used as a mapping: a BatchEncoding moves in place (`labels` is a tensor)
        "import torch.nn.functional as F\ndef step(model, inputs, labels, d):\n    inputs.to(d)\n    labels.to(d)\n"
        "    return F.cross_entropy(model(**inputs).logits, labels)\n",
        # loop targets over Modules, and over (name, Module) pairs
        "from torch import nn\ndef f(d):\n    nets = [nn.Linear(2, 2), nn.ReLU()]\n    for n in nets:\n        n.to(d)\n",
        "def f(pairs, d):\n    for name, m in pairs:\n        m.to(d)\n",
        # a loader parameter nothing shows is a DataLoader; a batch item used as a mapping
        "def f(model, loader, d):\n    for enc, y in loader:\n        enc.to(d)\n",
        "from torch.utils.data import DataLoader\ndef f(model, loader, d):\n    for enc, y in loader:\n"
        "        enc.to(d)\n        model(**enc)\nf(None, DataLoader([]), 'cpu')\n",
        # values unpacked from a function of the file that returns mapping items
        "def split(b):\n    return b['x'], b['y']\ndef f(b, d):\n    x, y = split(b)\n    x.to(d)\n",
        # `requires_grad_` freezes a Module as well as a tensor: no evidence of a tensor
        "import torch\nfrom diffusers import AutoencoderKL\nvae = AutoencoderKL.from_pretrained('m')\n"
        "vae.requires_grad_(False)\nvae.to('cuda', dtype=torch.float16)\n",
        # a copy between two clock reads is what a bandwidth probe measures, its result unwanted
        "import time\nimport torch\ndef probe(x: torch.Tensor, d):\n    t0 = time.perf_counter()\n"
        "    x.to(d, non_blocking=True)\n    torch.cuda.synchronize()\n    return time.perf_counter() - t0\n",
        "import torch\ndef probe(x: torch.Tensor, d, ev0, ev1):\n    ev0.record()\n    x.to(d)\n    ev1.record()\n",
    ]
    INVALID = [
        # ... but a timed step that uses the value keeps it: the copy is lost, not measured
        Invalid("import time\nimport torch\ndef step(x: torch.Tensor, d, model):\n    t0 = time.perf_counter()\n"
                "    x.to(d)\n    out = model(x)\n    return out, time.perf_counter() - t0\n",
                "import time\nimport torch\ndef step(x: torch.Tensor, d, model):\n    t0 = time.perf_counter()\n"
                "    x = x.to(d)\n    out = model(x)\n    return out, time.perf_counter() - t0\n"),
        Invalid("import torch\nx = torch.randn(3)\nx.to('cpu')\n",
                "import torch\nx = torch.randn(3)\nx = x.to('cpu')\n"),
        Invalid("import torch\ndef f(t: torch.Tensor):\n    t.half()\n",
                "import torch\ndef f(t: torch.Tensor):\n    t = t.half()\n"),
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.register_buffer('mask', torch.ones(3))\n"
            "    def move(self, d):\n        self.mask.to(d)\n",
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.register_buffer('mask', torch.ones(3))\n"
            "    def move(self, d):\n        self.mask = self.mask.to(d)\n",
        ),
        Invalid("import torch\nfrom torch import nn\nw = nn.Parameter(torch.ones(2))\nw.double()\n",
                "import torch\nfrom torch import nn\nw = nn.Parameter(torch.ones(2))\nw.data = w.data.double()\n",
                unsafe=True),
        Invalid("import torch\nbatch = {'x': torch.ones(2)}\nbatch['x'].float()\n",
                "import torch\nbatch = {'x': torch.ones(2)}\nbatch['x'] = batch['x'].float()\n"),
        Invalid("import torch\nfrom torch import nn\nnn.Parameter(torch.ones(2)).to('cpu')\n"),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
            "ds = TensorDataset(torch.ones(4, 2), torch.zeros(4))\n"
            "for i, (x, y) in enumerate(DataLoader(ds, batch_size=2)):\n    y.to('cpu')\n",
            "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
            "ds = TensorDataset(torch.ones(4, 2), torch.zeros(4))\n"
            "for i, (x, y) in enumerate(DataLoader(ds, batch_size=2)):\n    y = y.to('cpu')\n",
        ),
        # usage evidence: `a.size(0)`, and `b` indexed by a tensor (both moved, neither assigned)
        Invalid(
            "import torch\nclass Trainer:\n    def fit(self, a, b):\n        a.to(self.device)\n"
            "        b.to(self.device)\n        n = a.size(0)\n        idx = torch.randperm(n)\n"
            "        return a[idx], b[idx]\n",
            "import torch\nclass Trainer:\n    def fit(self, a, b):\n        a = a.to(self.device)\n"
            "        b = b.to(self.device)\n        n = a.size(0)\n        idx = torch.randperm(n)\n"
            "        return a[idx], b[idx]\n",
        ),
        # a DataLoader over a dataset class of the file whose items are tensors
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader, Dataset\nclass Pairs(Dataset):\n"
            "    def __init__(self):\n        self.x = torch.randn(8, 3)\n        self.y = torch.zeros(8)\n"
            "    def __getitem__(self, i):\n        return self.x[i], self.y[i]\n"
            "for xb, _ in DataLoader(Pairs(), batch_size=4):\n    xb.to('cpu')\n",
            "import torch\nfrom torch.utils.data import DataLoader, Dataset\nclass Pairs(Dataset):\n"
            "    def __init__(self):\n        self.x = torch.randn(8, 3)\n        self.y = torch.zeros(8)\n"
            "    def __getitem__(self, i):\n        return self.x[i], self.y[i]\n"
            "for xb, _ in DataLoader(Pairs(), batch_size=4):\n    xb = xb.to('cpu')\n",
        ),
        # the sibling key is moved and assigned back: the batch holds tensors
        Invalid(
            "def step(batch, device):\n    batch['x'].to(device)\n    batch['y'] = batch['y'].to(device)\n",
            "def step(batch, device):\n    batch['x'] = batch['x'].to(device)\n    batch['y'] = batch['y'].to(device)\n",
        ),
        # a sibling parameter moved the same way as a known tensor (`x1.size(0)`)
        Invalid(
            "import torch\nclass Trainer:\n    def fit(self, x1, y1, vx1):\n        x1.to(self.device)\n"
            "        vx1.to(self.device)\n        return x1.size(0), vx1\n",
            "import torch\nclass Trainer:\n    def fit(self, x1, y1, vx1):\n        x1 = x1.to(self.device)\n"
            "        vx1 = vx1.to(self.device)\n        return x1.size(0), vx1\n",
        ),
        # ... but not a sibling the file's own call shows is a Module (`model.to(d)` stays)
        Invalid(
            "import torch\nfrom torch import nn\ndef prep(model, x, d):\n    model.to(d)\n    x.to(d)\n"
            "    return x.size(0)\nprep(nn.Linear(2, 2), torch.ones(2), 'cpu')\n",
            "import torch\nfrom torch import nn\ndef prep(model, x, d):\n    model.to(d)\n    x = x.to(d)\n"
            "    return x.size(0)\nprep(nn.Linear(2, 2), torch.ones(2), 'cpu')\n",
        ),
        # ... nor one read as another object (`model.generate`): `model.to(d)` stays
        Invalid("def run(model, ids, d):\n    model.to(d)\n    ids.to(d)\n    return model.generate(ids.unsqueeze(0))\n",
                "def run(model, ids, d):\n    model.to(d)\n    ids = ids.to(d)\n    return model.generate(ids.unsqueeze(0))\n"),
        # an item of a tuple batch of a DataLoader parameter (every call passes one)
        Invalid(
            "from torch.utils.data import DataLoader\ndef train(model, loader, device):\n"
            "    for xb, _ in loader:\n        xb.to(device)\n        model(xb)\n"
            "train(None, DataLoader(list(range(4))), 'cpu')\n",
            "from torch.utils.data import DataLoader\ndef train(model, loader, device):\n"
            "    for xb, _ in loader:\n        xb = xb.to(device)\n        model(xb)\n"
            "train(None, DataLoader(list(range(4))), 'cpu')\n",
        ),
        # ... a loader parameter read as one (`loader.dataset`)
        Invalid(
            "def evaluate(model, loader, device):\n    for i, (xb, yb) in enumerate(loader):\n"
            "        yb.to(device)\n    return len(loader.dataset)\n",
            "def evaluate(model, loader, device):\n    for i, (xb, yb) in enumerate(loader):\n"
            "        yb = yb.to(device)\n    return len(loader.dataset)\n",
        ),
        # values unpacked from a function of the file that splits a tensor
        Invalid(
            "import torch\ndef split(data: torch.Tensor):\n    return data[:, :3], data[:, 3:]\n"
            "def run(data, device):\n    x, y = split(data)\n    x.to(device)\n    return x\n",
            "import torch\ndef split(data: torch.Tensor):\n    return data[:, :3], data[:, 3:]\n"
            "def run(data, device):\n    x, y = split(data)\n    x = x.to(device)\n    return x\n",
        ),
        # a literal list of tensors; no fix (`t = t.to(d)` moves a copy nothing reads)
        Invalid("import torch\ndef f(d):\n    a, b = torch.ones(2), torch.zeros(2)\n    for t in [a, b]:\n        t.to(d)\n"),
        # a loop over a list of tensors (the comprehension next to it does it right); no fix:
        # `t = t.to(device)` would move a copy nothing reads
        Invalid(
            "import torch\nfrom typing import List\ndef move(tensors: List[torch.Tensor], device):\n"
            "    for t in tensors:\n        t.to(device)\n    return [t.to(device) for t in tensors]\n",
        ),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.pending: list = []

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)):
            return
        if call.func.attr.value not in CONVERSIONS:
            return
        recv = call.func.value
        if self.facts.qualname(recv) is not None:  # `torch.float` & co are not values
            return
        self.pending.append((node, call, recv, self.t.scope, self.t.cls, self.t.loop))

    def finish(self) -> None:
        for node, call, recv, scope, cls, loop in self.pending:
            kind = self.facts.kind_of(recv, scope, cls)
            if kind not in (TENSOR, PARAM):
                continue
            if usage_of(scope if scope is not None else self.facts.module).timed(node):
                continue  # `ev0.record(); x.to(d); ev1.record()`: the copy is what is measured
            meth = call.func.attr.value
            text = self.ctx.module.code_for_node(recv)
            msg = (f"result of `{text}.{meth}(...)` is discarded: tensor conversions return a new "
                   f"tensor, so `{text}` is unchanged")
            fix = None
            if _dead_loop_target(recv, loop, call):
                pass  # `for t in ts: t.to(d)`: `t = t.to(d)` would move nothing anyone reads
            elif isinstance(recv, (cst.Name, cst.Attribute, cst.Subscript)):
                if kind == PARAM:
                    data = cst.Attribute(recv, cst.Name("data"))
                    new = cst.Assign([cst.AssignTarget(data)],
                                     call.with_changes(func=call.func.with_changes(value=data)))
                    fix = unsafe("move the Parameter's data in place", {node: new})
                else:
                    new = cst.Assign([cst.AssignTarget(recv)], call)
                    fix = safe(f"assign the result back to `{text}`", {node: new})
            self.report(node, msg, fix)


def _dead_loop_target(recv: cst.CSTNode, loop, call: cst.Call) -> bool:
    """``recv`` is the element of ``for recv in items`` and the loop body reads it nowhere else."""
    if not isinstance(recv, cst.Name) or not isinstance(loop, cst.For):
        return False
    if not isinstance(loop.target, cst.Name) or loop.target.value != recv.value:
        return False  # (`for x, y in loader: y.to(d)` keeps its fix, as the loader fixtures expect)
    reads = sum(1 for n in nodes(loop.body, into_scopes=True) if isinstance(n, cst.Name) and n.value == recv.value)
    own = sum(1 for n in nodes(call) if isinstance(n, cst.Name) and n.value == recv.value)
    return reads == own
