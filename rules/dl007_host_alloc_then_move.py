from __future__ import annotations

import libcst as cst

from devlint import lazyre
from devlint.analysis.calls import none_in_every_call
from devlint.analysis.checkpoints import is_test_module
from devlint.analysis.values import sets_default_device
from devlint.callargs import factory_takes_device, has_double_star, keyword, positional_count, with_keyword
from devlint.diagnostic import Applicability
from devlint.facts import CONTAINER, DEVICE, DEVICE_LESS_FACTORIES, PARAM, TENSOR, dotted, string_value
from devlint.analysis.accumulators import short
from devlint.analysis.hostflow import DRAW, LEGACY_DTYPES, UNFILLED, host_build, int_valued, legacy_type
from devlint.fixes import choose_device, composed_replacements, legacy_empty_call, legacy_fill_call
from devlint.rule import Invalid, Rule, safe, unsafe
from devlint.syntax import bound_names, own_params
from devlint.walk import nodes

# `torch.tensor(data)` / `torch.as_tensor(data)` build from Python data on the host whatever
# `device=` says (and then copy), so folding the move saves nothing: not flagged.
FACTORIES = DEVICE_LESS_FACTORIES - {"tensor", "as_tensor"}
# factories whose values are exact in any dtype: `.to(tensor)`'s cast can be folded as `dtype=`
_EXACT_IN_ANY_DTYPE = frozenset({"zeros", "ones", "empty", "eye"})
RANDOM = frozenset({"rand", "randn", "randint", "randperm", "normal"})
_DEVICE_STRING = lazyre.compile(r"(cpu|cuda|mps|xpu|meta|hpu)(:\d+)?")
# `.to()` keywords that do not change what the folded factory must do
_HARMLESS_TO_KW = {"non_blocking", "copy"}


_PLACERS = frozenset({"to", "cuda", "to_empty"})
# what only a tensor has among the things `.to()` takes (a device, a dtype, a tensor)
_TENSOR_METADATA = frozenset({"shape", "size", "dim", "ndim", "numel", "ndimension"})


def _host_placement(call: cst.Call) -> bool:
    """A call in a build chain that keeps the value on the host: anything but a placement,
    or one that names the CPU (``.to("cpu")``, ``.cpu()``)."""
    f = call.func
    if not (isinstance(f, cst.Attribute) and f.attr.value in _PLACERS):
        return True
    if f.attr.value != "to" or not call.args:
        return False
    dev = keyword(call, "device")
    return _names_cpu(dev.value if dev is not None else call.args[0].value)


def _names_cpu(dev: cst.BaseExpression) -> bool:
    """``"cpu"`` or ``torch.device("cpu")``."""
    return string_value(dev) == "cpu" or (isinstance(dev, cst.Call) and dotted(dev.func) == "torch.device"
                                          and bool(dev.args) and string_value(dev.args[0].value) == "cpu")


def device_evidence(facts, node: cst.BaseExpression, scope=None, cls=None) -> bool:
    """Whether ``node`` (an argument of ``.to``) is a device, not a dtype or a tensor: a device
    literal or call, ``<expr>.device``, or a name the value model knows holds a device
    (``dev = next(m.parameters()).device``)."""
    s = string_value(node)
    if s is not None:
        return _DEVICE_STRING.fullmatch(s) is not None
    if isinstance(node, cst.Call):
        if facts.qualname(node.func) in ("torch.device", "torch.accelerator.current_accelerator"):
            return True
        # `self._device()`, `get_device()` with no arguments: the module's or the program's device
        name = (dotted(node.func) or "").rsplit(".", 1)[-1]
        return not node.args and "device" in name.lower() and name != "get_device"
    if isinstance(node, cst.Attribute) and node.attr.value == "device":
        return True  # `x.device`, `next(m.parameters()).device`
    d = dotted(node)
    if d is None:
        return False
    if facts.qualname(node) is not None:  # torch.float32 & co
        return False
    last = d.rsplit(".", 1)[-1]
    if "device" in last.lower() or last in ("dev",) or d in {dv.name for dv in facts.device_vars}:
        return True
    return facts.kind_of(node, scope, cls) == DEVICE


# torch functions whose positional arguments are array data (a number, never a device or dtype)
_ELEMENTWISE = frozenset("""exp exp2 expm1 log log1p log2 log10 logaddexp logaddexp2 logsumexp sqrt rsqrt
    abs sign sin cos tan tanh sigmoid maximum minimum atan2 hypot pow mul add sub div square erf
    floor ceil round clamp clip lerp""".split())


def _operand_is(e: cst.BaseExpression, code: str, code_of) -> bool:
    """``e`` is the value spelled ``code``, or arithmetic of it with a number (``-2. * x``)."""
    if isinstance(e, cst.UnaryOperation):
        e = e.expression
    if isinstance(e, cst.BinaryOperation):
        num = (cst.Integer, cst.Float)
        left = e.left.expression if isinstance(e.left, cst.UnaryOperation) else e.left
        right = e.right.expression if isinstance(e.right, cst.UnaryOperation) else e.right
        if isinstance(left, num):
            return code_of(e.right) == code
        if isinstance(right, num):
            return code_of(e.left) == code
        return False
    return code_of(e) == code


