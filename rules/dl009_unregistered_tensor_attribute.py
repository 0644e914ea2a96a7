from __future__ import annotations

import re

from typing import Optional

import libcst as cst

from devlint.analysis.checkpoints import host_script
from devlint.facts import TENSOR_FUNCS, TENSOR_METHODS, dotted, is_module_base, string_value
from devlint.rule import Invalid, Rule, unsafe
from devlint.syntax import bound_names
from devlint.walk import nodes

# Legacy constructors that build a (CPU) tensor as well.
_LEGACY = frozenset("Tensor FloatTensor DoubleTensor HalfTensor LongTensor IntTensor BoolTensor ByteTensor".split())
_MODULE_BASES = ("torch.nn.Module", "torch.nn.modules.module.Module")
# Classes that move their own attributes: a `to`/`_apply`/`cuda` override.
_MOVE_OVERRIDES = frozenset({"_apply", "to", "cuda", "to_empty"})
# Buffers torch.nn layers register (assigning a tensor to one of them updates the buffer).
_TORCH_LAYER_BUFFERS = frozenset({"running_mean", "running_var", "num_batches_tracked", "weight_orig",
                                  "weight_u", "weight_v", "activation_post_process", "scale", "zero_point"})
_ARITH = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Power, cst.MatrixMultiply)


