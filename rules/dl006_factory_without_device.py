from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint.analysis.checkpoints import host_script, is_test_module
from devlint.analysis.values import sets_default_device
from devlint.callargs import factory_takes_device, has_double_star, keyword, with_keyword
from devlint.analysis.hostflow import declares_host, ends_placed
from devlint.analysis.usage import factory_of_chain, is_zero_dim, may_touch_device, usage_of
from devlint.facts import DEVICE_LESS_FACTORIES, MODULE, PARAM, TENSOR, iter_calls, own_params
from devlint.rule import Invalid, Rule, safe, unsafe
from devlint.syntax import dotted
from devlint.walk import nodes

RANDOM = frozenset({"rand", "randn", "randint", "randperm", "normal"})
# a method called on the fresh factory result that shows where it is meant to live
_PLACED_BY = frozenset({"to", "cuda", "cpu", "type_as", "tolist", "item", "numpy", "pin_memory"})
# attributes that only a tensor (among the values a forward receives) has
_TENSOR_ATTRS = frozenset({"shape", "device", "dtype", "ndim", "is_cuda", "T", "grad", "requires_grad"})
_TYPE_INFO_NUMBERS = frozenset({"min", "max", "eps", "tiny", "smallest_normal", "resolution", "bits"})
_SCALAR_CALLS = frozenset({"float", "int", "len", "bool", "round", "abs", "min", "max", "sum"})