def _size_args(factory: str) -> int:
    """Positional arguments that are never a dtype (a generous bound: sizes / ranges / fill)."""
    return 99 if factory in ("zeros", "ones", "empty", "rand", "randn", "eye") else 3


class HostAllocThenMove(Rule):
    """
    ## What it does
    Flags a tensor factory called without `device=` whose result is moved straight to
    a device: `torch.zeros(...).to(device)`, `torch.randn(...).cuda()` (host noise or
    labels drawn in a loop and moved, too), `torch.arange(n).to(x.device)`,
    `torch.ones(n).to(next(m.parameters()).device)`, and `torch.zeros(n).to(x)` for a
    tensor `x`. A `.to(...)` counts only when its argument is evidently a device (a
    device variable or attribute, `<expr>.device`, a device string, `torch.device(...)`,
    `device=`) or a tensor the file shows to be one: `.to(torch.float16)` is not flagged. The moved value
    may also be a host build as a whole: a factory followed by shape and dtype methods
    (`torch.arange(n).long().to(d)`, `torch.linspace(...).unsqueeze(1).expand(b, k).to(x)`),
    a legacy constructor of sizes filled with a number (`torch.LongTensor(b, n).fill_(0)`),
    arithmetic with numbers (`(torch.eye(n) * c).cuda()`) and elementwise torch functions of
    such builds (`torch.pow(c * torch.ones(n), torch.arange(n).float())`); a build placed on
    the CPU copies nothing and is not flagged, nor is `.to(device)` of a parameter that
    defaults to `None` and that every call in the file leaves at `None` (the rotary
    embeddings' `__init__(self, dim, device=None)`, built as `Rotary(dim)`: `.to(None)`
    copies nothing).

    Only factories that *compute* their values (`zeros`, `ones`, `full`, `empty`,
    `arange`, `eye`, `linspace`, `rand*`, ...) are flagged: they can write directly on
    the device. `torch.tensor(data)` / `torch.as_tensor(data)` are not: built from
    Python data, `torch.tensor(data, device=d)` also fills a host buffer and copies it,
    so there is no copy to save.

    ## Why is this bad?
    The tensor is allocated and filled in host memory, then copied to the device:
    an extra allocation and a host-to-device transfer (and, for large tensors, a
    synchronising copy) where the factory could have written on the device directly.

    ## Example
    ```python
    mask = torch.ones(n, n).to(device)
    noise = torch.randn(8, 4).cuda()
    ```

    ## Use instead
    ```python
    mask = torch.ones(n, n, device=device)
    noise = torch.randn(8, 4, device=device)
    ```

    ## Fix safety
    Folding the move into the factory's `device=` is safe for deterministic factories
    (`zeros`, `ones`, `full`, `arange`, `eye`, `linspace`, ...): the values, dtype and
    device are the same, minus one host allocation and one copy.
    `.to(x)` with a tensor `x` also casts to `x.dtype`, so its fold passes both
    `dtype=x.dtype, device=x.device`: safe for `zeros`/`ones`/`empty`/`eye` (exact in
    any dtype), unsafe for the others (`arange`/`linspace`/`full` then compute in the
    target dtype, which can round differently); a factory that already picks a dtype
    is reported without a fix. `.cuda()` becomes `device=<device variable>`
    (reused, or inserted after the imports as DL002 does), so the folded code also
    runs on a CPU-only machine; `.cuda(i)` with an index is reported without a fix.
    The fix is unsafe for random factories (`rand`, `randn`, `randint`, `randperm`,
    `normal`): on the CPU the numbers are identical, but a GPU draws from its own
    generator, so the values change on a GPU machine. It is also unsafe when the
    factory passes `requires_grad=True`: `torch.randn(3, requires_grad=True).to(d)`
    is a non-leaf copy whose `.grad` stays `None`, while the folded form is a leaf
    that accumulates gradients. A `.to()` that also changes dtype or memory format,
    and `.cuda(i)` are reported without a fix; multi-GPU files get an unsafe fix. A
    factory with `pin_memory=` (a deliberate pinned staging buffer), `out=`,
    `generator=` (a CPU generator cannot draw on a GPU) or `**kwargs` is not flagged,
    nor is a random factory in a test file (inputs drawn on the host have the same
    values on every device, which is what a test compares). A whole host build gets
    `device=` on each of its factories and loses the `.to(device)` (a `.to(x)` of a
    tensor stays, for its cast); `torch.LongTensor(b, n).fill_(0)` becomes
    `torch.zeros(b, n, dtype=torch.int64, device=d)` (`ones` / `full` for other
    numbers). That is unsafe when a name combined with the build could be a host tensor
    (it would now meet a device tensor), when an elementwise function now computes on
    the device (it may round differently), and when a legacy constructor's one argument
    might be data rather than a size.
    """

    code = "DL007"
    # name, summary, default and prefilter: devlint/catalogue.py

    VALID = [
        # `.to(dt)` where `dt` only reaches a factory (a fill value, a size) and keywords: no evidence
        # it is a tensor rather than a dtype
        "import torch\ndef f(dt, n):\n    w = torch.full((n,), 2.0, dtype=dt)\n"
        "    return torch.zeros(n).to(dt) + torch.exp(w)\n",
        # `device=None` in every call the file makes: `.to(None)` copies nothing (rotary embeddings)
        "import torch\nfrom torch import nn\nclass Rotary(nn.Module):\n"
        "    def __init__(self, dim, base=10000, device=None):\n        super().__init__()\n"
        "        inv = 1.0 / (base ** (torch.arange(0, dim, 2).float().to(device) / dim))\n"
        "        self.register_buffer('inv', inv)\n"
        "class Attn(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
        "        self.rotary = Rotary(d, base=500)\n",
        "import torch\nx = torch.zeros(3, device='cuda')\n",
        # a host factory combined with another tensor a call builds: both would have to move
        "import torch\ndef f(x, n):\n    return (torch.ones(n) * torch.rand(n)).to(x.device)\n",
        # a library's `__main__` demo: the model is built here and left on the CPU, nothing is copied
        "import torch\nfrom torch import nn\nclass Codec(nn.Module):\n    pass\n"
        "if __name__ == '__main__':\n    model = Codec().to('cpu')\n    x = torch.randn(1, 16).to(model.device)\n",
        "import torch\nx = torch.zeros(3).to(torch.float16)\n",
        # built from Python data: `device=` would copy just the same
        "import torch\nx = torch.tensor([1.0, 2.0]).to('cpu')\ny = torch.as_tensor([1, 2]).cuda()\n",
        "import torch\ndef f(data, x):\n    return torch.tensor(data, dtype=torch.long).to(x.device)\n",
        # `.to(y)` with `y` of unknown kind (a dtype? a tensor?): no guess
        "import torch\ndef f(y):\n    return torch.zeros(3).to(y)\n",
        "import torch\nd = torch.device('cpu')\nx = torch.zeros(3, device=d).to(d)\n",
        "import torch\nx = torch.zeros(3, pin_memory=True).to('cpu', non_blocking=True)\n",
        "import torch\nimport numpy as np\nx = torch.from_numpy(np.ones(3)).to('cpu')\n",
        "import torch\nx = torch.zeros_like(torch.ones(2)).to('cpu')\n",
        "import torch\nkw = {}\nx = torch.zeros(3, **kw).to('cpu')\n",
        # a fill from a value that may be a device tensor; a method taking a tensor; data
        "import torch\ndef f(v, device):\n    return torch.FloatTensor(3).fill_(v).to(device)\n",
        "import torch\nlabel = 0\ndef f(device, label):\n    return torch.FloatTensor(3).fill_(label).to(device)\n",
        "import torch\ndef f(y, device):\n    return torch.ones(3).expand_as(y).to(device)\n",
        "import torch\ndef f(device):\n    return torch.LongTensor([1, 2]).fill_(0).to(device)\n",
        # a host build placed on the host: nothing is copied
        "import torch\nx = torch.ones(3).float().to('cpu')\n",
        "import torch\nx = torch.ones(2, dtype=torch.float64).to('cpu', non_blocking=True)\n",
        "import torch\ndef export(n):\n    DEVICE = torch.device('cpu')\n    return torch.zeros(2, n).to(DEVICE)\n",
        "import torch\ng = torch.Generator().manual_seed(0)\nx = torch.rand(3, generator=g).to('cpu')\n",
        # the file sets torch's default device to CUDA: the factory allocates there, nothing is copied
        "import torch\ntorch.set_default_tensor_type(torch.cuda.HalfTensor)\n"
        "def mask(n, x):\n    return torch.full((n, n), float('-inf')).to(x.device)\n",
    ]
    INVALID = [
        # ... but one call passes a device: that one builds on the host and copies
        Invalid("import torch\nfrom torch import nn\nclass Rotary(nn.Module):\n"
                "    def __init__(self, dim, base=10000, device=None):\n        super().__init__()\n"
                "        inv = 1.0 / (base ** (torch.arange(0, dim, 2).float().to(device) / dim))\n"
                "        self.register_buffer('inv', inv)\n"
                "a = Rotary(8)\nb = Rotary(8, device='cuda')\n",
                "import torch\nfrom torch import nn\nclass Rotary(nn.Module):\n"
                "    def __init__(self, dim, base=10000, device=None):\n        super().__init__()\n"
                "        inv = 1.0 / (base ** (torch.arange(0, dim, 2, device=device).float() / dim))\n"
                "        self.register_buffer('inv', inv)\n"
                "a = Rotary(8)\nb = Rotary(8, device='cuda')\n"),
        # a cast to a dtype with `.type(...)` on the way stays on the host, as `.float()` does
        Invalid(
            "import torch\ndef grid(w, ref):\n    return torch.arange(w).type(ref.dtype).to(ref.device)\n",
            "import torch\ndef grid(w, ref):\n    return torch.arange(w, device=ref.device).type(ref.dtype)\n",
        ),
        # a fill from the script's constant label (module-level or local): a number, so it could be made there
        Invalid(
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "source_label = 0\ndef target(n):\n    return torch.FloatTensor(n, 1).fill_(source_label).to(device)\n",
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "source_label = 0\ndef target(n):\n    return torch.full((n, 1), source_label, dtype=torch.float32, device=device)\n",
        ),
        Invalid(
            "import torch\ndef train(device, n):\n    real = 1\n    for i in range(n):\n"
            "        y = torch.FloatTensor(n, 1).fill_(real).to(device)\n        print(y)\n",
            "import torch\ndef train(device, n):\n    real = 1\n    for i in range(n):\n"
            "        y = torch.full((n, 1), real, dtype=torch.float32, device=device)\n        print(y)\n",
        ),
        # the module's device asked of a method named for it
        Invalid(
            "import torch\nfrom torch import nn\nclass C(nn.Module):\n    def _device(self):\n"
            "        return next(self.parameters()).device\n    def forward(self, x):\n"
            "        return x @ torch.eye(4).to(self._device())\n",
            "import torch\nfrom torch import nn\nclass C(nn.Module):\n    def _device(self):\n"
            "        return next(self.parameters()).device\n    def forward(self, x):\n"
            "        return x @ torch.eye(4, device=self._device())\n",
        ),
        Invalid(
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "x = torch.zeros(2, 3).to(device)\n",
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "x = torch.zeros(2, 3, device=device)\n",
        ),
        # `.to(tensor)`: device and dtype both come from `y`
        Invalid(
            "import torch\ny = torch.ones(2)\nx = torch.zeros(3).to(y)\n",
            "import torch\ny = torch.ones(2)\nx = torch.zeros(3, dtype=y.dtype, device=y.device)\n",
        ),
        Invalid(
            "import torch\ny = torch.ones(2)\nx = torch.arange(3).to(y)\n",
            "import torch\ny = torch.ones(2)\nx = torch.arange(3, dtype=y.dtype, device=y.device)\n",
            unsafe=True,
        ),
        Invalid("import torch\ny = torch.ones(2)\nx = torch.zeros(3, dtype=torch.int64).to(y)\n"),
        # the device of a model's parameters
        Invalid(
            "import torch\ndef f(m, n):\n    return torch.zeros(n).to(next(m.parameters()).device)\n",
            "import torch\ndef f(m, n):\n    return torch.zeros(n, device=next(m.parameters()).device)\n",
        ),
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    x = torch.ones(4).cuda()\n",
            "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
            "if torch.cuda.is_available():\n    x = torch.ones(4, device=device)\n",
        ),
        Invalid(
            "import torch\ndef f(x):\n    return torch.randn(3).to(x.device)\n",
            "import torch\ndef f(x):\n    return torch.randn(3, device=x.device)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\ndef f(d):\n    return torch.zeros(3, requires_grad=True).to(device=d)\n",
            "import torch\ndef f(d):\n    return torch.zeros(3, requires_grad=True, device=d)\n",
            unsafe=True,
        ),
        Invalid("import torch\nx = torch.ones(4).cuda(1)\n"),
        Invalid("import torch\ndef f(device):\n    return torch.ones(4).to(device, torch.float16)\n"),
        # a host factory scaled by a number, then copied, every sampling step
        Invalid("import torch\ndef steps(x, n):\n    for _ in range(10):\n        t = (torch.ones(n) * 2).to(x.device)\n"
                "        x = x * t\n    return x\n",
                "import torch\ndef steps(x, n):\n    for _ in range(10):\n        t = (torch.ones(n, device=x.device) * 2)\n"
                "        x = x * t\n    return x\n"),
        # ... by a loop index: unsafe (were `i` a host tensor, it would now mix devices)
        Invalid("import torch\ndef steps(x, seq):\n    for i in seq:\n        t = (torch.ones(x.size(0)) * i).to(x.device)\n"
                "        x = x + t\n    return x\n",
                "import torch\ndef steps(x, seq):\n    for i in seq:\n        t = (torch.ones(x.size(0), device=x.device) * i)\n"
                "        x = x + t\n    return x\n", unsafe=True),
        # the same demo once the model is placed on a device: the copy is real
        Invalid("import torch\nfrom torch import nn\nclass Codec(nn.Module):\n    pass\n"
                "if __name__ == '__main__':\n    model = Codec().to('cuda')\n    x = torch.randn(1, 16).to(model.device)\n",
                "import torch\nfrom torch import nn\nclass Codec(nn.Module):\n    pass\n"
                "if __name__ == '__main__':\n    model = Codec().to('cuda')\n    x = torch.randn(1, 16, device=model.device)\n",
                unsafe=True),
        # whole host builds: a chain of shape / dtype methods, a filled legacy constructor, `.cuda()` of arithmetic
        Invalid("import torch\ndef f(end, device):\n    return torch.arange(end).long().to(device)\n",
                "import torch\ndef f(end, device):\n    return torch.arange(end, device=device).long()\n"),
        Invalid("import torch\ndef f(x: torch.Tensor, b, k):\n    return torch.linspace(0, b, b).unsqueeze(1).expand(b, k).to(x)\n",
                "import torch\ndef f(x: torch.Tensor, b, k):\n    return torch.linspace(0, b, b, device=x.device).unsqueeze(1).expand(b, k).to(x)\n"),
        Invalid("import torch\ndef f(h, device):\n    b = h.size(0)\n    return torch.LongTensor(b, 4).fill_(2).to(device)\n",
                "import torch\ndef f(h, device):\n    b = h.size(0)\n    return torch.full((b, 4), 2, dtype=torch.int64, device=device)\n"),
        # `.to(x)` where the function reads `x.shape`: a tensor, not a device or a dtype
        Invalid("import torch\ndef f(x, model):\n    zero = torch.zeros(x.shape[0], 1).to(x)\n    return model(x, zero)\n",
                "import torch\ndef f(x, model):\n    zero = torch.zeros(x.shape[0], 1, dtype=x.dtype, device=x.device)\n"
                "    return model(x, zero)\n"),
        # `.to(lamb)` where `lamb` (times a number) is handed to an elementwise torch function: a tensor
        Invalid("import torch\ndef inverse_lambda(lamb, b):\n"
                "    return b * torch.logaddexp(-2. * lamb, torch.zeros((1,)).to(lamb))\n",
                "import torch\ndef inverse_lambda(lamb, b):\n"
                "    return b * torch.logaddexp(-2. * lamb, torch.zeros((1,), dtype=lamb.dtype, device=lamb.device))\n"),
        # a math constant in the arithmetic, a cast to a dtype on the way: still one host build
        Invalid("import math\nimport torch\ndef f(t, half):\n"
                "    return torch.exp(-math.log(1e4) * torch.arange(half) / half).to(device=t.device)\n",
                "import math\nimport torch\ndef f(t, half):\n"
                "    return torch.exp(-math.log(1e4) * torch.arange(half, device=t.device) / half)\n", unsafe=True),
        Invalid("import torch\ndef f(t0, n):\n    return torch.linspace(0, 1, n).to(t0.dtype).to(t0.device)\n",
                "import torch\ndef f(t0, n):\n    return torch.linspace(0, 1, n, device=t0.device).to(t0.dtype)\n"),
        # a starred shape is sizes, never data
        Invalid("import torch\ndef f(x):\n    return torch.FloatTensor(*x.shape).fill_(0).to(x.device)\n",
                "import torch\ndef f(x):\n    return torch.zeros(*x.shape, dtype=torch.float32, device=x.device)\n"),
        # legacy constructors: sizes left unfilled, or filled by an in-place draw
        Invalid("import torch\ndef f(b, device):\n    return torch.LongTensor(b, 0).to(device)\n",
                "import torch\ndef f(b, device):\n    return torch.empty(b, 0, dtype=torch.int64, device=device)\n"),
        Invalid("import torch\ndef f(x, eps):\n    return torch.FloatTensor(*x.shape).uniform_(-eps, eps).to(x.device)\n",
                "import torch\ndef f(x, eps):\n    return torch.empty(*x.shape, dtype=torch.float32, device=x.device)"
                ".uniform_(-eps, eps)\n", unsafe=True),
        Invalid("import torch\ndef f(data, device):\n    return torch.FloatTensor(data).zero_().to(device)\n",
                "import torch\ndef f(data, device):\n    return torch.zeros(data, dtype=torch.float32, device=device)\n",
                unsafe=True),
        Invalid("import torch\ndef f(n, device):\n    return torch.pow(0.4 * torch.ones(n), torch.arange(n).float()).to(device)\n",
                "import torch\ndef f(n, device):\n    return torch.pow(0.4 * torch.ones(n, device=device), torch.arange(n, device=device).float())\n",
                unsafe=True),
        Invalid("import torch\nif torch.cuda.is_available():\n    e = (torch.eye(3) * 0.5).cuda()\n",
                "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
                "if torch.cuda.is_available():\n    e = (torch.eye(3, device=device) * 0.5)\n"),
        # a name holding the device of a model's parameters
        Invalid(
            "import torch\ndef f(m, n):\n    d = next(m.parameters()).device\n    return torch.zeros(n).to(d)\n",
            "import torch\ndef f(m, n):\n    d = next(m.parameters()).device\n    return torch.zeros(n, device=d)\n",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda"):
            return
        if sets_default_device(self.facts):
            return  # `torch.set_default_device(device)`: factories allocate there
        inner = func.value
        q = self.facts.qualname(inner.func) if isinstance(inner, cst.Call) else None
        if q is None or not q.startswith("torch.") or q.count(".") != 1 or q[6:] not in FACTORIES:
            self._built(node, inner)  # a chain or a combination of host factories
            return
        factory = q.rsplit(".", 1)[-1]
        if factory not in FACTORIES or keyword(inner, "device") is not None or has_double_star(inner):
            return
        if not factory_takes_device(factory, inner):
            return
        if any(keyword(inner, k) is not None for k in ("pin_memory", "out", "generator")):
            return  # a pinned staging buffer / a preallocated output / numbers drawn by a host generator
        if factory in RANDOM and is_test_module(self.ctx.filename, self.ctx.module):
            return  # test inputs drawn on the host then moved: the same values on every device, on purpose
        meth = func.attr.value
        if meth == "to":
            self._to(node, inner, factory)
        else:
            self._cuda(node, inner, factory)

    # ---- .to(...) ---------------------------------------------------------------------
    def _to(self, node: cst.Call, inner: cst.Call, factory: str) -> None:
        if any(a.star for a in node.args):
            return
        dev_kw = keyword(node, "device")
        pos = [a for a in node.args if a.keyword is None]
        if dev_kw is not None:
            device = dev_kw.value
        elif pos and device_evidence(self.facts, pos[0].value, self.t.scope, self.t.cls):
            device = pos[0].value
        elif len(node.args) == 1 and pos and (self.facts.kind_of(pos[0].value, self.t.scope, self.t.cls) in (
                TENSOR, PARAM) or self._read_as_tensor(pos[0].value)):
            self._to_tensor(node, inner, factory, pos[0].value)
            return
        else:
            return  # .to(dtype) / .to(tensor) / unknown: not evidently a device move
        if self._module_left_on_host(device) or self._never_given(device):
            return  # `.to(model.device)` where `model` is built here and never placed: no copy
        if _host_placement(node) or self._cpu_name(device):
            return  # `.to("cpu")`, `.to(d)` with `d = torch.device("cpu")`: a host tensor stays where it is
        rest_pos = pos[1:] if dev_kw is None else pos
        rest_kw = [a.keyword.value for a in node.args if a.keyword is not None and a.keyword.value != "device"]
        extra = bool(rest_pos) or any(k not in _HARMLESS_TO_KW for k in rest_kw)
        text = self.ctx.module.code_for_node(device)
        msg = (f"`torch.{factory}(...)` is allocated on the host and then copied to `{text}`; "
               f"pass `device={text}` to the factory")
        if extra:  # the move also converts dtype/layout: report, no fix
            self.report(node, msg)
            return
        new = with_keyword(inner, "device", device)
        self.report(node, msg, self._make_fix(factory, inner, {node: new}, None))

    def _cpu_name(self, device: cst.BaseExpression) -> bool:
        """``device`` is a name every binding of which (in its function, else the module) is the
        CPU: ``DEVICE = torch.device("cpu")`` for an export, ``device = "cpu"`` in a CPU script."""
        if not isinstance(device, cst.Name):
            return False
        values = self.facts.values.bound_values(device.value, self.t.scope)
        if values is None and self.t.scope is not None and not self.facts.values.binds(device.value, self.t.scope):
            values = self.facts.values.bound_values(device.value, None)
        return bool(values) and all(_names_cpu(v) for v in values)

    def _built(self, node: cst.Call, expr: cst.BaseExpression) -> None:
        """``torch.arange(n).long().to(d)``, ``(torch.ones(n) * i).to(x.device)``,
        ``torch.LongTensor(b, n).fill_(0).to(d)``, ``torch.linspace(...).unsqueeze(1).to(x)``:
        a value built on the host from device-less factories (``hostflow.host_build``), copied
        as a whole: each factory can build on the device."""
        b = host_build(self.facts, expr)
        if b is None or any(self.facts.kind_of(op, self.t.scope, self.t.cls) in (TENSOR, PARAM, CONTAINER)
                            for op in b.operands):
            return  # combined with a tensor: that one has to travel too
        if (b.random and (len(b.factories) + len(b.legacy) > 1
                                       or is_test_module(self.ctx.filename, self.ctx.module))):
            return  # two random draws combined: both would change; test inputs drawn on the host on purpose
        choice, keep_move = None, False
        if node.func.attr.value == "cuda":
            if positional_count(node) > 0 or any(a.keyword is not None and a.keyword.value not in _HARMLESS_TO_KW
                                                 for a in node.args):
                self.report(node, self._built_msg(b, expr, "the GPU"))
                return
            choice = choose_device(self.ctx)
            device, text = choice.expr, "the GPU"
        else:
            if any(a.star for a in node.args):
                return
            dev_kw = keyword(node, "device")
            pos = [a for a in node.args if a.keyword is None]
            if dev_kw is not None:
                device = dev_kw.value
            elif pos and device_evidence(self.facts, pos[0].value, self.t.scope, self.t.cls):
                device = pos[0].value
            elif len(node.args) == 1 and pos and (self.facts.kind_of(pos[0].value, self.t.scope, self.t.cls) in (
                    TENSOR, PARAM) or self._read_as_tensor(pos[0].value)):
                device, keep_move = cst.Attribute(pos[0].value, cst.Name("device")), True  # the cast stays
            else:
                return
            if self._module_left_on_host(device) or _host_placement(node) or self._never_given(device) \
                    or self._cpu_name(device):
                return  # `.to("cpu")` of a host build copies nothing
            text = self.ctx.module.code_for_node(device)
            rest = [a for a in node.args if a.value is not device and a is not dev_kw]
            if any(a.keyword is None or a.keyword.value not in _HARMLESS_TO_KW for a in rest) and not keep_move:
                self.report(node, self._built_msg(b, expr, f"`{text}`"))  # it also converts dtype / layout
                return
        edits, reasons = {}, []
        for f in b.factories:
            edits[f] = lambda upd, d=device: with_keyword(upd, "device", d.deep_clone())
            rg = keyword(f, "requires_grad")
            if rg is not None and not (isinstance(rg.value, cst.Name) and rg.value.value == "False"):
                reasons.append("the result becomes a leaf that accumulates `.grad`")
        for ctor, fill, value in b.legacy:
            name = legacy_type(self.facts, ctor)
            dtype = LEGACY_DTYPES.get(name)
            if value is DRAW or value is UNFILLED:
                # allocate on the device; an in-place draw after it stays and fills it there
                new = legacy_empty_call(ctor, dtype, device.deep_clone()) if name != "Tensor" else None
                if new is None:
                    self.report(node, self._built_msg(b, expr, f"`{text}`"))
                    return
                edits[ctor] = new
                if len(ctor.args) == 1 and not ctor.args[0].star and not int_valued(
                        self.facts, ctor.args[0].value, self.t.scope):
                    reasons.append(f"`{self.ctx.module.code_for_node(ctor.args[0].value)}` may be data, not a size")
                continue
            new = legacy_fill_call(ctor, value, dtype, device.deep_clone())
            if new is None or (isinstance(value, cst.Float) and dtype is not None and not dtype.startswith(
                    ("float", "bfloat"))):
                self.report(node, self._built_msg(b, expr, f"`{text}`"))
                return
            edits[fill] = new
            if len(ctor.args) == 1 and not ctor.args[0].star and not int_valued(
                    self.facts, ctor.args[0].value, self.t.scope):
                reasons.append(f"`{self.ctx.module.code_for_node(ctor.args[0].value)}` may be data, not a size")
        if b.random:
            reasons.append("a GPU draws different random numbers")
        for op in b.operands:  # were it a host tensor, it would now meet a device tensor
            if not int_valued(self.facts, op, self.t.scope, floats=True):
                reasons.append(f"`{self.ctx.module.code_for_node(op)}` could be a host tensor")
        if b.computed:
            reasons.append("the elementwise functions now compute on the device (they may round differently)")
        if self.facts.multi_gpu:
            reasons.append("multi-GPU file")
        if not keep_move:
            edits[node] = lambda upd: upd.func.value
        replacements = composed_replacements(node, edits)
        applicability = Applicability.UNSAFE if reasons else Applicability.SAFE
        message = "build it on the device" + (f" (unsafe: {reasons[0]})" if reasons else "")
        fix = choice.fix(applicability, message, replacements) if choice is not None else (
            safe if applicability is Applicability.SAFE else unsafe)(message, replacements)
        self.report(node, self._built_msg(b, expr, "the GPU" if choice is not None else f"`{text}`"), fix)

    def _read_as_tensor(self, value: cst.BaseExpression) -> bool:
        """``torch.zeros(x.shape[0], 1).to(x)``: the function reads ``x.shape`` / ``x.size()`` /
        ``x.dim()``, which no device or dtype has: ``.to(x)`` is "like the tensor ``x``". So does
        handing ``x`` (or ``-2. * x``) to an elementwise torch function (``torch.logaddexp(-2. * x,
        ...)``): its data arguments are arrays, and of those only a tensor has a ``.to()`` to pass."""
        if not isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)):
            return False
        code = self.ctx.module.code_for_node(value)
        root = self.t.scope if self.t.scope is not None else self.ctx.module
        code_of = self.ctx.module.code_for_node
        for n in nodes(root):
            if isinstance(n, cst.Attribute) and n.attr.value in _TENSOR_METADATA and n.value is not value \
                    and code_of(n.value) == code:
                return True
            if isinstance(n, cst.Call) and (self.facts.qualname(n.func) or "").rsplit(".", 1)[-1] in _ELEMENTWISE \
                    and (self.facts.qualname(n.func) or "").count(".") == 1 \
                    and (self.facts.qualname(n.func) or "").startswith("torch.") \
                    and any(a.keyword is None and not a.star and _operand_is(a.value, code, code_of) for a in n.args):
                return True
        return False

    def _built_msg(self, b, expr: cst.BaseExpression, where: str) -> str:
        names = sorted({(self.facts.qualname(c.func) or "torch.?") for c in b.factories}
                       | {(self.facts.qualname(c.func) or "torch.?") for c, _, _ in b.legacy})
        what = ", ".join(f"`{n}(...)`" for n in names)
        return (f"`{short(self.ctx.module.code_for_node(expr), 50)}` is built on the host from {what} and then "
                f"copied to {where}; build it there (`device=`)")

    def _never_given(self, device: cst.BaseExpression) -> bool:
        """``.to(device)`` where ``device`` is a ``None``-default parameter that every call in
        the file leaves ``None`` (``RotaryEmbedding(dim)`` for ``__init__(self, dim, device=None)``):
        ``.to(None)`` copies nothing."""
        return isinstance(device, cst.Name) and none_in_every_call(self.facts, self.t.function, device.value)

    def _module_left_on_host(self, device: cst.BaseExpression) -> bool:
        """``model.device`` where this scope builds ``model`` (a class call, maybe placed with
        ``.to("cpu")`` / ``.cpu()``) and never moves it elsewhere: the target is the CPU, so the
        move copies nothing (a ``__main__`` demo of a library model)."""
        if not (isinstance(device, cst.Attribute) and device.attr.value == "device"
                and isinstance(device.value, cst.Name)):
            return False
        name = device.value.value
        root = self.t.scope or self.ctx.module
        if isinstance(root, cst.FunctionDef) and any(p.name.value == name for p in own_params(root)):
            return False
        built = False
        for n in nodes(root):
            if isinstance(n, cst.Assign) and any(name in bound_names(t.target) for t in n.targets):
                value, chain_ok = n.value, True
                while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
                    chain_ok &= _host_placement(value)
                    value = value.func.value
                callee = dotted(value.func) if isinstance(value, cst.Call) else None
                if not (chain_ok and callee and callee.rsplit(".", 1)[-1][:1].isupper()):
                    return False  # built by a helper, or placed on a device
                built = True
            elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in _PLACERS \
                    and isinstance(n.func.value, cst.Name) and n.func.value.value == name and not _host_placement(n):
                return False  # `model.to(device)` / `model.cuda()`
        return built

    def _to_tensor(self, node: cst.Call, inner: cst.Call, factory: str, other: cst.BaseExpression) -> None:
        """``torch.zeros(n).to(x)``: moved to ``x``'s device and cast to ``x``'s dtype."""
        text = self.ctx.module.code_for_node(other)
        msg = (f"`torch.{factory}(...)` is allocated on the host and then copied to `{text}`'s device; "
               f"pass `dtype={text}.dtype, device={text}.device` to the factory")
        if keyword(inner, "dtype") is not None or any(a.keyword is None for a in inner.args[_size_args(factory):]):
            self.report(node, msg)  # the factory picks a dtype of its own (maybe positionally): no fix
            return
        new = with_keyword(inner, "dtype", cst.Attribute(other, cst.Name("dtype")))
        new = with_keyword(new, "device", cst.Attribute(other, cst.Name("device")))
        extra = [] if factory in _EXACT_IN_ANY_DTYPE else ["the values are computed in the target dtype"]
        self.report(node, msg, self._make_fix(factory, inner, {node: new}, None, extra))

    # ---- .cuda() ----------------------------------------------------------------------
    def _cuda(self, node: cst.Call, inner: cst.Call, factory: str) -> None:
        indexed = positional_count(node) > 0 or keyword(node, "device") is not None
        msg = f"`torch.{factory}(...)` is allocated on the host and then copied to the GPU; pass `device=`"
        if indexed or any(
                a.keyword is not None and a.keyword.value not in _HARMLESS_TO_KW for a in node.args):
            self.report(node, msg)
            return
        choice = choose_device(self.ctx)
        new = with_keyword(inner, "device", choice.expr)
        self.report(node, msg, self._make_fix(factory, inner, {node: new}, choice))

    # ---- helpers ----------------------------------------------------------------------
    def _make_fix(self, factory: str, inner: cst.Call, replacements: dict, choice, extra=()):
        reasons = list(extra)
        if factory in RANDOM:
            reasons.append("a GPU draws different random numbers")
        rg = keyword(inner, "requires_grad")
        if rg is not None and not (isinstance(rg.value, cst.Name) and rg.value.value == "False"):
            reasons.append("the result becomes a leaf that accumulates `.grad`")
        if self.facts.multi_gpu:
            reasons.append("multi-GPU file")
        applicability = Applicability.UNSAFE if reasons else Applicability.SAFE
        message = "allocate on the device" + (f" ({'; '.join(reasons)})" if reasons else "")
        if choice is not None:
            return choice.fix(applicability, message, replacements)
        return (safe if applicability is Applicability.SAFE else unsafe)(message, replacements)