class UnregisteredTensorAttribute(Rule):
    """
    ## What it does
    Flags `self.x = torch.<factory>(...)` (and tensors derived from one, such as
    `torch.arange(n).float()` or `torch.tril(torch.ones(n, n))`) assigned in the
    `__init__` of an `nn.Module` subclass (a Lightning `LightningModule`, a `transformers`
    `PreTrainedModel` or a `diffusers` `ModelMixin` too), including one that a later
    `if` turns into an `nn.Parameter` on one branch only.

    ## Why is this bad?
    `nn.Module.to(device)`, `.cuda()`, `.half()` and `.to("meta")` move parameters
    and *registered buffers*, not plain attributes. A tensor stored as a plain
    attribute stays on the CPU while the rest of the model moves to the GPU, and the
    first `forward` fails with "Expected all tensors to be on the same device" (or,
    for a 0-dim tensor, silently runs that part on the CPU). `register_buffer` makes
    the tensor part of the module: it moves and casts with it.

    Not flagged: `nn.Parameter(...)` (registered), an attribute that is registered
    later (`register_buffer`/`register_parameter` with its name, in the class or a
    base class of the same file, or a buffer of a `torch.nn` layer it subclasses, such
    as `running_mean`: assigning to it updates the buffer), an attribute that
    any other method of the class assigns (state set in `forward`, a `reset()`), a
    class that is not an `nn.Module`, classes that override `_apply`/`to` to
    move their own attributes, an attribute that the model holding the class moves in
    its own `_apply` (`self.detect.stride = fn(self.detect.stride)`, in a project module
    that imports the class), and a tensor built on (or moved to) a device the constructor
    is given (`.to(device)`, `device=self.device` set from a parameter, with or without a
    default; the `.device` of a module or tensor it is given; a stack of such tensors): it
    lives where the caller says the model runs. Nor is a class of a script that never names
    a device (no `.cuda`, `.to(`, `device`) and that no other project module imports: nothing
    moves its modules off the host. Nor is an attribute every use of which moves it where
    it is needed: `self.window.to(x.device)`, `self.mean.type_as(x)`, or handing it to a
    function of the file that moves that parameter before reading it
    (`def score(img, mu): mu = mu.to(img) ...`); nor one that nothing in the file reads,
    in a class whose bases are the file's own or library Modules (no method elsewhere can
    read it); a `self.<name>` in another class of the file that shares no instance with it
    (neither derives the other, no class derives both) is that class's own attribute.

    ## Example
    ```python
    class Smooth(nn.Module):
        def __init__(self):
            super().__init__()
            self.kernel = torch.ones(3) / 3
    ```

    ## Use instead
    ```python
    class Smooth(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("kernel", torch.ones(3) / 3, persistent=False)
    ```

    ## Fix safety
    Unsafe. `persistent=False` keeps the tensor out of `state_dict`, so saved
    checkpoints keep their keys; but a buffer is also cast by `model.half()` /
    `model.to(dtype)` when it is floating point, appears in `model.buffers()`, and
    is replicated by `DataParallel`, which a plain attribute is not. The fix is
    offered only after `super().__init__()` (`register_buffer` needs it), when the
    attribute is assigned once, and when the base classes are `nn.Module` or classes
    of the same file that do not set the name (otherwise `register_buffer` could
    raise `KeyError: attribute already exists`).
    """

    code = "DL009"
    # name, summary, default and prefilter: devlint/catalogue.py

    VALID = [
        # a script that never names a device: its modules stay where they are built
        "import numpy as np\nimport torch\nfrom torch import nn\nclass Policy(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(3, 1)\n"
        "        self.log_alpha = torch.tensor(np.log(0.01))\n    def forward(self, x):\n"
        "        return self.fc(x) * self.log_alpha.exp()\nif __name__ == '__main__':\n"
        "    print(Policy()(torch.ones(1, 3)))\n",
        # a Parameter is registered
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.w = nn.Parameter(torch.zeros(3))\n",
        # a buffer
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.register_buffer('w', torch.zeros(3))\n",
        # not a Module
        "import torch\nclass Stats:\n    def __init__(self):\n        self.total = torch.zeros(3)\n",
        # state reassigned in forward
        "import torch\nfrom torch import nn\nclass RNN(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.h = torch.zeros(1, 4)\n"
        "    def forward(self, x):\n        self.h = torch.zeros(x.size(0), 4, device=x.device)\n"
        "        return x + self.h\n",
        # registered later under the same name
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        w = torch.zeros(3)\n        self.w = w\n"
        "        del self.w\n        self.register_buffer('w', w)\n",
        # not a tensor: a device, a generator, a Python number
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.g = torch.Generator()\n        self.d = torch.device('cpu')\n"
        "        self.n = 3\n",
        # assigned outside __init__ only
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def reset(self):\n"
        "        self.w = torch.zeros(3)\n",
        # the base class registered the buffer: this assignment updates it
        "import torch\nfrom torch import nn\nclass Base(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.register_buffer('count', torch.zeros(()))\n"
        "class Child(Base):\n    def __init__(self):\n        super().__init__()\n"
        "        self.count = torch.ones(())\n",
        "import torch\nfrom torch import nn\nclass BN(nn.BatchNorm1d):\n    def __init__(self, n):\n"
        "        super().__init__(n)\n        self.running_mean = torch.zeros(n)\n",
        # a class that moves its own attributes
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.w = torch.zeros(3)\n"
        "    def _apply(self, fn, recurse=True):\n        self.w = fn(self.w)\n        return super()._apply(fn, recurse)\n",
        # a Parameter on both branches: always registered
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self, learn):\n"
        "        super().__init__()\n        self.s = torch.ones(1)\n        if learn:\n"
        "            self.s = nn.Parameter(self.s)\n        else:\n"
        "            self.s = nn.Parameter(self.s, requires_grad=False)\n",
        # rebound to a Parameter unconditionally
        "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.s = torch.ones(1)\n        self.s = nn.Parameter(self.s)\n",
        # a Lightning callback is no Module; a Lightning module's buffer is registered
        "import torch\nimport pytorch_lightning as pl\nclass Cb(pl.Callback):\n    def __init__(self):\n"
        "        self.best = torch.zeros(())\n",
        "import torch\nimport lightning as L\nclass M(L.LightningModule):\n    def __init__(self):\n"
        "        super().__init__()\n        self.register_buffer('w', torch.zeros(3))\n",
        # placed at once on the device the caller hands the constructor (it lives where the caller
        # runs the model; the caller chose it explicitly)
        "import torch\nfrom torch import nn\nclass Attn(nn.Module):\n    def __init__(self, hid, device):\n"
        "        super().__init__()\n        self.scale = torch.sqrt(torch.FloatTensor([hid])).to(device)\n",
        "import torch\nfrom torch import nn\nclass Wrap(nn.Module):\n    def __init__(self, k, device):\n"
        "        super().__init__()\n        self.device = device\n"
        "        self.m = torch.eye(k, device=self.device)\n",
        # ... with a default when the caller hands none, or on the device of a module it hands in,
        # or stacked from attributes placed so
        "import torch\nfrom torch import nn\nclass Wrap(nn.Module):\n    def __init__(self, k, device=None):\n"
        "        super().__init__()\n        self.device = device if device else torch.device('cpu')\n"
        "        self.m = torch.eye(k, device=self.device)\n    def forward(self, x):\n        return x @ self.m\n",
        "import torch\nfrom torch import nn\nclass Focus(nn.Module):\n    def __init__(self, inner):\n"
        "        super().__init__()\n        device = next(inner.parameters()).device\n"
        "        self.w = torch.ones(3, 1, 2, 2).to(device)\n    def forward(self, x):\n        return x * self.w\n",
        "import torch\nfrom torch import nn\nclass Box(nn.Module):\n    def __init__(self, lo, hi, device):\n"
        "        super().__init__()\n        self.lo = torch.tensor(lo).to(device)\n        self.hi = torch.tensor(hi).to(device)\n"
        "        self.box = torch.stack([self.lo, self.hi])\n    def forward(self, x):\n"
        "        return x.clamp(self.box[0], self.box[1]) + self.lo - self.hi\n",
        # every use moves the slice it takes to the input's device
        "import torch\nfrom torch import nn\nclass Noise(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.table = torch.rand(1, 1000)\n"
        "    def forward(self, x):\n        return x + self.table[:, : x.shape[1]].to(x.device)\n",
        # every use moves the attribute to the input's device
        "import torch\nfrom torch import nn\nclass STFT(nn.Module):\n    def __init__(self, n):\n"
        "        super().__init__()\n        self.window = torch.ones(n)\n"
        "    def forward(self, x):\n        return torch.stft(x, 16, window=self.window.to(x.device), return_complex=True)\n"
        "    def inverse(self, z):\n        return torch.istft(z, 16, window=self.window.to(z.device))\n",
        # used only while constructing (to build something else): no method meets it later
        "import torch\nfrom torch import nn\nclass NCE(nn.Module):\n    def __init__(self, n):\n"
        "        super().__init__()\n        self.unigrams = torch.ones(n)\n"
        "        self.register_buffer('probs', self.unigrams / self.unigrams.sum())\n"
        "    def forward(self, x):\n        return x * self.probs\n",
        # a 1-D table of numbers read one element at a time: each element is a 0-dim tensor, which
        # PyTorch lets meet CUDA tensors as a scalar
        "import torch\nfrom torch import nn\nclass MultiScale(nn.Module):\n    def __init__(self, n):\n"
        "        super().__init__()\n        self.weights = torch.FloatTensor([0.32 / 2 ** s for s in range(n)])\n"
        "    def forward(self, outs):\n        return sum(self.weights[i] * o.mean() for i, o in enumerate(outs))\n",
        # ... also one built from a parameter whose default is a flat tuple of numbers, next to a
        # `self.mean.to(d)` whose result is thrown away (a no-op, DL001's business)
        "import torch\nfrom torch import nn\nclass BoxDecoder(nn.Module):\n"
        "    def __init__(self, mean=(0, 0, 0, 0), std=(1, 1, 1, 1)):\n        super().__init__()\n"
        "        self.mean = torch.tensor(mean, dtype=torch.float32)\n        self.std = torch.tensor(std)\n"
        "    def forward(self, anchors, reg):\n        self.mean.to(anchors.device)\n"
        "        return reg[:, 1] * self.std[1] + self.mean[1] + anchors[:, 0]\n",
        # filled in while building it, then only used moved; a subclass's value read moved by the base
        "import torch\nfrom torch import nn\nclass Sine(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.ini = torch.rand(1, 9)\n        self.ini[:, 0] = 0\n"
        "    def forward(self, x):\n        return x + self.ini.to(x.device)\n"
        "class Base(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
        "        self.window = torch.hann_window(n)\n    def spec(self, x):\n"
        "        return torch.stft(x, 16, window=self.window.to(x.device), return_complex=True)\n"
        "class Child(Base):\n    def __init__(self, n):\n        super().__init__(n)\n"
        "        self.window = torch.hann_window(2 * n)\n",
        # moved where it is used by `type_as`, or by the file's function it is handed to, which
        # moves that parameter before reading it; or never read at all
        "import torch\nfrom torch import nn\ndef score(img, mu=None):\n    img = img.double()\n"
        "    mu = mu.to(img).repeat(img.size(0), 1)\n    return (img.flatten(1) - mu).sum()\n"
        "class Norm(nn.Module):\n    def __init__(self, mean):\n        super().__init__()\n"
        "        self.mean = torch.Tensor(mean)\n        self.mu = torch.zeros(4)\n"
        "        self.unused = torch.ones(3)\n"
        "    def forward(self, x):\n        return score(x - self.mean.type_as(x)[None, :, None, None], mu=self.mu)\n",
        # another class's own attribute of the same name (neither derives the other) is no read
        "import torch\nfrom torch import nn\nclass Enc(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.noise = torch.zeros(0)\n    def forward(self, x):\n        return x\n"
        "class Dec(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.noise = torch.zeros(0)\n"
        "    def forward(self, x):\n        self.noise = torch.randn_like(x)\n        return x + self.noise\n",
    ]
    INVALID = [
        # ... but a class deriving it reads the same object's attribute
        Invalid(
            "import torch\nfrom torch import nn\nclass Enc(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.noise = torch.zeros(3)\n"
            "class Child(Enc):\n    def forward(self, x):\n        return x + self.noise\n",
            "import torch\nfrom torch import nn\nclass Enc(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.register_buffer(\"noise\", torch.zeros(3), persistent=False)\n"
            "class Child(Enc):\n    def forward(self, x):\n        return x + self.noise\n",
            unsafe=True,
        ),
        # a device the constructor picks itself is no caller's choice: the tensor stays there
        Invalid(
            "import torch\nfrom torch import nn\nclass Focus(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        device = torch.device('cpu')\n"
            "        self.w = torch.ones(3).to(device)\n    def forward(self, x):\n        return x * self.w\n",
            "import torch\nfrom torch import nn\nclass Focus(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        device = torch.device('cpu')\n"
            "        self.register_buffer(\"w\", torch.ones(3).to(device), persistent=False)\n    def forward(self, x):\n        return x * self.w\n",
            unsafe=True,
        ),
        # ... but a parameter with no literal default may hold a 2-D table: a row is a CPU tensor
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self, table):\n"
            "        super().__init__()\n        self.t = torch.tensor(table)\n"
            "    def forward(self, i, x):\n        return x * self.t[i]\n",
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self, table):\n"
            "        super().__init__()\n        self.register_buffer(\"t\", torch.tensor(table), persistent=False)\n"
            "    def forward(self, i, x):\n        return x * self.t[i]\n",
            unsafe=True,
        ),
        # ... but a row of a 2-D table is a tensor of its own, on the CPU
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.t = torch.tensor([[1.0, 2.0], [3.0, 4.0]])\n"
            "    def forward(self, i, x):\n        return x * self.t[i]\n",
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.register_buffer(\"t\", torch.tensor([[1.0, 2.0], [3.0, 4.0]]), persistent=False)\n"
            "    def forward(self, i, x):\n        return x * self.t[i]\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.w = torch.zeros(3)\n"
            "    def forward(self, x):\n        return x * self.w\n",
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.register_buffer(\"w\", torch.zeros(3), persistent=False)\n"
            "    def forward(self, x):\n        return x * self.w\n",
            unsafe=True,
        ),
        Invalid(
            "import torch as T\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n"
            "        nn.Module.__init__(self)\n        self.mask = T.tril(T.ones(n, n)).bool()  # causal\n"
            "    def forward(self, x):\n        return x * self.mask\n",
            "import torch as T\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n"
            "        nn.Module.__init__(self)\n"
            "        self.register_buffer(\"mask\", T.tril(T.ones(n, n)).bool(), persistent=False)  # causal\n"
            "    def forward(self, x):\n        return x * self.mask\n",
            unsafe=True,
        ),
        # before super().__init__(): register_buffer would raise, so no fix
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self):\n"
            "        self.w = torch.ones(3) * 2\n        super().__init__()\n"
            "    def forward(self, x):\n        return x * self.w\n",
        ),
        # an unknown base class may already own the name: report only
        Invalid(
            "import torch\nfrom torch import nn\nclass N(nn.Linear):\n    def __init__(self):\n"
            "        super().__init__(2, 2)\n        self.gain = torch.ones(2)\n"
            "    def forward(self, x):\n        return x * self.gain\n",
        ),
        # Lightning modules are nn.Modules (the base's module is imported under any name)
        Invalid(
            "import torch\nimport pytorch_lightning as pl\nclass M(pl.LightningModule):\n    def __init__(self):\n"
            "        super().__init__()\n        self.w = torch.zeros(3)\n"
            "    def forward(self, x):\n        return x * self.w\n",
        ),
        Invalid(
            "import torch\nfrom lightning import LightningModule\nclass M(LightningModule):\n"
            "    def __init__(self):\n        super().__init__()\n        self.w = torch.zeros(3)\n"
            "    def forward(self, x):\n        return x * self.w\n",
        ),
        # made a Parameter on one branch only: on the other it stays a plain tensor
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self, learn):\n"
            "        super().__init__()\n        self.s = torch.ones(1)\n        if learn:\n"
            "            self.s = nn.Parameter(self.s)\n",
        ),
        # handed to a function that reads it before it moves it, or moves only its dtype
        Invalid(
            "import torch\nfrom torch import nn\ndef score(img, mu, cov):\n    d = img - mu\n"
            "    mu = mu.to(img)\n    cov = cov.to(torch.float64)\n    return d.sum() + mu.sum() + cov.sum()\n"
            "class Norm(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.mu = torch.zeros(4)\n"
            "    def forward(self, x):\n        return score(x, self.mu, torch.eye(2))\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\ndef score(img, cov):\n    cov = cov.to(torch.float64)\n"
            "    return img.sum() + cov.sum()\n"
            "class Norm(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.cov = torch.eye(4)\n"
            "    def forward(self, x):\n        return score(x, cov=self.cov)\n",
        ),
        # `.to(dtype)` names no device: the attribute stays on the CPU
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self, k, device):\n"
            "        super().__init__()\n        self.k = torch.tensor([k]).to(torch.float32)\n"
            "    def forward(self, x):\n        return x * self.k\n",
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self, k, device):\n"
            "        super().__init__()\n        self.register_buffer(\"k\", torch.tensor([k]).to(torch.float32), persistent=False)\n"
            "    def forward(self, x):\n        return x * self.k\n",
            unsafe=True,
        ),
        # one use moves it, another does not: that one mixes devices
        Invalid(
            "import torch\nfrom torch import nn\nclass STFT(nn.Module):\n    def __init__(self, n):\n"
            "        super().__init__()\n        self.window = torch.ones(n)\n"
            "    def forward(self, x):\n        return x * self.window.to(x.device)\n"
            "    def inverse(self, z):\n        return z * self.window\n",
            "import torch\nfrom torch import nn\nclass STFT(nn.Module):\n    def __init__(self, n):\n"
            "        super().__init__()\n        self.register_buffer(\"window\", torch.ones(n), persistent=False)\n"
            "    def forward(self, x):\n        return x * self.window.to(x.device)\n"
            "    def inverse(self, z):\n        return z * self.window\n",
            unsafe=True,
        ),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.candidates: list = []  # (cls, method, attr, node, stmt)
        self.assigned: dict = {}  # cls -> {attr: count of assignments anywhere in the class}
        self.registered: dict = {}  # cls -> names given to register_buffer/register_parameter/setattr
        self.overrides: set = set()  # classes that move their own attributes
        # cls -> {attr: [(Assign, method, enclosing if-branches)]} for `self.x = nn.Parameter(...)`
        self.param_rebinds: dict = {}
        self.branches: list = []  # (If, "body"/"orelse") enclosing the node, innermost last
        self.candidate_branches: dict = {}  # candidate node -> its enclosing if-branches
        self.reads: dict = {}  # cls -> {attr: [mentions of self.<attr>, of them `self.<attr>.to(...)`]}
        self.filled: dict = {}  # cls -> {attr: `self.<attr>[...] = v` writes in __init__ (building it)}
        # cls -> {attr: `self.<attr>.to(d)` statements whose result is thrown away (no-ops: DL001's)}
        self.discarded: dict = {}
        self.used_after_init: dict = {}  # cls -> attrs some method besides __init__ mentions

    # ---- helpers -------------------------------------------------------------------------
    def _host_script(self) -> bool:
        """A script (it runs work at its top or under `__main__`, and no project module imports
        it, `devlint.project`) that never names a device, `.cuda`, `.to(` or a launcher: nothing
        moves its modules, so no attribute is left behind by a move."""
        return host_script(self.facts, self.ctx.module, self.ctx.filename)

    def _self_name(self) -> Optional[str]:
        m = self.t.method
        if m is None or not m.params.params:
            return None
        return m.params.params[0].name.value

    def _self_attr(self, target: cst.BaseExpression) -> Optional[str]:
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            if target.value.value == self._self_name():
                return target.attr.value
        return None

    def _is_tensor_origin(self, expr: cst.BaseExpression) -> bool:
        """A torch tensor factory/function call, or an expression derived from one."""
        if isinstance(expr, cst.Call):
            q = self.facts.qualname(expr.func)
            if q is not None:
                head, _, last = q.rpartition(".")
                return head == "torch" and (last in TENSOR_FUNCS or last in _LEGACY)
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in TENSOR_METHODS:
                return self._is_tensor_origin(expr.func.value)
            return False
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _ARITH):
            sides = (expr.left, expr.right)
            if not any(self._is_tensor_origin(s) for s in sides):
                return False
            return all(self._is_tensor_origin(s) or isinstance(s, (cst.Integer, cst.Float, cst.Name,
                                                                     cst.UnaryOperation)) for s in sides)
        if isinstance(expr, cst.Subscript):
            return self._is_tensor_origin(expr.value)
        return False

    def _count(self, attr: str) -> None:
        cls = self.t.cls
        d = self.assigned.setdefault(cls, {})
        d[attr] = d.get(attr, 0) + 1

    # ---- visitors ------------------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.t.cls is not None and self.t.method is node and node.name.value in _MOVE_OVERRIDES:
            self.overrides.add(self.t.cls)

    def visit_If_body(self, node: cst.If) -> None:
        self.branches.append((node, "body"))

    def leave_If_body(self, node: cst.If) -> None:
        self.branches.pop()

    def visit_If_orelse(self, node: cst.If) -> None:
        self.branches.append((node, "orelse"))

    def leave_If_orelse(self, node: cst.If) -> None:
        self.branches.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.t.method is None or not self.t.in_module_class:
            return
        is_param = (isinstance(node.value, cst.Call)
                    and self.facts.qualname(node.value.func) in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"))
        for tgt in node.targets:
            t = tgt.target
            if (self.t.method.name.value == "__init__" and isinstance(t, cst.Subscript)
                    and isinstance(t.value, cst.Attribute) and self._self_attr(t.value) is not None):
                filled = self.filled.setdefault(self.t.cls, {})
                filled[t.value.attr.value] = filled.get(t.value.attr.value, 0) + 1
            for el in _flatten(tgt.target):
                attr = self._self_attr(el)
                if attr is not None:
                    self._count(attr)
                    if is_param:
                        self.param_rebinds.setdefault(self.t.cls, {}).setdefault(attr, []).append(
                            (node, self.t.method, tuple(self.branches)))
        if len(node.targets) != 1 or self.t.method.name.value != "__init__":
            return
        attr = self._self_attr(node.targets[0].target)
        if attr is not None and self._is_tensor_origin(node.value):
            self.candidates.append((self.t.cls, self.t.method, attr, node, self.t.statement))
            self.candidate_branches[node] = tuple(self.branches)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.t.method is None or not self.t.in_module_class:
            return
        attr = self._self_attr(node.target)
        if attr is None:
            return
        self._count(attr)
        if (node.value is not None and self.t.method.name.value == "__init__"
                and self._is_tensor_origin(node.value)):
            self.candidates.append((self.t.cls, self.t.method, attr, node, self.t.statement))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self.t.method is not None and self.t.in_module_class:
            attr = self._self_attr(node.target)
            if attr is not None and self.t.method.name.value != "__init__":
                self._count(attr)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.t.cls is not None and self.t.method is not None and self._self_attr(node) is not None:
            reads = self.reads.setdefault(self.t.cls, {}).setdefault(node.attr.value, [0, 0, 0])
            reads[0] += 1
            if self.t.method.name.value != "__init__":
                self.used_after_init.setdefault(self.t.cls, set()).add(node.attr.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        # `self.weights[i]`: one element of a 1-D tensor, a 0-dim tensor PyTorch lets meet CUDA
        # tensors as a scalar
        if (self.t.cls is not None and isinstance(node.value, cst.Attribute) and self._self_attr(node.value) is not None
                and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)):
            self._element_read(node.value.attr.value)

    def _passed_to_mover(self, node: cst.Call, func: str) -> None:
        """``calculate_niqe(x, self.mu)`` where the file's ``calculate_niqe`` moves that parameter
        before it reads it (``mu = mu.to(img)``): the attribute is used moved."""
        moved = self.facts.moved_params(func)
        if not moved:
            return
        for i, arg in enumerate(node.args):
            if arg.star or not (isinstance(arg.value, cst.Attribute) and self._self_attr(arg.value)):
                continue
            key = arg.keyword.value if arg.keyword is not None else None
            if any((key is None and i == pos) or (key is not None and key == name) for pos, name in moved):
                self.reads.setdefault(self.t.cls, {}).setdefault(arg.value.attr.value, [0, 0, 0])[1] += 1

    def _element_read(self, attr: str) -> None:
        self.reads.setdefault(self.t.cls, {}).setdefault(attr, [0, 0, 0])[2] += 1

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        moved = f.value if isinstance(f, cst.Attribute) and f.attr.value in ("to", "type_as") else None
        if isinstance(moved, cst.Subscript):
            moved = moved.value  # `self.sine_waves[:, :n].to(x.device)`: the slice used, moved
        if (self.t.cls is not None and isinstance(moved, cst.Attribute) and self._self_attr(moved) is not None):
            reads = self.reads.setdefault(self.t.cls, {}).setdefault(moved.attr.value, [0, 0, 0])
            reads[1] += 1  # `self.window.to(x.device)`: moved where it is used
            st = self.t.statement
            if type(st) is cst.SimpleStatementLine and any(type(x) is cst.Expr and x.value is node for x in st.body):
                d = self.discarded.setdefault(self.t.cls, {})
                d[moved.attr.value] = d.get(moved.attr.value, 0) + 1  # `self.mean.to(dev)` alone: reads nothing
        if self.t.cls is not None and isinstance(f, cst.Name) and node.args:
            self._passed_to_mover(node, f.value)
        if (self.t.cls is not None and isinstance(f, cst.Name) and f.value == "len" and len(node.args) == 1
                and isinstance(node.args[0].value, cst.Attribute) and self._self_attr(node.args[0].value) is not None):
            self._element_read(node.args[0].value.attr.value)  # its length: a host number
        if self.t.cls is None or not node.args:
            return
        func = node.func
        name = None
        if isinstance(func, cst.Attribute) and func.attr.value in ("register_buffer", "register_parameter"):
            name = string_value(node.args[0].value)
        elif isinstance(func, cst.Name) and func.value == "setattr" and len(node.args) >= 2:
            name = string_value(node.args[1].value)
        if name is not None:
            self.registered.setdefault(self.t.cls, set()).add(name)

    # ---- decisions -----------------------------------------------------------------------
    def finish(self) -> None:
        if self.candidates and self._host_script():
            return  # a script that never names a device runs its modules where they are built: the host
        by_name = {c.name.value: c for c in self.facts.class_nodes}
        for cls, method, attr, node, stmt in self.candidates:
            if cls in self.overrides or attr in self.registered.get(cls, ()):
                continue
            mentions, moved, elements = self.reads.get(cls, {}).get(attr, (0, 0, 0))
            if (attr not in self.used_after_init.get(cls, ()) and attr not in self.param_rebinds.get(cls, {})
                    and mentions > self.assigned.get(cls, {}).get(attr, 0) == 1):
                continue  # read only by `__init__`, to build something else: no method meets it later
            if (mentions == self.assigned.get(cls, {}).get(attr, 0) and self._never_read(attr, cls, by_name)
                    and self._own_lineage(cls, by_name, set())):
                continue  # nothing in the file reads it: no computation meets it on the wrong device
            filled = self.filled.get(cls, {}).get(attr, 0)  # `self.x[:, 0] = 0` while building it
            if moved and mentions - moved - filled == self.assigned.get(cls, {}).get(attr, 0):
                continue  # every use moves it to where it is needed: `self.window.to(x.device)`
            if self._base_moves_it(cls, attr, by_name):
                continue  # a base class of the file assigns it too and only uses it moved
            discarded = self.discarded.get(cls, {}).get(attr, 0)
            if (elements and mentions - elements - discarded == self.assigned.get(cls, {}).get(attr, 0)
                    and isinstance(node, (cst.Assign, cst.AnnAssign)) and self._flat_literal(node.value, method)):
                continue  # a 1-D table of numbers read one element at a time: scalars on any device
            if self._project_base_owns(cls, attr):
                continue  # a project base class (another file) moves its attributes or registered it
            if f"{cls.name.value}.{attr}" in self.facts.project.applied:
                continue  # the model holding it (another file) moves it in its `_apply` override
            rebinds = self._one_branch_rebinds(cls, method, attr, node)
            if self.assigned.get(cls, {}).get(attr, 0) != 1 + len(rebinds):
                continue  # reassigned (in forward, a reset(), or twice in __init__)
            if self._inherited_buffer(cls, attr, by_name, set()):
                continue  # assigning to a buffer a base class registered updates that buffer
            if isinstance(node, (cst.Assign, cst.AnnAssign)) and self.facts.values.on_argument_device(
                    node.value, method):
                continue  # placed at once on the device the caller hands the constructor
            self_name = method.params.params[0].name.value
            msg = (f"`{self_name}.{attr}` is a plain tensor attribute: `model.to(device)` does not move it; "
                   "register it as a buffer")
            fix = None
            if rebinds:  # `if learn: self.x = nn.Parameter(...)`: on the other branch it stays plain
                self.report(node, msg.replace("attribute:", "attribute unless the `nn.Parameter` branch runs:"))
                continue
            if (isinstance(node, cst.Assign) and stmt is not None and any(s is node for s in stmt.body)
                    and _after_super_init(method, stmt) and self._bases_allow(cls, attr, by_name, set())):
                call = cst.Call(
                    func=cst.Attribute(cst.Name(self_name), cst.Name("register_buffer")),
                    args=[
                        cst.Arg(cst.SimpleString(f'"{attr}"'), comma=_comma()),
                        cst.Arg(node.value, comma=_comma()),
                        cst.Arg(cst.Name("False"), keyword=cst.Name("persistent"),
                                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))),
                    ],
                )
                fix = unsafe("register it with `register_buffer(..., persistent=False)`", {node: cst.Expr(call)})
            self.report(node, msg, fix)

    def _never_read(self, attr: str, cls: cst.ClassDef, by_name: dict) -> bool:
        """No ``.attr`` in the file's text besides its assignments, and no dynamic lookup. A
        ``self.attr`` in the methods of another class of the file that shares no instance with
        ``cls`` (neither derives the other, and no class of the file derives both) is that class's
        own attribute of the same name, not a read of this one."""
        src = self.facts.source
        if b"getattr(" in src or b"__dict__" in src:
            return False
        total = sum(d.get(attr, 0) for d in self.assigned.values())
        text = len(re.findall(rb"\." + re.escape(attr.encode()) + rb"\b", src))
        if text <= total:
            return True
        others = [c for c, reads in self.reads.items() if c is not cls and reads.get(attr)]
        if not others:
            return False
        lineages = [_ancestors(c, by_name) | {c} for c in self.facts.class_nodes]
        related = {id(c) for line in lineages if cls in line for c in line}
        if any(id(c) in related for c in others):
            return False
        own = self.assigned.get(cls, {}).get(attr, 0) + sum(self.reads[c][attr][0] for c in others)
        return text <= own

    def _own_lineage(self, cls: cst.ClassDef, by_name: dict, seen: set) -> bool:
        """Every class ``cls`` derives is the file's own or a library Module (torch.nn, Lightning):
        no method of another file of the project can read what it sets on ``self``."""
        bases = _positional_bases(cls, seen)
        if bases is None:
            return False
        for base in bases:
            parent = by_name.get(dotted(base.value) or "")
            if parent is not None:
                if not self._own_lineage(parent, by_name, seen):
                    return False
            elif not is_module_base(self.facts.qualname(base.value)):
                return False
        return bool(cls.bases)

    def _base_moves_it(self, cls: cst.ClassDef, attr: str, by_name: dict) -> bool:
        """A base class of this file that assigns ``attr`` in its own ``__init__`` and whose
        methods only ever use it moved (``self.window.to(x.device)``): the subclass's value is
        read by those inherited methods the same way."""
        for base in cls.bases:
            parent = by_name.get(dotted(base.value) or "")
            if parent is None or parent is cls:
                continue
            mentions, moved, _ = self.reads.get(parent, {}).get(attr, (0, 0, 0))
            if self.assigned.get(parent, {}).get(attr) and moved and \
                    mentions - moved - self.filled.get(parent, {}).get(attr, 0) == self.assigned[parent][attr]:
                return True
        return False

    def _flat_literal(self, value: Optional[cst.BaseExpression], method=None) -> bool:
        """``torch.FloatTensor([w / 2 ** s for s in range(n)])``, ``torch.tensor([0.5, 0.25])``: a
        1-D tensor made from a flat list of numbers; also ``torch.tensor(mean)`` for a parameter
        ``mean=(0, 0, 0, 0)`` of the method that it never rebinds (what its author foresaw)."""
        if not (isinstance(value, cst.Call) and value.args and value.args[0].keyword is None
                and self.facts.qualname(value.func) in _TABLE_MAKERS):
            return False
        data = value.args[0].value
        if isinstance(data, cst.Name) and method is not None:
            return _flat_number_default(method, data.value)
        if isinstance(data, (cst.ListComp, cst.GeneratorExp)):
            return not isinstance(data.elt, (cst.List, cst.Tuple, cst.ListComp))
        return isinstance(data, cst.List) and bool(data.elements) and not any(
            isinstance(e.value, (cst.List, cst.Tuple, cst.ListComp)) or isinstance(e, cst.StarredElement)
            for e in data.elements)

    def _project_base_owns(self, cls: cst.ClassDef, attr: str) -> bool:
        for base in cls.bases:
            found = self.facts.project.module_base(dotted(base.value))
            if found is not None and (found[0] or attr in found[1]):
                return True
        return False

    def _one_branch_rebinds(self, cls, method, attr: str, node) -> list:
        """The later ``self.<attr> = nn.Parameter(...)`` of the same ``__init__``, when every one of
        them sits in one branch of an ``if`` that does not enclose ``node`` and whose other branch
        does not rebind it (otherwise the attribute is always a Parameter): else ``[]``."""
        sites = self.param_rebinds.get(cls, {}).get(attr, [])
        if not sites:
            return []
        outer = self.candidate_branches.get(node, ())
        taken: set = set()
        for _, m, branches in sites:
            if m is not method or len(branches) <= len(outer) or branches[:len(outer)] != outer:
                return []
            if_node, branch = branches[len(outer)]
            taken.add((if_node, branch))
        ifs = {i for i, _ in taken}
        if any((i, "body") in taken and (i, "orelse") in taken for i in ifs):
            return []
        return sites

    def _inherited_buffer(self, cls: cst.ClassDef, attr: str, by_name: dict, seen: set) -> bool:
        """A base class (same file, or a torch.nn layer) may have registered ``attr``."""
        bases = _positional_bases(cls, seen)
        if bases is None:
            return False
        for base in bases:
            q = self.facts.qualname(base.value)
            if q is not None and q.startswith("torch.nn.") and q not in _MODULE_BASES:
                if attr in _TORCH_LAYER_BUFFERS:
                    return True
                continue
            d = dotted(base.value)
            parent = by_name.get(d) if d is not None else None
            if parent is not None and (attr in self.registered.get(parent, ())
                                       or self._inherited_buffer(parent, attr, by_name, seen)):
                return True
        return False

    def _bases_allow(self, cls: cst.ClassDef, attr: str, by_name: dict, seen: set) -> bool:
        """Every base is nn.Module or a Module class of the project that does not set ``attr``."""
        bases = _positional_bases(cls, seen)
        if bases is None:
            return False
        for base in bases:
            if self.facts.qualname(base.value) in _MODULE_BASES:
                continue
            d = dotted(base.value)
            parent = by_name.get(d) if d is not None else None
            if parent is None:
                # a Module of the project (another file) that owns no such name, every class on
                # its way the project's or exactly nn.Module
                found = self.facts.project.module_base(d)
                if found is None or found[0] or attr in found[1] or not found[2]:
                    return False
                continue
            if not self.facts.class_nodes.get(parent):
                return False
            if (self.assigned.get(parent, {}).get(attr) or attr in self.registered.get(parent, ())
                    or not self._bases_allow(parent, attr, by_name, seen)):
                return False
        return bool(cls.bases)