def _is_python_scalar(node: cst.BaseExpression) -> bool:
    """A number, or an expression built only from sizes and Python numbers."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.UnaryOperation):
        return _is_python_scalar(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return _is_python_scalar(node.left) and _is_python_scalar(node.right)
    if isinstance(node, cst.Name):
        return node.value in ("True", "False")
    if isinstance(node, cst.Call):
        f = node.func
        if isinstance(f, cst.Name) and f.value in _SCALAR_CALLS:
            return True
        if isinstance(f, cst.Attribute) and f.attr.value in ("size", "item", "dim", "numel"):
            return True
        if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "math":
            return True
        return False
    if isinstance(node, cst.Subscript):  # x.shape[0]
        return isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape"
    if isinstance(node, cst.Attribute):  # math.pi
        if isinstance(node.value, cst.Name) and node.value.value == "math":
            return True
        # torch.finfo(x.dtype).min, np.iinfo(np.int64).max: a number of the dtype, a Python float/int
        return (node.attr.value in _TYPE_INFO_NUMBERS and isinstance(node.value, cst.Call)
                and (dotted(node.value.func) or "").rsplit(".", 1)[-1] in ("finfo", "iinfo"))
    return False


def _cache_fill(node: cst.Call, method: cst.FunctionDef) -> bool:
    """``if self.edges is None or self.n != n: ...; self.edges = built; if cuda: self.edges =
    self.edges.cuda()``: the factory runs when the cached attribute is missing (or its key
    changed), not on every call, and the branch that fills the cache moves it to the device."""
    for branch in nodes(method.body):
        if not isinstance(branch, cst.If):
            continue
        cached = {dotted(c.left) for c in nodes(branch.test) if isinstance(c, cst.Comparison)
                  and len(c.comparisons) == 1 and isinstance(c.comparisons[0].operator, cst.Is)
                  and isinstance(c.comparisons[0].comparator, cst.Name) and c.comparisons[0].comparator.value == "None"}
        cached = {d for d in cached if d and d.startswith("self.")}
        if not cached or not any(n is node for n in nodes(branch.body)):
            continue
        for a in nodes(branch.body):
            if (isinstance(a, cst.Assign) and len(a.targets) == 1 and dotted(a.targets[0].target) in cached
                    and isinstance(a.value, cst.Call) and isinstance(a.value.func, cst.Attribute)
                    and a.value.func.attr.value in ("cuda", "to") and dotted(a.value.func.value) in cached):
                return True
    return False


class FactoryWithoutDevice(Rule):
    """
    ## What it does
    Flags tensor factories (`torch.zeros`, `ones`, `empty`, `full`, `arange`, `eye`,
    `linspace`, `rand*`, `tensor`, ...) called without `device=` inside the methods of
    an `nn.Module` that run on every call: `forward` and the methods `forward`
    (transitively) calls through `self`. `__init__` is DL009's business, and other
    methods (`reset_parameters`, `extra_repr`, one-off helpers) are not per call.

    Not flagged: `*_like(x)` and `x.new_*(...)` (they inherit the device), factories
    given `device=` (or `**kwargs`, or a `generator=`, which fixes the device the numbers
    are drawn on), parameter defaults (evaluated once), a factory whose result is immediately placed or
    read on the host (`.to(...)`, `.cuda()`, `.cpu()`, `.type_as(x)`, `.tolist()`,
    `.item()`: DL007 handles the moves), a factory used directly as an index
    (`x[torch.arange(n)]`: CUDA tensors accept CPU index tensors), and
    `torch.tensor(<python scalar>)` (a dtype's limit, `torch.finfo(x.dtype).min`, too) and
    other 0-dim tensors (`torch.zeros(())`: a 0-dim CPU tensor mixes with CUDA tensors in
    arithmetic, so it is not a device bug), and a cache built when its attribute is missing
    (`if self.edges is None:`) and moved by the branch that fills it.
    Casts between the factory and its move keep it placed
    (`torch.arange(n).long().cuda()`), and so does a move on the next statement
    (`idx = torch.arange(n)` then `if x.is_cuda: idx = idx.cuda()`). Values that are right
    on the host are not flagged either: a factory (or the name it is bound to) only used
    as an index or slice, iterated in Python, read back with `.item()`/`.tolist()`/`int()`,
    also through steps of the same value under its own name (`pos = torch.rand(1) * n`,
    `pos = torch.floor(pos[0]).long()`, then only `x[:, pos:pos + k]`),
    logged, or returned in a metrics dict (`devlint/analysis/usage.py`); a returned value
    every caller in the class reads on the host or places at once; a table filled in
    place and only used moved (`t.to(device)`); methods memoised by a `*cache*`
    decorator. Also not flagged: a host-only computation that leaves moved, registered
    as a buffer, or returned to callers that place it (through rebindings, derived names
    and tables filled in place: `devlint/analysis/hostflow.py`), `torch.tensor(<data>)`
    returned to the caller (Python data crosses to a device by a copy anyway), a method
    that declares a host device (`host = torch.device("cpu")`; `x.to(host)`), and a
    private module class (`_Name`) in a file that never names a device, or any module
    class of a test module that never names one (only the file itself runs it, on the
    host).

    ## Why is this bad?
    The factory creates the tensor on the CPU (or the default device) on every call,
    whatever device the module lives on. Once the model is moved to a GPU, `forward`
    combines a CUDA input with a CPU tensor and fails with `Expected all tensors to be
    on the same device`, or, where the op allows it, silently copies every call.

    ## Example
    ```python
    class Net(nn.Module):
        def forward(self, x):
            mask = torch.ones(x.size(0), 4)
            return self.fc(x) * mask
    ```

    ## Use instead
    ```python
    class Net(nn.Module):
        def forward(self, x):
            mask = torch.ones(x.size(0), 4, device=x.device)
            return self.fc(x) * mask
    ```

    ## Fix safety
    The fix adds `device=<arg>.device` for the method's first argument that the file
    shows to be a tensor (annotation, tensor-only use such as `.size()` / `.shape` /
    `.view()`; `forward`'s first argument must show it too). It is safe when that
    argument is never rebound in the method and the factory is deterministic: on the
    CPU nothing changes, and on a GPU the tensor is created where the input is.
    It is unsafe when the argument is rebound before the factory could run (the
    device is read from the new value), for random factories (a GPU draws different
    numbers than the CPU did), and when no tensor argument exists and the fix falls
    back to `next(self.parameters()).device` (raises `StopIteration` for a module
    without parameters). With no tensor argument and no parameter evidence the
    finding has no fix.
    """

    code = "DL006"
    # name, summary, default and prefilter: devlint/catalogue.py

    VALID = [
        # a training script that never names a device: its module runs on the host, where it is built
        "import torch\nfrom torch import nn\nclass RNN(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.rnn = nn.RNN(4, 8)\n    def forward(self, x):\n"
        "        h0 = torch.zeros(1, x.size(1), 8)\n        return self.rnn(x, h0)\n"
        "model = RNN()\nfor step in range(3):\n    out, _ = model(torch.randn(5, 2, 4))\n",
        # a cache filled when missing and moved by the branch that fills it: not built every call
        "import torch\nfrom torch import nn\nclass G(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.lin = nn.Linear(4, 4)\n        self.edges = None\n"
        "    def edge_list(self, n, cuda):\n        if self.edges is None:\n"
        "            self.edges = torch.ones(n, n).nonzero()\n            if cuda:\n"
        "                self.edges = self.edges.cuda()\n        return self.edges\n"
        "    def forward(self, x):\n        return self.lin(x), self.edge_list(4, x.is_cuda)\n",
        # a dtype's lowest value as a 0-dim tensor: a Python number, which meets CUDA tensors as a scalar
        "import torch\nfrom torch import nn\nclass Attn(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.proj = nn.Linear(4, 4)\n    def forward(self, w):\n"
        "        w = self.proj(w)\n        return torch.max(w, torch.tensor(torch.finfo(w.dtype).min))\n",
        # a placeholder one branch binds while the other computes the loss: it only goes to the log
        "import torch\nfrom torch import nn\nclass Loss(nn.Module):\n    def __init__(self, w):\n"
        "        super().__init__()\n        self.w = w\n        self.net = nn.Linear(2, 2)\n"
        "    def forward(self, x):\n        rec = x.abs()\n        if self.w > 0:\n"
        "            p = self.net(x).mean()\n            rec = rec + self.w * p\n        else:\n"
        "            p = torch.tensor([0.0])\n"
        "        log = {\"p\": p.detach().mean(), \"rec\": rec.detach().mean()}\n"
        "        return rec.mean(), log\n",
        # a legacy `Variable(...)` wrapper placed by the next statement, a one-line guarded move
        "import torch\nfrom torch import nn\nfrom torch.autograd import Variable\nUSE_CUDA = torch.cuda.is_available()\n"
        "class Attn(nn.Module):\n    def forward(self, hidden, outs):\n"
        "        energies = Variable(torch.zeros(len(outs)))\n        if USE_CUDA: energies = energies.cuda()\n"
        "        for i in range(len(outs)):\n            energies[i] = hidden.dot(outs[i])\n        return energies\n",
        # torchvision's default boxes: a grid built on the host from host pieces (a plain
        # attribute one of the class's own methods builds on the CPU, loop targets of host
        # lists, unpacked meshgrids), collected in a list and moved by the caller's next statement
        "import torch\nfrom torch import nn\nclass Boxes(nn.Module):\n"
        "    def __init__(self, n: int):\n        super().__init__()\n"
        "        self.pairs = self._pairs(n)\n"
        "    def _pairs(self, n: int, device: torch.device = torch.device(\"cpu\")):\n"
        "        return [torch.as_tensor([[1.0, 2.0]], device=device) for _ in range(n)]\n"
        "    def _grid(self, sizes: list[list[int]], dtype: torch.dtype = torch.float32):\n"
        "        boxes = []\n"
        "        for k, f_k in enumerate(sizes):\n"
        "            ys = (torch.arange(0, f_k[0]) + 0.5).to(dtype=dtype)\n"
        "            xs = (torch.arange(0, f_k[1]) + 0.5).to(dtype=dtype)\n"
        "            gy, gx = torch.meshgrid(ys, xs, indexing=\"ij\")\n"
        "            wh = self.pairs[k].repeat(f_k[0] * f_k[1], 1)\n"
        "            boxes.append(torch.cat((torch.stack((gx.reshape(-1), gy.reshape(-1)), -1), wh), 1))\n"
        "        return torch.cat(boxes, 0)\n"
        "    def forward(self, x, sizes: list[list[int]]):\n"
        "        boxes = self._grid(sizes, dtype=x.dtype)\n"
        "        boxes = boxes.to(x.device)\n"
        "        return x, boxes\n",
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.w = torch.zeros(3)\n",
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def forward(self, x):\n        return x + torch.zeros(3, device=x.device)\n",
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def forward(self, x):\n        return x + torch.zeros_like(x) + x.new_ones(3)\n",
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def forward(self, x):\n        return x * torch.tensor(2.0) + torch.tensor(x.size(0))\n",
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def forward(self, x):\n        return x + torch.ones(3).to(x.device)\n",
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def forward(self, x):\n        return x[torch.arange(2)]\n",
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def forward(self, x):\n        return x\n"
        "    @torch.no_grad()\n    def reset(self):\n        self.table = torch.zeros(4)\n",
        "import torch\nclass NotAModule:\n    def forward(self, x):\n        return x + torch.ones(3)\n",
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def forward(self, x, **kw):\n        return x + torch.ones(3, **kw)\n",
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def forward(self, x, y=torch.zeros(3)):\n        return x + y\n",
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def forward(self, x, g):\n        return x + torch.rand(3, generator=g)\n",
        # Python data put in the log dict the method returns: callers log it, it meets no device tensor
        "import torch\nfrom torch import nn\nclass Disc(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(4, 1)\n    def forward(self, x, factor):\n"
        "        loss = factor * self.fc(x).mean()\n"
        "        log = {'loss': loss.detach(), 'factor': torch.tensor(factor)}\n        return loss, log\n",
        # ... also when more entries are written into it before it is returned
        "import torch\nfrom torch import nn\nclass Disc(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(4, 1)\n    def forward(self, x, factor, extra=None):\n"
        "        loss = factor * self.fc(x).mean()\n"
        "        log = {'loss': loss.detach(), 'factor': torch.tensor(factor)}\n"
        "        if extra is not None:\n            log['extra'] = extra\n        return loss, log\n",
        # tensors of Python token ids, padded together on the host and moved by the next statement
        "import torch\nfrom torch import nn\nfrom torch.nn.utils.rnn import pad_sequence\nclass LM(nn.Module):\n"
        "    def forward(self, x, lens, device):\n        t = [torch.tensor([0] * int(n)) for n in lens]\n"
        "        t = pad_sequence(t, batch_first=True).to(device)\n        return x, t\n",
        # cast, then placed at once; placed by the next statement
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def forward(self, x):\n        i = torch.arange(x.size(0)).long().cuda()\n"
        "        j = torch.arange(4)\n        if x.is_cuda:\n            j = j.cuda()\n        return x[i] + j\n",
        # right on the host: 0-dim, an index via a name, logged, a metrics dict
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def forward(self, x):\n        cols = torch.arange(2)\n        y = x[:, cols] * torch.zeros(())\n"
        "        print(torch.ones(1))\n        return {'out': y, 'n': torch.tensor(len(x))}\n",
        # a host computation rebound along the way, then moved (diffusers FIR kernels)
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
        "    def forward(self, x, kernel=(1, 3, 3, 1), gain=1):\n        k = torch.tensor(kernel, dtype=torch.float32)\n"
        "        k = torch.outer(k, k)\n        k /= torch.sum(k)\n        k = k * gain\n"
        "        return x + k.to(x.device).sum()\n",
        # a name rebound, after its other bindings, to a host build that the next statement moves
        # (reads up to the rebinding, its own comprehension's included, see the earlier value)
        "import torch\nfrom torch import nn\nclass Loss(nn.Module):\n"
        "    def forward(self, preds, target):\n        anchors = self.anchors(preds)\n"
        "        anchors = torch.cat([torch.tensor(a).view(-1, 4) for a in anchors])\n"
        "        batch = anchors.unsqueeze(0).repeat(target.shape[0], 1, 1).to(target.device)\n"
        "        return batch - target\n",
        # a table filled on the host, returned to callers that register or place it (kornia, timm)
        "import torch\nfrom torch import nn\nclass PE(nn.Module):\n"
        "    def __init__(self, d: int):\n        super().__init__()\n        self.d = d\n"
        "        self.register_buffer('pe', self.build((4, 4)))\n"
        "    def build(self, shape: tuple):\n        pe = torch.zeros((self.d, *shape))\n"
        "        y = torch.ones(shape).cumsum(0).float().unsqueeze(0)\n"
        "        pe[0::2] = torch.sin(y)\n        pe[1::2] = torch.cos(y)\n        return pe.unsqueeze(0)\n"
        "    def forward(self, x):\n        if x.size(-1) != self.pe.size(-1):\n"
        "            self.pe = self.build(x.shape[-2:]).to(x.device)\n        return x + self.pe\n",
        # Python data returned to the caller (it has to cross to a device by a copy anyway)
        "import torch\nfrom torch import nn\nclass Matcher(nn.Module):\n"
        "    def forward(self, scores, groups):\n        idx = solve(scores.cpu())\n"
        "        return [(torch.tensor(i), torch.tensor(j)) for i, j in idx]\n",
        # a private module of a file that never names a device (torchmetrics NISQA)
        "import torch\nfrom torch import nn\nclass _Pool(nn.Module):\n"
        "    def forward(self, x, n):\n        mask = torch.arange(x.shape[0])[None, :] < n[:, None]\n"
        "        return x * mask\n",
        # a method that computes on a declared host device on purpose
        "import torch\nfrom torch import nn\nclass R(nn.Module):\n"
        "    def forward(self, x):\n        host = torch.device('cpu')\n        xh = x.to(host).double()\n"
        "        t = torch.eye(3, dtype=torch.float64)\n        return (xh @ t).to(x.device)\n",
        # the file sets torch's default device: a factory without `device=` allocates there
        "import torch\nfrom torch import nn\nclass PE(nn.Module):\n    def forward(self, x):\n"
        "        return x + torch.arange(x.shape[-1])\n"
        "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\ntorch.set_default_device(device)\n",
        # a dead value: the next statement rebinds the name before anything reads it
        "import torch\nfrom torch import nn\nclass L(nn.Module):\n    def forward(self, x):\n"
        "        t = torch.arange(x.shape[1])\n        t = torch.arange(x.shape[1], device=x.device)\n"
        "        return x + t\n",
        # a random crop offset: drawn, stepped under its own name, and only used as a slice bound
        "import torch\nfrom torch import nn\nclass FE(nn.Module):\n    def forward(self, x, n, trunc):\n"
        "        pos = torch.rand([1]) * (n - trunc)\n        pos = torch.floor(pos[0]).long()\n"
        "        return x[:, pos:trunc + pos]\n",
    ]
    INVALID = [
        # ... but a step that mixes in another tensor is no step of the same value
        Invalid(
            "import torch\nfrom torch import nn\nclass FE(nn.Module):\n    def forward(self, x, n, trunc):\n"
            "        pos = torch.rand([1]) * (n - trunc)\n        pos = torch.cat([pos, x[0]])\n"
            "        return x[:, pos:trunc + pos]\n"),
        # a rebound host build that meets the device input unmoved
        Invalid(
            "import torch\nfrom torch import nn\nclass Loss(nn.Module):\n    def forward(self, preds, target):\n"
            "        anchors = self.anchors(preds)\n        anchors = torch.cat([torch.tensor(a) for a in anchors])\n"
            "        return anchors * target\n"),
        # ... or is rebound in a loop, where the next round's read may see either value
        Invalid(
            "import torch\nfrom torch import nn\nclass Loss(nn.Module):\n    def forward(self, preds, target):\n"
            "        anchors = self.anchors(preds)\n        for p in preds:\n"
            "            y = anchors * p\n            anchors = torch.cat([torch.tensor(a) for a in anchors])\n"
            "            z = anchors.to(target.device)\n        return y, z\n",
            "import torch\nfrom torch import nn\nclass Loss(nn.Module):\n    def forward(self, preds, target):\n"
            "        anchors = self.anchors(preds)\n        for p in preds:\n"
            "            y = anchors * p\n"
            "            anchors = torch.cat([torch.tensor(a, device=target.device) for a in anchors])\n"
            "            z = anchors.to(target.device)\n        return y, z\n"),
        # ... nor is a value read as a tensor after its step
        Invalid(
            "import torch\nfrom torch import nn\nclass FE(nn.Module):\n    def forward(self, x, n, trunc):\n"
            "        pos = torch.rand([1]) * (n - trunc)\n        pos = torch.floor(pos[0]).long()\n"
            "        return x + pos\n"),
        # ... a cache that stays on the host meets the device tensors
        Invalid(
            "import torch\nfrom torch import nn\nclass G(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.lin = nn.Linear(4, 4)\n        self.mask = None\n"
            "    def forward(self, x):\n        if self.mask is None:\n"
            "            self.mask = torch.ones(4, 4)\n        return self.lin(x) * self.mask\n"),
        # ... but one that meets the loss after the branches mixes devices
        Invalid(
            "import torch\nfrom torch import nn\nclass Loss(nn.Module):\n    def __init__(self, w):\n"
            "        super().__init__()\n        self.w = w\n        self.net = nn.Linear(2, 2)\n"
            "    def forward(self, x):\n        rec = x.abs()\n        if self.w > 0:\n"
            "            p = self.net(x).mean()\n            rec = rec + self.w * p\n        else:\n"
            "            p = torch.tensor([0.0])\n"
            "        log = {\"p\": p.detach().mean(), \"rec\": rec.detach().mean()}\n"
            "        return rec.mean() + p, log\n",
            "import torch\nfrom torch import nn\nclass Loss(nn.Module):\n    def __init__(self, w):\n"
            "        super().__init__()\n        self.w = w\n        self.net = nn.Linear(2, 2)\n"
            "    def forward(self, x):\n        rec = x.abs()\n        if self.w > 0:\n"
            "            p = self.net(x).mean()\n            rec = rec + self.w * p\n        else:\n"
            "            p = torch.tensor([0.0], device=next(self.parameters()).device)\n"
            "        log = {\"p\": p.detach().mean(), \"rec\": rec.detach().mean()}\n"
            "        return rec.mean() + p, log\n",
            unsafe=True,
        ),
        # padded together but never placed: mixes with the embedding's output on a GPU
        Invalid(
            "import torch\nfrom torch import nn\nfrom torch.nn.utils.rnn import pad_sequence\nclass LM(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.emb = nn.Embedding(10, 4)\n"
            "    def forward(self, x, lens):\n        t = [torch.tensor([0] * int(n)) for n in lens]\n"
            "        return self.emb(x) + pad_sequence(t, batch_first=True)\n",
            "import torch\nfrom torch import nn\nfrom torch.nn.utils.rnn import pad_sequence\nclass LM(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.emb = nn.Embedding(10, 4)\n"
            "    def forward(self, x, lens):\n"
            "        t = [torch.tensor([0] * int(n), device=next(self.parameters()).device) for n in lens]\n"
            "        return self.emb(x) + pad_sequence(t, batch_first=True)\n",
            unsafe=True,
        ),
        # wrapped the same way but never placed: mixes with `hidden` on a GPU
        Invalid("import torch\nfrom torch import nn\nfrom torch.autograd import Variable\n"
                "class Attn(nn.Module):\n    def forward(self, hidden, outs):\n"
                "        energies = Variable(torch.zeros(len(outs)))\n"
                "        for i in range(len(outs)):\n            energies[i] = hidden.dot(outs[i])\n        return energies\n"),
        # the same grid, but mixed with a tensor the caller passes (it may be on the GPU)
        Invalid(
            "import torch\nfrom torch import nn\nclass Boxes(nn.Module):\n"
            "    def _grid(self, sizes: list[list[int]], scale):\n"
            "        boxes = []\n"
            "        for k, f_k in enumerate(sizes):\n"
            "            ys = torch.arange(0, f_k[0]) * scale\n"
            "            boxes.append(ys)\n"
            "        return torch.cat(boxes, 0)\n"
            "    def forward(self, x, sizes: list[list[int]]):\n"
            "        boxes = self._grid(sizes, x)\n"
            "        boxes = boxes.to(x.device)\n"
            "        return x, boxes\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def forward(self, x):\n        return x + torch.ones(x.size(0), 3)\n",
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def forward(self, x):\n        return x + torch.ones(x.size(0), 3, device=x.device)\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def forward(self, x):\n        return self.mask(x)\n"
            "    def mask(self, h: torch.Tensor):\n        return h * torch.tril(torch.ones(4, 4, dtype=h.dtype))\n",
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def forward(self, x):\n        return self.mask(x)\n"
            "    def mask(self, h: torch.Tensor):\n"
            "        return h * torch.tril(torch.ones(4, 4, dtype=h.dtype, device=h.device))\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def forward(self, x):\n        return x.view(-1) + torch.randn(4)\n",
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def forward(self, x):\n        return x.view(-1) + torch.randn(4, device=x.device)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n"
            "    def forward(self, n):\n        return self.fc(torch.ones(n, 2))\n",
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n"
            "    def forward(self, n):\n        return self.fc(torch.ones(n, 2, device=next(self.parameters()).device))\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def forward(self, batch):\n        return torch.arange(len(batch))\n",
        ),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._per_call: dict = {}  # ClassDef -> set of per-call method names
        self._exempt: set = set()  # factory calls whose placement is handled by their parent
        self._attr_use: dict = {}  # method -> names used as `name.shape` & co
        self._pending: list = []
        self._not_body = 0  # inside parameter defaults / decorators: evaluated once, at def time
        self._host_script: Optional[bool] = None  # a script that never names a device (asked once)
        self._test: Optional[bool] = None  # the file is a module of a test suite (asked lazily)

    def _test_suite(self) -> bool:
        if self._test is None:
            self._test = (is_test_module(self.ctx.filename, self.facts.module)
                          and not self.ctx.filename.replace("\\", "/").endswith("conftest.py"))
        return self._test

    def visit_Parameters(self, node: cst.Parameters) -> None:
        self._not_body += 1

    def leave_Parameters(self, original_node: cst.Parameters) -> None:
        self._not_body -= 1

    def visit_Decorator(self, node: cst.Decorator) -> None:
        self._not_body += 1

    def leave_Decorator(self, original_node: cst.Decorator) -> None:
        self._not_body -= 1

    # ---- which methods run per call ---------------------------------------------------
    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if not self.facts.class_nodes.get(node, False):
            return
        methods = {}
        for stmt in node.body.body:
            if isinstance(stmt, cst.FunctionDef):
                methods[stmt.name.value] = stmt
        if "forward" not in methods:
            return
        calls: dict = {}
        for name, fn in methods.items():
            called = set()
            for c in iter_calls(fn.body):
                f = c.func
                if (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name)
                        and f.value.value == "self" and f.attr.value in methods):
                    called.add(f.attr.value)
            calls[name] = called
        seen, todo = set(), ["forward"]
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            todo.extend(calls.get(m, ()))
        seen.discard("__init__")
        # a method memoised by a cache decorator (`functools.lru_cache`, `cache`) runs once per key
        seen -= {n for n, fn in methods.items() if any(
            "cache" in (self.ctx.module.code_for_node(d.decorator).split("(")[0].rsplit(".", 1)[-1]).lower()
            for d in fn.decorators)}
        self._per_call[node] = seen

    # ---- context marks --------------------------------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        m = self.t.method
        if m is not None and isinstance(node.value, cst.Name) and node.attr.value in _TENSOR_ATTRS:
            self._attr_use.setdefault(m, set()).add(node.value.value)

    def visit_SubscriptElement(self, node: cst.SubscriptElement) -> None:
        if isinstance(node.slice, cst.Index) and isinstance(node.slice.value, cst.Call):
            self._exempt.add(node.slice.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _PLACED_BY:
            base = factory_of_chain(func.value)  # `torch.arange(n).long().cuda()`: the cast keeps it placed
            if isinstance(base, cst.Call):
                self._exempt.add(base)
        method, cls = self.t.method, self.t.cls
        if self._not_body or method is None or not self.t.in_module_class or method.name.value not in self._per_call.get(cls, ()):
            return
        if not may_touch_device(self.facts.source) and (cls.name.value.startswith("_") or self._test_suite()):
            # a private module of a file that never names a device, or a module of a test
            # module that never does (nothing imports a test): only this file runs it, on the host
            return
        q = self.facts.qualname(func)
        if q is None or not q.startswith("torch.") or q.count(".") != 1:
            return
        factory = q[len("torch."):]
        if sets_default_device(self.facts):
            return  # `torch.set_default_device(device)`: factories allocate there
        if self._host_script is None:
            self._host_script = host_script(self.facts, self.ctx.module, self.ctx.filename)
        if self._host_script:
            return  # a script that never names a device runs its modules where they are built: the host
        if factory not in DEVICE_LESS_FACTORIES or node in self._exempt:
            return
        if has_double_star(node) or any(keyword(node, k) is not None for k in ("device", "out", "generator")):
            return
        if not factory_takes_device(factory, node):
            return
        if factory == "tensor" and node.args and _is_python_scalar(node.args[0].value):
            return
        if is_zero_dim(factory, node):
            return  # a 0-dim CPU tensor mixes with CUDA tensors
        self._pending.append((node, factory, method, cls))

    # ---- decisions ----------------------------------------------------------------------
    def finish(self) -> None:
        for node, factory, method, cls in self._pending:
            if node in self._exempt:  # marked by an enclosing subscript visited earlier
                continue
            use = usage_of(method)
            if use.moved_next(node) or use.placed_later(node) or use.overwritten_next(node) or \
                    use.host_only(node, self._callers_keep_on_host(method, cls)):
                continue  # placed by the next statement / only logged, indexed, read back on the host
            if ends_placed(node, method, cls):
                continue  # a host-only computation that leaves moved / registered / to callers that place it
            if declares_host(method):
                continue  # `host = torch.device("cpu")`; `x.to(host)`: the method computes on the host on purpose
            if _cache_fill(node, method):
                continue  # built once into a cache that the same branch then moves: neither per call nor left behind
            if self._handed_to_placer(node, method):
                continue  # `cuda_variable(torch.zeros(n))`: a function of the file moves it at once
            msg = (f"`torch.{factory}(...)` without `device=` in `{method.name.value}` creates a CPU "
                   "tensor on every call, whatever device the module is on")
            self.report(node, msg, self._fix(node, factory, method, cls))

    def _handed_to_placer(self, node: cst.Call, method: cst.FunctionDef) -> bool:
        """The factory (with its casts) is a positional argument of a function of this module
        that moves that parameter to the device (``def cuda_variable(t): ... t.cuda() ...``)."""
        use = usage_of(method)
        top = use.chain_top(node)
        arg = use.parent.get(top)
        call = use.parent.get(arg) if isinstance(arg, cst.Arg) and arg.keyword is None else None
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)):
            return False
        fn = next((s for s in self.ctx.module.body if isinstance(s, cst.FunctionDef)
                   and s.name.value == call.func.value), None)
        positional = [a for a in call.args if a.keyword is None]
        if fn is None or any(a.star for a in call.args) or positional.index(arg) >= len(fn.params.params):
            return False
        param = fn.params.params[positional.index(arg)].name.value
        return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("cuda", "to")
                   and isinstance(n.func.value, cst.Name) and n.func.value.value == param for n in nodes(fn.body))

    def _callers_keep_on_host(self, method: cst.FunctionDef, cls):
        """For a value ``method`` returns: whether every caller in the class reads it on the host
        (``probs = self.get_params()`` then ``if probs[i] <= p:``)."""
        def follow(pos: int):
            names = []
            for stmt in cls.body.body:
                if isinstance(stmt, cst.FunctionDef) and stmt is not method:
                    u = usage_of(stmt)
                    names += [(u, n) for n in u.call_targets(method.name.value, pos)]
            if names and all(n is not None and u.name_host_only(n) for u, n in names):
                return "read on the host or placed by its callers"
            return None
        return follow

    def _tensor_arg(self, method: cst.FunctionDef, cls):
        params = [x for x in own_params(method) if x.name.value not in ("self", "cls")]
        attr_use = self._attr_use.get(method, set())
        for prm in params:
            name = prm.name.value
            kind = self.facts.kind_of(cst.Name(name), method, cls)
            if kind in (TENSOR, PARAM) or (kind is None and name in attr_use):
                return name
        return None

    def _has_parameters(self, cls) -> bool:
        for (scope, key), kinds in self.facts.evidence.items():
            if scope is cls and key.startswith("self.") and kinds & {PARAM, MODULE}:
                return True
        return False

    def _fix(self, node: cst.Call, factory: str, method: cst.FunctionDef, cls):
        reasons = []
        arg = self._tensor_arg(method, cls)
        if arg is not None:
            device = cst.Attribute(cst.Name(arg), cst.Name("device"))
            if arg in self.facts.rebound.get(method, ()):
                reasons.append(f"`{arg}` is rebound in the method")
        elif self._has_parameters(cls):
            device = cst.parse_expression("next(self.parameters()).device")
            reasons.append("assumes the module has parameters")
        else:
            return None
        if factory in RANDOM:
            reasons.append("a GPU draws different random numbers")
        new = with_keyword(node, "device", device)
        text = self.ctx.module.code_for_node(device)
        message = f"pass `device={text}`" + (f" ({'; '.join(reasons)})" if reasons else "")
        return (unsafe if reasons else safe)(message, {node: new})