def _flat_number_default(method: cst.FunctionDef, name: str) -> bool:
    """``name`` is a parameter of ``method`` whose default is a flat tuple or list of numbers, and
    nothing in the method binds it again."""
    params = list(method.params.posonly_params) + list(method.params.params) + list(method.params.kwonly_params)
    p = next((x for x in params if x.name.value == name), None)
    d = p.default if p is not None else None
    if not (isinstance(d, (cst.Tuple, cst.List)) and d.elements and all(
            isinstance(e, cst.Element) and isinstance(
                e.value.expression if isinstance(e.value, cst.UnaryOperation) else e.value, (cst.Integer, cst.Float))
            for e in d.elements)):
        return False
    for n in nodes(method.body):
        if isinstance(n, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.WithItem)):
            t = n.asname.name if isinstance(n, cst.WithItem) and n.asname else getattr(n, "target", None)
            if t is not None and name in bound_names(t):
                return False
    return True


_TABLE_MAKERS = frozenset({"torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor",
                           "torch.DoubleTensor", "torch.LongTensor", "torch.IntTensor"})


def _positional_bases(cls: cst.ClassDef, seen: set) -> Optional[list]:
    """The bases of ``cls`` (no ``metaclass=``), or None when a walk up the classes already
    passed it (a cycle, or a diamond seen once)."""
    if cls in seen:
        return None
    seen.add(cls)
    return [b for b in cls.bases if b.keyword is None]


def _comma() -> cst.Comma:
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _flatten(target: cst.BaseExpression):
    if isinstance(target, (cst.Tuple, cst.List)):
        for el in target.elements:
            yield from _flatten(el.value)
    elif isinstance(target, cst.StarredElement):
        yield from _flatten(target.value)
    else:
        yield target


def _is_super_init(stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            f = small.value.func
            if isinstance(f, cst.Attribute) and f.attr.value == "__init__":
                recv = f.value
                if isinstance(recv, cst.Call) and isinstance(recv.func, cst.Name) and recv.func.value == "super":
                    return True
                if dotted(recv) is not None and small.value.args:
                    return True  # nn.Module.__init__(self) / Base.__init__(self, ...)
    return False


def _ancestors(cls: cst.ClassDef, by_name: dict) -> set:
    """The classes of the file that ``cls`` derives, directly or not (by name)."""
    out: set = set()
    todo = [cls]
    while todo:
        c = todo.pop()
        for base in c.bases:
            parent = by_name.get(dotted(base.value) or "")
            if parent is not None and parent not in out and parent is not cls:
                out.add(parent)
                todo.append(parent)
    return out


def _after_super_init(method: cst.FunctionDef, stmt: cst.CSTNode) -> bool:
    """``stmt`` is a top-level statement of ``method`` preceded by a super().__init__() call."""
    body = method.body.body
    for s in body:
        if s is stmt:
            return False
        if _is_super_init(s):
            return any(x is stmt for x in body)
    return False
