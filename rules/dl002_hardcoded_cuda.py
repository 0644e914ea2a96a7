from __future__ import annotations

import re
import libcst as cst

from devlint import lazyre
from devlint.analysis import guards
from devlint.analysis.calls import (call_graph, default_is_dead, default_reached, fallback_param, guarded_by_callers,
                                   literals_reaching, param_places, placed_init_parameter, placed_parameter, places_device,
                                   unused_device_binding)
from devlint.analysis.checkpoints import is_library_module, is_test_file
from devlint.analysis.hostflow import LEGACY_DTYPES as LEGACY_TYPES
from devlint.diagnostic import Applicability, Fix
from devlint.facts import call_arg, dotted, is_cuda_string, root_name, string_value
from devlint.fixes import (LEGACY_TYPES, DeviceChoice, choose_device, choose_library_device, cuda_to_call,
                           guarded_literal, legacy_factory, legacy_type_call, torch_ref)
from devlint.project import unread_device_names
from devlint.rule import Invalid, Rule
from devlint.syntax import is_main_guard
from devlint.walk import children, nodes

_NOT_DEVICE_CALLS = {"autocast", "GradScaler", "device_count"}
# names of a device *type* (`torch.autocast(device_type)`, dispatch tables), not a placement
_DEVICE_TYPE_NAME = lazyre.compile(r"(?:^|_)device_type$", re.I)


# torch.nn layers that hold no parameter or buffer when built without arguments
_STATELESS_LAYERS = frozenset({"ReLU", "ReLU6", "LeakyReLU", "ELU", "GELU", "SiLU", "Sigmoid", "Tanh", "Softmax",
                               "LogSoftmax", "Dropout", "Identity", "Flatten", "MaxPool2d", "AvgPool2d"})
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})  # stateless only when built empty
# timm.loss classes that take no tensor argument: they hold a smoothing factor, a split count or
# a plain `nn.CrossEntropyLoss()`, never a parameter or buffer (`BinaryCrossEntropy` takes weights)
_TIMM_STATELESS_LOSSES = frozenset({"LabelSmoothingCrossEntropy", "SoftTargetCrossEntropy", "JsdCrossEntropy",
                                    "AsymmetricLossMultiLabel", "AsymmetricLossSingleLabel"})

# decorators declaring a command-line option (`default=` is what a run gets unless told otherwise)
_OPTION_DECLARATIONS = frozenset({"click.option", "typer.Option"})


class HardcodedCuda(Rule):
    """
    ## What it does
    Flags code that hard-codes the CUDA device where no availability check guards it:
    `.cuda()`, `.cuda(i)`, `torch.device("cuda")`, `"cuda"`/`"cuda:N"` (also as `f"cuda"`) passed or
    assigned as a device (Hugging Face's `device_map="cuda"` too; `"auto"` is fine),
    `device=0` / `.to(0)`, legacy `torch.cuda.FloatTensor` & co,
    and `torch.set_default_tensor_type("torch.cuda...")`; also an int or `"cuda"` that
    reaches `.to(p)` through one or two calls of the file's own functions or classes
    (`device = 0` -> `main(device)` -> `Trainer(model, gpu_id)` -> `model.to(gpu_id)`),
    reported where it is defined. Defaults a run gets unless told otherwise are portability
    advice and say so: a `--device` option's `default="cuda"` (argparse, click, typer), a
    configuration class's `device: str = "cuda"` field that the file reads
    (`config.device`) and never overrides. An option the code itself switches off CUDA
    (`if not torch.cuda.is_available(): args.device = "cpu"`) is no portability problem.
    A switch the code sets once and never changes (`use_cuda = True` at the top of a script, a
    parameter every call sets so) chooses nothing: `if use_cuda: x.cuda()` and `device =
    "cuda" if use_cuda else "cpu"` are always the CUDA device (a flag, a config value or a
    notebook settings cell is the user's choice, and guards).

    Silent where the file makes sure of a GPU (`devlint.analysis.guards`): an availability
    check, a test gated for GPUs (`@RunIf(min_cuda_gpus=1)`, `skipif(not
    torch.cuda.is_available())`, `pytest.param(..., marks=...)`, `pytestmark`), a test that
    wants the call to fail (`with pytest.raises(...)`, `self.assertRaises(...)`), an
    `assert torch.cuda.is_available()` / `device_count() > rank`, an init that exits without
    a GPU, NCCL code, CUDA extension code (an `autograd.Function` feeding a compiled kernel),
    a function that launches a Triton kernel of its file (`kernel[grid](...)` on a
    `@triton.jit` function), `.cuda(i)` under `if i is not None:` (None is the author's CPU
    path), code after diffusers' `enable_xformers_memory_efficient_attention()` (it raises
    without CUDA), a `from_pretrained(..., attn_implementation="flash_attention_2")` call and
    the code after it (transformers raises without a GPU), a `DistributedDataParallel(...,
    device_ids=[rank])` call and the code after it (DDP refuses device ids for a module on
    the CPU), a function that imports a CUDA-only package or skips without one (`try: import
    flash_attn` / `except ImportError: pytest.skip(...)`), and for a `device="cuda"` default
    that every call in the file overrides or that the code reads only where CUDA is usable.
    Also silent in a function decorated with a decorator of the file or the project whose wrapper
    calls it only where CUDA is usable (`if torch.cuda.is_available(): return func(*args)`), in a
    branch a literal switches off (`if False:`, `if cond and False:`, `a if False else b`), and in
    a notebook's settings section (code cells of assignments under a markdown heading such as
    "Settings", "Config" or "Hyperparameters": the reader edits them before running the rest).
    A file or function *name* (`train_gpu.py`, `def to_gpu`) guards nothing.

    ## Why is this bad?
    The script crashes on any machine without a CUDA GPU (`Torch not compiled with
    CUDA enabled`, `Found no NVIDIA driver`): a laptop, a CPU CI runner, an Apple
    machine. Routing every placement through one device variable chosen once keeps
    the GPU where there is one and runs everywhere else.

    ## Example
    ```python
    model = Net().cuda()
    x = torch.randn(8, 4, device="cuda")
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    x = torch.randn(8, 4, device=device)
    ```

    ## Fix safety
    Safe: on a CUDA machine the program places everything where it did before, and on
    a CPU-only machine it now runs. The device variable is reused when the file has
    one, otherwise inserted once after the imports (never shadowing a name); inside
    `nn.Module` methods the input tensor's device is preferred. When the hard-coded
    value *is* the file's device definition (`device = torch.device("cuda:0")`, an
    argparse `default="cuda"`) it is guarded in place. `.cuda(i)` with an index and
    files using DataParallel/DDP/NCCL are multi-GPU by design: their fixes are
    unsafe. `.cuda(x.device)` keeps its device (`.to(x.device)`). A library module (no
    `__main__` block, no module-level work) never gets an import-time device global: the fix
    uses a tensor parameter's device, or there is no fix. A literal that reaches `.to()`
    through calls is guarded where it is defined (safe when nothing else reads the name).
    A device chosen by a switch the code sets gets the availability check beside the switch
    (`"cuda" if use_cuda and torch.cuda.is_available() else "cpu"`).
    `set_default_tensor_type` and legacy types used as values are reported without a fix.
    """

    code = "DL002"
    # name, summary, default and prefilter: devlint/catalogue.py

    VALID = [
        # a decorator of the file that runs the test only where CUDA is usable
        "import torch\ndef run_if_cuda(func):\n    def wrapped(*args):\n        if torch.cuda.is_available():\n"
        "            return func(*args)\n    return wrapped\n@run_if_cuda\ndef test_f():\n    torch.ones(2).cuda()\n",
        # a torch-compatible package's own availability check guards like torch's
        "import torch_1k as torch\ndef test_cuda_if_available():\n    if not torch.cuda.is_available():\n"
        "        return\n    x = torch.tensor([1.0], device='cuda')\n",
        # a branch switched off by hand
        "import torch\ndef f(x):\n    if 0:\n        x = x.cuda()\n    return x\n",
        # a test that wants the call to fail: the error is what it checks
        "import pytest\nimport torch\n\ndef test_bad_device():\n    with pytest.raises(RuntimeError):\n"
        "        torch.zeros(2, device=\"cuda:99\")\n",
        "import unittest\nimport torch\n\nclass T(unittest.TestCase):\n    def test_bad(self):\n"
        "        with self.assertRaises(RuntimeError):\n            torch.ones(2).cuda()\n",
        "import torch\nfrom transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('m', device_map='auto')\n",
        # an argparse default the code chooses past where CUDA is absent (fish-speech's `run_webui.py`)
        "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument('--device', default='cuda')\n"
        "args = p.parse_args()\nif not torch.cuda.is_available():\n    args.device = 'cpu'\n"
        "print(torch.ones(2).to(args.device))\n",
        # the option is read only where CUDA is usable: `cpu` everywhere else
        "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument('--device', default='cuda')\n"
        "args = p.parse_args()\n"
        "device = args.device if torch.cuda.is_available() and args.device.startswith('cuda') else 'cpu'\n"
        "print(torch.ones(2).to(device))\n",
        # a parameter's CUDA default used only where CUDA is usable (mgplvm's `get_device`)
        "import torch\ndef get_device(device: str = 'cuda'):\n"
        "    if torch.cuda.is_available() and device == 'cuda':\n        return torch.device(device)\n"
        "    return torch.device('cpu')\nprint(torch.ones(2).to(get_device()))\n",
        # a None default filled with CUDA in a conditional expression, that every call replaces
        "import torch\nclass MetricOptions:\n    def __init__(self, G=None, device=None):\n"
        "        self.device = device if device is not None else torch.device('cuda', 0)\n"
        "def run(G):\n    return MetricOptions(G=G, device=torch.device('cpu'))\n",
        # a configuration field the code overrides when CUDA is absent, and one nothing reads as a device
        "import torch\nfrom dataclasses import dataclass\n@dataclass\nclass Config:\n    device: str = 'cuda'\n"
        "config = Config()\nif not torch.cuda.is_available():\n    config.device = 'cpu'\n"
        "print(torch.ones(2).to(config.device))\n",
        "from dataclasses import dataclass\n@dataclass\nclass Config:\n    device: str = 'cuda'\n    lr: float = 0.1\n",
        # a command-line option that is not a device
        "import click\n@click.command()\n@click.option('--backend', default='cuda')\ndef main(backend):\n    print(backend)\n",
        "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n",
        "import torch\nif torch.cuda.is_available():\n    x = torch.ones(2).cuda()\n",
        "import torch\nuse_cuda = torch.cuda.is_available()\nif use_cuda:\n    torch.ones(2).cuda()\n",
        # a switch set in the code to skip the CUDA branch, or one the command line can change
        "import torch\nUSE_CUDA = False\ndef run(x):\n    if USE_CUDA:\n        x = x.cuda()\n    return x\n",
        "import sys\nimport torch\nuse_cuda = True\nif '--cpu' in sys.argv:\n    use_cuda = False\n"
        "if use_cuda:\n    torch.ones(2).cuda()\n",
        "import torch\nuse_cuda = True\ndef run(x, use_cuda=False):\n    if use_cuda:\n        x = x.cuda()\n    return x\n",
        # a device chosen by such a switch: set to False, rebound by the command line, or a flag;
        # or a choice nothing reads (in a script: a `__main__` block, so no module imports it)
        "import torch\nIS_CUDA = True\nDEVICE = 'cuda' if IS_CUDA else 'cpu'\nnet = torch.nn.Linear(2, 2)\n"
        "if __name__ == '__main__':\n    print(net(torch.ones(2)))\n",
        "import torch\nuse_cuda = False\ndevice = 'cuda' if use_cuda else 'cpu'\nprint(torch.ones(2).to(device))\n",
        "import sys\nimport torch\nuse_cuda = True\nif '--cpu' in sys.argv:\n    use_cuda = False\n"
        "device = torch.device('cuda' if use_cuda else 'cpu')\nprint(torch.ones(2).to(device))\n",
        "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument('--cuda', action='store_true')\n"
        "args = p.parse_args()\ndevice = torch.device('cuda' if args.cuda else 'cpu')\nprint(torch.ones(2).to(device))\n",
        # the fallback after the GPU ran out of memory: it runs only where a GPU is
        "import torch\ndef run(model, x):\n    try:\n        return model(x)\n    except RuntimeError as e:\n"
        "        if 'out of memory' not in str(e):\n            raise\n        return model.cpu()(x.cpu()).cuda()\n",
        # a function may turn the module's switch off at run time
        "import sys\nimport torch\nuse_cuda = True\ndef parse():\n    global use_cuda\n"
        "    use_cuda = '--cpu' not in sys.argv\nparse()\nx = torch.ones(2)\nif use_cuda:\n    x = x.cuda()\n",
        # read from a closure: the enclosing function's parameter, not the module's constant
        "import torch\nuse_cuda = True\ndef outer(use_cuda):\n    def inner(x):\n        if use_cuda:\n"
        "            return x.cuda()\n        return x\n    return inner\n",
        # a script's parameter switch one call passes False, or the command line chooses
        "import torch\ndef load(m, gpu=True):\n    if gpu:\n        m = m.cuda()\n    return m\n"
        "if __name__ == '__main__':\n    a = load(torch.nn.Linear(2, 2))\n    b = load(torch.nn.Linear(2, 2), gpu=False)\n",
        "import sys\nimport torch\ndef load(m, gpu):\n    if gpu:\n        m = m.cuda()\n    return m\n"
        "if __name__ == '__main__':\n    gpu = '--gpu' in sys.argv\n    m = load(torch.nn.Linear(2, 2), gpu)\n",
        # a Module of the file holding no parameter or buffer: `.cuda()` moves nothing
        "import torch\nfrom torch import nn\n\nclass RankingLoss(nn.Module):\n    def __init__(self, margin):\n"
        "        super().__init__()\n        self.margin = margin\n\n    def forward(self, a, b):\n"
        "        return (self.margin - a + b).clamp(min=0).mean()\n\nloss_fn = RankingLoss(margin=0.2).cuda()\n",
        # a Lightning launcher asking for GPUs refuses to start without one: what it runs has a GPU
        "import torch\nfrom pytorch_lightning.lite import LightningLite\n\nclass Lite(LightningLite):\n"
        "    def run(self, x):\n        return x.cuda()\n\nLite(accelerator='gpu', devices='auto').run(torch.ones(2))\n",
        "import torch\nimport pytorch_lightning as pl\n\ndef main(x):\n    trainer = pl.Trainer(accelerator='gpu')\n"
        "    return x.cuda(), trainer\n",
        "import torch\ndef f(x):\n    if not torch.cuda.is_available():\n        return x\n    return x.cuda()\n",
        "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\nprint('using cuda')\n",
        "import torch\nx = torch.ones(2)\ny = x.cuda() if x.is_cuda else x\n",
        "import torch\ndef f(x, device):\n    if device.type == 'cuda':\n        torch.ones(1, device='cuda')\n",
        "import torch\nwith torch.autocast('cuda'):\n    pass\n",
        # flags imported from helper modules, and test decorators that skip without a GPU
        "import torch\nfrom torch.testing._internal.common_utils import TEST_CUDA\n"
        "CUDA_DEVICE = torch.device('cuda:0') if TEST_CUDA else None\n",
        "import unittest\nimport torch\n@unittest.skipIf(not torch.cuda.is_available(), 'no GPU')\n"
        "def test_f():\n    torch.ones(2).cuda()\n",
        "import torch\nfrom helpers import skip_if_lt_x_gpu\nclass T:\n    @skip_if_lt_x_gpu(2)\n"
        "    def test_ddp(self):\n        torch.ones(2).to(0)\n",
        # tests of a device or a type are not placements (and run on a CPU build)
        "import torch\ndef on_gpu(x):\n    return x.device == torch.device('cuda')\n",
        "import torch\ndef f(t):\n    return isinstance(t, (torch.cuda.FloatTensor, torch.cuda.HalfTensor))\n",
        # a device *type* selects a backend (autocast, dispatch tables), it places nothing
        "import torch\ndef autocast_kwargs(device_type='cuda'):\n    return {'device_type': device_type}\n",
        # implementing `.cuda()`: the caller chose CUDA
        "import torch\nclass Storage:\n    def cuda(self, device=None):\n"
        "        return self.to(torch.device('cuda', device) if device else torch.device('cuda'))\n",
        # tests gated for GPUs, whatever the helper is imported as
        "import torch\nfrom tests.helpers import RunIf as R\n@R(min_cuda_gpus=1)\n"
        "def test_f():\n    torch.ones(2).cuda()\n",
        "import pytest, torch\npytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')\n"
        "def test_f():\n    torch.ones(2, device='cuda')\n",
        "import pytest, torch\nneeds_gpu = pytest.mark.skipif(torch.cuda.device_count() < 1, reason='gpu')\n"
        "@pytest.mark.parametrize('dev', ['cpu', pytest.param(torch.device('cuda'), marks=needs_gpu)])\n"
        "def test_f(dev):\n    torch.ones(2, device=dev)\n@needs_gpu\ndef test_g():\n    torch.ones(2).cuda()\n",
        # CUDA-only by design, and the file says so
        "import torch\ndef main(rank):\n    assert torch.cuda.device_count() > rank\n    torch.ones(2).cuda(rank)\n"
        "if __name__ == '__main__':\n    main(0)\n",
        "import torch\nimport torch.distributed as dist\ndef worker(rank):\n"
        "    dist.init_process_group('nccl', rank=rank, world_size=2)\n    torch.ones(2).to(rank)\n",
        "import sys, torch\ndef check_gpu():\n    if not torch.cuda.is_available():\n        sys.exit('needs a GPU')\n"
        "check_gpu()\nx = torch.ones(2).cuda()\n",
        # CUDA extension code: an autograd.Function feeding a compiled kernel has no CPU path
        "import torch\nfrom torch.autograd import Function\nfrom . import _C\nclass RoIPool(Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        out = torch.cuda.FloatTensor(x.size(0))\n"
        "        _C.roi_pool(x, out)\n        return out\n",
        # a library's default that no call in the file leaves in place: its callers choose
        "import torch\ndef make(n, device='cuda'):\n    return torch.zeros(n, device=device)\n",
        # a default that every call in the file overrides never runs
        "import torch\ndef make(n, device='cuda'):\n    return torch.zeros(n, device=device)\n"
        "print(make(2, device='cpu'), make(3, 'cpu'))\n",
        "import torch\nclass Loader:\n    def __init__(self, data, device=torch.device('cuda')):\n"
        "        self.data = data.to(device)\nLoader(torch.ones(2), device=torch.device('cpu'))\n",
        # a `device` that only names a device type (autocast, GradScaler) places nothing
        "import torch\ndef autocast_on(device='cuda'):\n    return torch.is_autocast_enabled(device)\n",
        "import torch\nclass Scaler:\n    def __init__(self, device='cuda'):\n"
        "        self.scaler = torch.amp.GradScaler(device=device)\n",
        # an assert on the same line as the code it guards
        "import torch\ndef f(x):\n    assert torch.cuda.is_available(); y = x.cuda()\n    return y\n",
        # a method of the file that checks for a GPU, called on an instance of its class
        "import sys, torch\nclass Bench:\n    def prepare(self):\n        if not torch.cuda.is_available():\n"
        "            sys.exit('needs a GPU')\n    def run(self, x):\n        self.prepare()\n        return x.cuda()\n",
        # a helper that every caller in the file guards
        "import torch\ndef make():\n    return torch.ones(2).cuda()\nif torch.cuda.is_available():\n    print(make())\n",
        # a probe whose failure is handled, a backend class that says when it is available
        "import torch\ntry:\n    torch.ones(1, device='cuda:0')\nexcept RuntimeError:\n    print('no GPU')\n",
        "import torch\nclass CUDABackend:\n    @staticmethod\n    def is_available():\n"
        "        return torch.cuda.device_count() > 0\n    def devices(self, ids):\n"
        "        return [torch.device('cuda', i) for i in ids]\n",
        # code built on a CUDA-only package (TensorRT, CuPy, PyCUDA ...) has no CPU path
        "import torch\ndef build_engine(x):\n    import tensorrt as trt\n    return x.to('cuda:0'), trt.Logger()\n",
        # a function that raises unless it got a CUDA device is CUDA-only by design
        "import torch\ndef quantize(w, device=None):\n    device = device or torch.device('cuda')\n"
        "    if device.type != 'cuda':\n        raise RuntimeError(device)\n    return w.to(device)\n",
        # a library function that queries the CUDA runtime anyway: its caller decides
        "import torch\ndef total(losses):\n    out = torch.cuda.FloatTensor([0.0])\n"
        "    dev = torch.cuda.current_device()\n    return out + sum(losses).to(dev)\n",
        # GPU-only branches spelled by the project: `"gpu"` device names, enum constants
        "import torch\ndef pick(device):\n    if device == 'gpu':\n        device = 'cuda'\n    return device\n",
        "import torch\nfrom state import DistributedType\ndef f(state):\n"
        "    if state.distributed_type == DistributedType.MULTI_GPU:\n        return torch.ones(1).cuda()\n",
        # a loss without a weight tensor has nothing to move: `.cuda()` on it never touches CUDA
        "import torch.nn as nn\ncriterion = nn.CrossEntropyLoss().cuda()\n",
        # timm's label-smoothing / soft-target / JSD losses hold only numbers
        "from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy\n"
        "a = LabelSmoothingCrossEntropy(smoothing=0.1).cuda()\nb = SoftTargetCrossEntropy().cuda()\n",
        # either of two modules that hold nothing
        "import sys\nimport torch.nn as nn\ncriterion = nn.NLLLoss() if len(sys.argv) > 1 else nn.CrossEntropyLoss()\n"
        "criterion = criterion.cuda(0)\n",
        # a `None` default filled with CUDA in the body is judged as a default: no call leaves it
        "import torch\ndef feature(n, device=None):\n    if device is None:\n        device = 'cuda'\n"
        "    return torch.ones(n).to(device)\ndef run(dev):\n    return feature(3, dev)\n",
        # a trainer one of whose methods always wraps the model in DDP with device ids runs on GPUs only
        "import torch\nfrom torch import nn\nclass Trainer:\n    def __init__(self, model):\n"
        "        self.model = model.cuda()\n    def prep(self, rank):\n"
        "        self.model = nn.parallel.DistributedDataParallel(self.model, device_ids=[rank])\n",
        # a branch that runs an NCCL collective, in a program whose process group is NCCL only
        "import torch\nimport torch.distributed as dist\ndef setup(rank, n):\n"
        "    dist.init_process_group('nccl', rank=rank, world_size=n)\nclass Log:\n"
        "    def __init__(self, distributed):\n        self.distributed = distributed\n"
        "    def total(self, v):\n        if self.distributed:\n            v = torch.tensor(v).cuda()\n"
        "            dist.reduce(v, dst=0)\n        return v\n",
        # a function that always runs a collective needs the process group up: NCCL only, on GPUs
        "import torch\nimport torch.distributed as dist\ndef setup(rank, n):\n"
        "    dist.init_process_group(backend='nccl', rank=rank, world_size=n)\n"
        "def dist_max(x):\n    t = torch.tensor(x).cuda()\n    dist.all_reduce(t, op=dist.ReduceOp.MAX)\n    return t\n",
        # a block that pins this rank's GPU and starts a process group is a multi-GPU launch
        "import torch\nimport torch.distributed as dist\ndef setup(local_rank, n):\n    if local_rank != -1:\n"
        "        torch.cuda.set_device(local_rank)\n        device = torch.device('cuda', local_rank)\n"
        "        dist.init_process_group(backend='nccl' if dist.is_nccl_available() else 'gloo', world_size=n)\n"
        "    else:\n        device = torch.device('cpu')\n    return device\n",
        # a function's local, or a script's attribute, that nothing reads places nothing
        "import argparse\nimport torch\ndef main():\n    args = argparse.ArgumentParser().parse_args()\n"
        "    args.device = 'cuda:0'\n    dev = 'cuda'\n    print(torch.ones(2))\n"
        "if __name__ == '__main__':\n    main()\n",
        # a script's device constant that nothing reads places nothing
        "import torch\nDEVICE = 'cuda:0'\ndef main():\n    print(torch.ones(2))\nif __name__ == '__main__':\n    main()\n",
        # ... nor an activation whatever its settings, nor a name bound only to such a loss
        "import torch.nn as nn\ndef score(out):\n    crit = nn.NLLLoss()\n    crit.cuda()\n"
        "    return crit(nn.LogSoftmax(dim=1).cuda()(out), out)\n",
        # a user's device choice by any name (`--test_mode GPU`), spelled out as a flag
        "import argparse\nimport torch\np = argparse.ArgumentParser()\n"
        "p.add_argument('--test_mode', default='GPU', choices=['GPU', 'CPU'])\nopt = p.parse_args()\n"
        "TEST_MODE = True if opt.test_mode == 'GPU' else False\nx = torch.ones(2)\nif TEST_MODE:\n"
        "    x = x.cuda()\n",
        # a value's type says it already lives on CUDA
        "import torch\ndef pad(out):\n    z = torch.zeros(3)\n"
        "    if isinstance(out.data, torch.cuda.FloatTensor):\n        z = z.cuda()\n    return z\n",
        # the user's explicit choice of a GPU (an id that defaults to None, a count) is a guard
        "import torch\ndef train(x, args):\n    if args.gpu is not None:\n        x = x.cuda(args.gpu)\n"
        "    if args.num_gpu == 1:\n        x = x.cuda()\n    if len(args.gpu_ids) > 0:\n        x = x.cuda()\n"
        "    return x\n",
        # the branch that initialises the NCCL process group (`--dist-backend` defaults to nccl)
        # runs only on GPUs, and so does every later branch on the same condition
        "import argparse\nimport torch\nimport torch.distributed as dist\np = argparse.ArgumentParser()\n"
        "p.add_argument('--dist-backend', default='nccl')\n"
        "def main(args, model):\n    if args.distributed:\n        dist.init_process_group(backend=args.dist_backend)\n"
        "    if args.distributed:\n        model.cuda()\n",
        # `if distributed: ... elif ...: raise ... else: raise ...`: what follows needs a GPU
        "import torch\nimport torch.distributed as dist\ndef main(args, model):\n"
        "    if args.ddp:\n        dist.init_process_group('nccl')\n    if args.ddp:\n        model.cuda()\n"
        "    elif args.gpu is not None:\n        raise NotImplementedError('DDP only')\n"
        "    else:\n        raise NotImplementedError('DDP only')\n    return torch.zeros(1).cuda()\n",
        # in an NCCL-only program, code after `if world_size == 1: return` runs distributed, on GPUs
        "import torch\nimport torch.distributed as dist\n"
        "def is_dist():\n    if not dist.is_available():\n        return False\n"
        "    if not dist.is_initialized():\n        return False\n    return True\n"
        "def get_world_size():\n    if not is_dist():\n        return 1\n    return dist.get_world_size()\n"
        "def all_gather(data):\n    if get_world_size() == 1:\n        return [data]\n"
        "    return [torch.ByteTensor(data).to('cuda')]\n"
        "def reduce(v):\n    if not is_dist():\n        return v\n    return torch.tensor(v, device='cuda')\n"
        "def init(args):\n    args.dist_backend = 'nccl'\n    dist.init_process_group(backend=args.dist_backend)\n",
        # a device helper that validates its choice against availability before returning it
        "import torch\ndef get_device(device='auto'):\n    if device == 'auto':\n        device = 'cuda'\n"
        "    device = torch.device(device)\n"
        "    if device.type == torch.device('cuda').type and not torch.cuda.is_available():\n"
        "        return torch.device('cpu')\n    return device\n",
        # a method of the file that only answers a GPU test guards like the test itself
        "import torch\nclass M(torch.nn.Module):\n    def __init__(self, opt):\n        super().__init__()\n"
        "        self.opt = opt\n        self.T = torch.cuda.FloatTensor if self.use_gpu() else torch.FloatTensor\n"
        "    def use_gpu(self):\n        return len(self.opt.gpu_ids) > 0\n"
        "    def prep(self, x):\n        if self.use_gpu():\n            x = x.cuda()\n        return x\n",
        # a buffer filled by a compiled kernel the project's loader hands back (`load_ext("_ext")`)
        "import torch\nfrom torch.autograd import Function\nfrom ..utils import ext_loader\n"
        "ext_module = ext_loader.load_ext('_ext', ['gather_points_forward'])\n"
        "class GatherPoints(Function):\n    @staticmethod\n    def forward(ctx, features, indices):\n"
        "        out = torch.cuda.FloatTensor(2, 3)\n        ext_module.gather_points_forward(features, indices, out)\n"
        "        return out\n",
        # the branch that wraps the model in DDP with device ids is a GPU branch
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel\n"
        "def wrap(model, distributed):\n    if distributed:\n        model = model.cuda()\n"
        "        model = DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])\n"
        "    return model\n",
        # the user's switch for the CPU, negated, chooses the GPU
        "import torch\ndef load(model, args):\n    if not args.cpu:\n        model = model.cuda()\n"
        "    if args.force_cpu:\n        return model\n    return model.cuda()\n",
        # the input's own type or placement says it is on a GPU
        "import torch\ndef pad(spect, n):\n    if spect.type() == 'torch.cuda.HalfTensor':\n"
        "        return torch.cuda.HalfTensor(n).zero_()\n    return torch.zeros(n)\n",
        "import torch\nclass Net(torch.nn.Module):\n    def step(self, x):\n"
        "        if next(self.parameters()).is_cuda:\n            x = x.cuda()\n        return x\n",
        # the device index is checked against None first: None is the author's CPU path
        "import torch\ndef weights(n, device_id=None):\n    w = torch.ones(n)\n    if device_id is not None:\n"
        "        w = w.cuda(device_id)\n    return w\n",
        "import torch\nclass M:\n    def to_device(self, m):\n"
        "        if self.device_id is not None and m is not None:\n            return m.cuda(self.device_id)\n"
        "        return m\n",
    ]
    INVALID = [
        # an f-string with nothing to format is the same literal
        Invalid("import torch\nx = torch.zeros(2, device=f\"cuda\")\n",
                "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
                "x = torch.zeros(2, device=device)\n"),
        # timm's binary cross-entropy may hold weight tensors
        Invalid("import torch\nfrom timm.loss import BinaryCrossEntropy\n"
                "bce = BinaryCrossEntropy(pos_weight=torch.ones(3)).cuda()\n",
                "import torch\nfrom timm.loss import BinaryCrossEntropy\n\n"
                "device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
                "bce = BinaryCrossEntropy(pos_weight=torch.ones(3)).to(device)\n"),
        # ... but one of the two holds a weight buffer: that one moves
        Invalid("import sys\nimport torch\nimport torch.nn as nn\n"
                "criterion = nn.NLLLoss() if len(sys.argv) > 1 else nn.CrossEntropyLoss(weight=torch.ones(3))\n"
                "criterion = criterion.cuda(0)\n"),
        Invalid(
            "import torch\nx = torch.ones(2).cuda()\n",
            "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
            "x = torch.ones(2).to(device)\n",
        ),
        Invalid(
            "import torch\ndevice = torch.device('cuda:0')\nx = torch.ones(2, device=device)\n",
            "import torch\ndevice = torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')\n"
            "x = torch.ones(2, device=device)\n",
        ),
        Invalid(
            "import torch as T\ndev = T.device('cuda' if T.cuda.is_available() else 'cpu')\n"
            "x = T.zeros(3, device='cuda')\n",
            "import torch as T\ndev = T.device('cuda' if T.cuda.is_available() else 'cpu')\n"
            "x = T.zeros(3, device=dev)\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def forward(self, x):\n        return x + torch.ones(1).cuda()\n",
            "import torch\nfrom torch import nn\nclass M(nn.Module):\n"
            "    def forward(self, x):\n        return x + torch.ones(1).to(x.device)\n",
        ),
        Invalid(
            "import torch\ndevice = 1\nx = torch.cuda.FloatTensor(2, 3)\n",
            "import torch\n\ntorch_device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
            "device = 1\nx = torch.empty(2, 3, dtype=torch.float32, device=torch_device)\n",
        ),
        Invalid(
            "import argparse\np = argparse.ArgumentParser()\np.add_argument('--device', default='cuda')\n",
            "import argparse\nimport torch\np = argparse.ArgumentParser()\n"
            "p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')\n",
        ),
        # converting the option is no choice past its default: the run keeping it still needs CUDA
        Invalid(
            "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument('--device', default='cuda')\n"
            "args = p.parse_args()\nargs.device = torch.device(args.device)\n",
            "import argparse\nimport torch\np = argparse.ArgumentParser()\n"
            "p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')\n"
            "args = p.parse_args()\nargs.device = torch.device(args.device)\n",
        ),
        # Hugging Face's `device_map="cuda"` places every weight on the GPU ("auto" is valid anywhere)
        Invalid(
            "import torch\nfrom transformers import AutoModelForCausalLM\n"
            "model = AutoModelForCausalLM.from_pretrained('m', device_map='cuda')\n",
            "import torch\nfrom transformers import AutoModelForCausalLM\n\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
            "model = AutoModelForCausalLM.from_pretrained('m', device_map=device)\n",
            unsafe=True,
        ),
        # the option's default is rechosen where CUDA is absent: a run keeping it works anywhere
        # (a VALID example); `args.device = "cuda"` chooses nothing new, and is itself a finding
        Invalid(
            "import argparse\np = argparse.ArgumentParser()\np.add_argument('--device', default='cuda')\n"
            "args = p.parse_args()\nargs.device = 'cuda'\nprint(args.device)\n",
            "import argparse\nimport torch\np = argparse.ArgumentParser()\n"
            "p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')\n"
            "args = p.parse_args()\nargs.device = 'cuda' if torch.cuda.is_available() else 'cpu'\nprint(args.device)\n",
        ),
        # a project module's name rebound to the model it builds: `model.cuda()` moves the model
        Invalid("import torch\nimport model\nmodel = model.NCF(10, 8)\nmodel.cuda()\nprint(model)\n",
                "import torch\nimport model\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
                "model = model.NCF(10, 8)\nmodel.to(device)\nprint(model)\n"),
        # ... and a call that leaves it in place
        Invalid("import torch\nclass MetricOptions:\n    def __init__(self, G=None, device=None):\n"
                "        self.device = device if device is not None else torch.device('cuda', 0)\n"
                "def run(G):\n    return MetricOptions(G=G)\n"),
        # the same default declared with click, and as a configuration class's field
        Invalid(
            "import click\nimport torch\n@click.command()\n@click.option('-d', '--device', default='cuda:0')\n"
            "def main(device):\n    print(torch.ones(2).to(device))\nif __name__ == '__main__':\n    main()\n",
            "import click\nimport torch\n@click.command()\n"
            "@click.option('-d', '--device', default='cuda:0' if torch.cuda.is_available() else 'cpu')\n"
            "def main(device):\n    print(torch.ones(2).to(device))\nif __name__ == '__main__':\n    main()\n",
        ),
        Invalid(
            "import torch\nfrom dataclasses import dataclass\n@dataclass\nclass TrainConfig:\n    device: str = 'cuda'\n"
            "    lr: float = 0.1\nif __name__ == '__main__':\n    config = TrainConfig()\n"
            "    print(torch.nn.Linear(2, 2).to(config.device))\n",
            "import torch\nfrom dataclasses import dataclass\n@dataclass\nclass TrainConfig:\n"
            "    device: str = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
            "    lr: float = 0.1\nif __name__ == '__main__':\n    config = TrainConfig()\n"
            "    print(torch.nn.Linear(2, 2).to(config.device))\n",
        ),
        # ... or picks the device: the choice is always the CUDA device
        Invalid("import torch\nis_cuda = True\ndevice = 'cuda' if is_cuda else 'cpu'\nprint(torch.ones(2).to(device))\n",
                "import torch\nis_cuda = True\ndevice = 'cuda' if is_cuda and torch.cuda.is_available() else 'cpu'\n"
                "print(torch.ones(2).to(device))\n"),
        Invalid("import torch\nUSE_CPU = False\ndev = torch.device('cuda:0' if not USE_CPU else 'cpu')\n"
                "net = torch.nn.Linear(2, 2).to(dev)\n",
                "import torch\nUSE_CPU = False\ndev = torch.device('cuda:0' if not USE_CPU and torch.cuda.is_available() else 'cpu')\n"
                "net = torch.nn.Linear(2, 2).to(dev)\n"),
        # a switch hard-coded to True once, at module level: the CUDA branch always runs
        Invalid("import torch\nuse_cuda = True\nnet = torch.nn.Linear(2, 2)\nif use_cuda:\n    net = net.cuda()\n",
                "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
                "use_cuda = True\nnet = torch.nn.Linear(2, 2)\nif use_cuda:\n    net = net.to(device)\n"),
        Invalid("import torch\nuse_cpu = False\ndef run(x):\n    if not use_cpu:\n        x = x.cuda()\n    return x\n"),
        # a handler of any other runtime error may run on a machine without CUDA
        Invalid("import torch\ndef run(model, x):\n    try:\n        return model(x)\n    except RuntimeError:\n"
                "        print('retrying')\n        return model(x.cuda())\n"),
        # ... read from a function nested in a loop of the script
        Invalid("import torch\nuse_cuda = True\nfor k in range(2):\n    def batch():\n        x = torch.ones(k)\n"
                "        if use_cuda:\n            x = x.cuda()\n        return x\n    print(batch())\n",
                "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
                "use_cuda = True\nfor k in range(2):\n    def batch():\n        x = torch.ones(k)\n"
                "        if use_cuda:\n            x = x.to(device)\n        return x\n    print(batch())\n"),
        # ... or passed so by every call of a script's function (here through a second one)
        Invalid("import torch\ndef build(gpu=True):\n    m = torch.nn.Linear(2, 2)\n    if gpu:\n        m.cuda()\n"
                "    return m\ndef load(gpu):\n    return build(gpu=gpu)\n"
                "if __name__ == '__main__':\n    gpu = True\n    print(load(gpu))\n",
                "import torch\n\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
                "def build(gpu=True):\n    m = torch.nn.Linear(2, 2)\n    if gpu:\n        m.to(device)\n"
                "    return m\ndef load(gpu):\n    return build(gpu=gpu)\n"
                "if __name__ == '__main__':\n    gpu = True\n    print(load(gpu))\n"),
        # a mode flag that is not about the device guards nothing
        Invalid("import torch\nimport sys\nFAST = True if sys.argv[1] == 'fast' else False\nx = torch.ones(2)\n"
                "if FAST:\n    x = x.cuda()\n",
                "import torch\nimport sys\n\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
                "FAST = True if sys.argv[1] == 'fast' else False\nx = torch.ones(2)\nif FAST:\n    x = x.to(device)\n"),
        # ... but one that wraps it only when asked to run distributed may run on the CPU
        Invalid("import torch\nfrom torch import nn\nclass Trainer:\n    def __init__(self, model, distributed):\n"
                "        self.model = model.cuda()\n        self.distributed = distributed\n    def prep(self, rank):\n"
                "        if self.distributed:\n"
                "            self.model = nn.parallel.DistributedDataParallel(self.model, device_ids=[rank])\n"),
        # ... which with a gloo group may run on the CPU
        Invalid("import torch\nimport torch.distributed as dist\ndef setup(rank, n):\n"
                "    dist.init_process_group('gloo', rank=rank, world_size=n)\nclass Log:\n"
                "    def __init__(self, distributed):\n        self.distributed = distributed\n"
                "    def total(self, v):\n        if self.distributed:\n            v = torch.tensor(v).cuda()\n"
                "            dist.reduce(v, dst=0)\n        return v\n"),
        # ... nor does pinning a GPU without starting a process group launch anything
        Invalid("import torch\ndef setup(local_rank):\n    if local_rank != -1:\n"
                "        torch.cuda.set_device(local_rank)\n        device = torch.device('cuda', local_rank)\n"
                "    else:\n        device = torch.device('cpu')\n    return device\n"),
        # ... and so may a function that always runs a collective over one
        Invalid("import torch\nimport torch.distributed as dist\ndef setup(rank, n):\n"
                "    dist.init_process_group(backend='gloo', rank=rank, world_size=n)\n"
                "def dist_max(x):\n    t = torch.tensor(x).cuda()\n    dist.all_reduce(t, op=dist.ReduceOp.MAX)\n    return t\n"),
        # a call that leaves the `None` default reaches the CUDA fallback
        Invalid("import torch\ndef feature(n, device=None):\n    if not device:\n        device = 'cuda'\n"
                "    return torch.ones(n).to(device)\nprint(feature(3))\n",
                "import torch\ndef feature(n, device=None):\n    if not device:\n"
                "        device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
                "    return torch.ones(n).to(device)\nprint(feature(3))\n"),
        # a name bound to a weighted loss, or rebound to a layer with parameters, has something to move
        Invalid("import torch\nimport torch.nn as nn\ncrit = nn.NLLLoss()\ncrit = nn.Linear(3, 3)\ncrit.cuda()\n",
                "import torch\nimport torch.nn as nn\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
                "crit = nn.NLLLoss()\ncrit = nn.Linear(3, 3)\ncrit.to(device)\n"),
        # a class-weighted loss holds its weight as a buffer, which `.cuda()` moves
        Invalid("import torch\nimport torch.nn as nn\ncriterion = nn.CrossEntropyLoss(weight=torch.ones(3)).cuda()\n",
                "import torch\nimport torch.nn as nn\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
                "criterion = nn.CrossEntropyLoss(weight=torch.ones(3)).to(device)\n"),
        # a CPU tensor type is no evidence of CUDA
        Invalid("import torch\ndef pad(out):\n    z = torch.zeros(3)\n"
                "    if isinstance(out.data, torch.FloatTensor):\n        z = z.cuda()\n    return z\n"),
        Invalid("import torch\nx = torch.ones(2).cuda(1)\n",
                "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
                "x = torch.ones(2).to(device)\n", unsafe=True),
        Invalid("import torch\ntorch.set_default_tensor_type('torch.cuda.FloatTensor')\n"),
        Invalid(  # a skip decorator that is not about CUDA guards nothing
            "import sys\nimport unittest\nimport torch\n@unittest.skipIf(sys.platform == 'win32', 'posix')\n"
            "def test_f():\n    return torch.ones(2).cuda()\nunittest.main()\n",
            "import sys\nimport unittest\nimport torch\n\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
            "@unittest.skipIf(sys.platform == 'win32', 'posix')\n"
            "def test_f():\n    return torch.ones(2).to(device)\nunittest.main()\n",
        ),
        Invalid("import torch\nTensor = torch.cuda.FloatTensor\nx = Tensor(3)\n"),
        Invalid(  # the device variable goes below `import torch`, even after other statements
            "__all__ = ['f']\nimport torch\nfrom torch import nn\ndef f():\n    return torch.ones(1, device='cuda')\n"
            "if __name__ == '__main__':\n    f()\n",
            "__all__ = ['f']\nimport torch\nfrom torch import nn\n\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
            "def f():\n    return torch.ones(1, device=device)\nif __name__ == '__main__':\n    f()\n",
        ),
        Invalid(  # torch imported only inside functions: the module-level definition imports it
            "def f():\n    import torch\n    return torch.ones(1).cuda()\nprint(f())\n",
            "import torch\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
            "def f():\n    import torch\n    return torch.ones(1).to(device)\nprint(f())\n",
        ),
        Invalid(  # `model.eval()` does not run the file's `def eval` that checks for a GPU
            "import sys, torch\ndef eval(model):\n    if not torch.cuda.is_available():\n        sys.exit(1)\n"
            "def gradient_penalty(model, x):\n    model.eval()\n    return x.cuda()\n"
            "print(gradient_penalty(torch.nn.Linear(2, 2), torch.ones(2)))\n",
            "import sys, torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
            "def eval(model):\n    if not torch.cuda.is_available():\n        sys.exit(1)\n"
            "def gradient_penalty(model, x):\n    model.eval()\n    return x.to(device)\n"
            "print(gradient_penalty(torch.nn.Linear(2, 2), torch.ones(2)))\n",
        ),
        Invalid(  # a launcher that may run on the CPU (`accelerator="auto"`) guards nothing
            "import torch\nfrom pytorch_lightning.lite import LightningLite\n\nclass Lite(LightningLite):\n"
            "    def run(self, x):\n        return x.cuda()\n\nLite(accelerator='auto').run(torch.ones(2))\n",
            "import torch\nfrom pytorch_lightning.lite import LightningLite\n\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\nclass Lite(LightningLite):\n"
            "    def run(self, x):\n        return x.to(device)\n\nLite(accelerator='auto').run(torch.ones(2))\n",
        ),
        Invalid(  # a one-line `if use_cuda: assert ...` checks that branch only, not the lines below it
            "import torch\nuse_cuda = torch.cuda.is_available()\ndef f(x):\n"
            "    if use_cuda: assert torch.cuda.device_count() > 0\n    return x.cuda()\nprint(f(torch.ones(1)))\n",
            "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
            "use_cuda = torch.cuda.is_available()\ndef f(x):\n"
            "    if use_cuda: assert torch.cuda.device_count() > 0\n    return x.to(device)\nprint(f(torch.ones(1)))\n",
        ),
        Invalid(  # a function name is no guard: `to_gpu` still crashes on a laptop
            "import torch\ndef to_gpu(x):\n    return x.cuda()\nprint(to_gpu(torch.ones(2)))\n",
            "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n\n"
            "def to_gpu(x):\n    return x.to(device)\nprint(to_gpu(torch.ones(2)))\n",
        ),
        Invalid(  # `.cuda(other.device)` keeps the caller's device; a library takes it from its input
            "import torch\ndef align(x: torch.Tensor, other: torch.Tensor):\n"
            "    return x.cuda(other.device) + torch.ones(1).cuda()\n",
            "import torch\ndef align(x: torch.Tensor, other: torch.Tensor):\n"
            "    return x.to(other.device) + torch.ones(1).to(x.device)\n",
        ),
        # a library module with no input to take a device from: no import-time global, no fix
        Invalid("import torch\ndef ones():\n    return torch.ones(1).cuda()\n"),
        Invalid(  # an int device reaching `.to()` through the file's own calls: guarded where defined
            "import torch\nclass Trainer:\n    def __init__(self, model, gpu_id):\n"
            "        self.model = model.to(gpu_id)\ndef main(device):\n    Trainer(torch.nn.Linear(2, 2), device)\n"
            "if __name__ == '__main__':\n    device = 0\n    main(device)\n",
            "import torch\nclass Trainer:\n    def __init__(self, model, gpu_id):\n"
            "        self.model = model.to(gpu_id)\ndef main(device):\n    Trainer(torch.nn.Linear(2, 2), device)\n"
            "if __name__ == '__main__':\n    device = 0 if torch.cuda.is_available() else 'cpu'\n    main(device)\n",
        ),
        # a command-line runner calls it with the default
        Invalid("import fire\nimport torch\ndef make(n, device='cuda'):\n    return torch.zeros(n, device=device)\n"
                "if __name__ == '__main__':\n    fire.Fire(make)\n",
                "import fire\nimport torch\ndef make(n, device='cuda' if torch.cuda.is_available() else 'cpu'):\n"
                "    return torch.zeros(n, device=device)\nif __name__ == '__main__':\n    fire.Fire(make)\n"),
        Invalid(  # one call in the file keeps the default: it still runs
            "import torch\ndef make(n, device='cuda'):\n    return torch.zeros(n, device=device)\n"
            "print(make(2, device='cpu'), make(3))\n",
            "import torch\ndef make(n, device='cuda' if torch.cuda.is_available() else 'cpu'):\n"
            "    return torch.zeros(n, device=device)\nprint(make(2, device='cpu'), make(3))\n",
        ),
        Invalid(  # a user function may compare its `device` (`"cuda" == torch.device("cuda")` is False)
            "import torch\ndef same(t, device):\n    return t.device.type == device\n"
            "print(same(torch.ones(1), device='cuda'))\n",
            "import torch\n\ntorch_device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
            "def same(t, device):\n    return t.device.type == device\n"
            "print(same(torch.ones(1), device=torch_device))\n",
            unsafe=True,
        ),
        # the process group's backend is the user's choice (gloo runs on CPUs): not a guard
        Invalid(
            "import torch\nimport torch.distributed as dist\n"
            "def all_gather(data):\n    if dist.get_world_size() == 1:\n        return [data]\n"
            "    return [torch.ones(3).cuda()]\n"
            "def init(args):\n    dist.init_process_group(backend=args.backend)\n",
        ),
        # the user chose no GPU id: this branch runs exactly on the machines without one
        Invalid("import torch\ndef train(x, args):\n    if args.gpu is None:\n        x = x.cuda()\n    return x\n"),
        # functions that answer each other answer nothing
        Invalid("import torch\ndef a():\n    return b()\ndef b():\n    return a()\n"
                "def f(x):\n    if a():\n        x = x.cuda()\n    return x\n"),
        # DDP without device ids also wraps a CPU module (gloo): not a GPU branch
        Invalid("import torch\nfrom torch.nn.parallel import DistributedDataParallel\n"
                "def wrap(model, distributed):\n    if distributed:\n        model = model.cuda()\n"
                "        model = DistributedDataParallel(model)\n    return model\n"),
        # a None check on another name than the index says nothing of the CPU
        Invalid("import torch\ndef load(model, gpu, ckpt):\n    if ckpt is not None:\n"
                "        model = model.cuda(gpu)\n    return model\n"),
        # `if args.cpu:` is the branch that runs without a GPU
        Invalid("import torch\ndef load(model, args):\n    if args.cpu:\n        model = model.cuda()\n    return model\n"),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._called: set = set()
        self._handled: set = set()
        self._compared: set = set()
        self._unknown_args: set = set()  # arguments of calls not known to place (see _places)
        self._library: bool | None = None
        self._guarded_literals: set = set()  # int / "cuda" literals under a guard
        self._param_moves: dict = {}  # (FunctionDef, param) -> placements `.to(param)` seen
        self._dead: set = set()  # parameter defaults that never run or never place
        self._silent_in: dict = {}  # function -> silent throughout (see _silent)
        self._site_guarded: dict = {}  # Call -> guarded where it is made
        self._if_tests: list = []  # tests of the `if` bodies the traversal is in
        self._pending: list = []  # findings inside functions: kept unless every caller guards

    # ---- helpers --------------------------------------------------------------------
    def _silent(self) -> bool:
        """Guarded (``devlint.analysis.guards``: an availability check, a GPU test mark, an
        assert, NCCL, CUDA extension code), or inside a class's own ``cuda()`` method: the
        caller asked for CUDA by calling ``.cuda()``. A function *name* (``def to_gpu``) or
        a file name (``train_gpu.py``) guards nothing."""
        t = self.t
        if t.guarded:
            return True
        fn = t.function
        if fn is None:
            return False
        silent = self._silent_in.get(fn)  # the same for every node of the function: asked once
        if silent is None:
            # a library function that calls torch.cuda.current_device() & co anyway, or a
            # class's own `cuda()` method
            silent = self._silent_in[fn] = (
                (self._is_library() and guards.calls_cuda_runtime(self.facts, fn))
                or (t.method is fn and fn.name.value == "cuda"))
        return silent

    def _applicability(self, forced_unsafe: bool = False) -> Applicability:
        if forced_unsafe or self.facts.multi_gpu:
            return Applicability.UNSAFE
        return Applicability.SAFE

    def _is_library(self) -> bool:
        """Imported, never run (no `__main__` block, no module-level work), and not a test."""
        if self._library is None:
            self._library = is_library_module(self.ctx.module) and not is_test_file(self.ctx.filename)
        return self._library

    def _choose(self, avoid=()) -> DeviceChoice | None:
        """The device a fix uses here (a library takes a tensor parameter's, or gets no fix)."""
        return choose_library_device(self.ctx, avoid) if self._is_library() else choose_device(self.ctx, avoid=avoid)

    def _replace_with_device(self, node, target, msg: str, avoid=(), unsafe: bool = False) -> None:
        choice = self._choose(avoid)
        if choice is None:
            self.report(node, msg)
            return
        fix = choice.fix(self._applicability(unsafe), "use the guarded device", {target: choice.expr})
        self.report(node, msg, fix)

    def _guard_in_place(self, node: cst.BaseExpression, msg: str, default: bool = False) -> None:
        if self._is_library() and (default or self.t.function is None):
            # a module-level value or a parameter default is evaluated at import time: a library
            # must not query CUDA on import (take the device from the caller instead)
            self.report(node, msg)
            return
        _, needs_torch = torch_ref(self.facts)
        fix = Fix(self._applicability(), "fall back to the CPU when CUDA is unavailable",
                  {node: guarded_literal(self.facts, node)}, needs_torch_import=needs_torch)
        self.report(node, msg, fix)

    def _never_read(self, name: str) -> bool:
        """``DEVICE = "cuda:0"`` / ``args.device = "cuda:0"`` that no line reads (assigned, maybe
        again, but never read): a function's local, or, in a script (a ``__main__`` block or a
        notebook: no other module imports its names), a module name or attribute of the file.
        A plain module name also counts in a file that runs work at its top when no project
        module imports it (``ProjectFacts.imported``, which the index asks for such a name)."""
        module, fn = self.ctx.module, self.t.function
        local = "." not in name and fn is not None
        script = self.ctx.filename.endswith(".ipynb") or any(is_main_guard(st) for st in module.body) or (
            name in unread_device_names(self.facts.source) and not is_library_module(module)
            and not self.facts.project.imported)
        if not local and not script:
            return False
        root = fn if local else module
        everything = list(nodes(root, into_scopes=True))
        if any(type(n) in (cst.Global, cst.Nonlocal) for n in everything):
            return False
        written = {id(t.target) for n in everything if type(n) is cst.Assign for t in n.targets}
        last = name.rsplit(".", 1)[-1]
        for n in everything:
            if id(n) in written:
                continue
            if "." not in name and type(n) is cst.Name and n.value == name:
                return False
            if "." in name and type(n) is cst.Attribute and n.attr.value == last and dotted(n) == name:
                return False
            if "." in name and type(n) is cst.SimpleString and string_value(n) == last:
                return False  # read by its name: `getattr(args, "device")`
        return True

    def _unused_test_device(self) -> bool:
        """A test's local `dev = torch.device("cuda:1")` that never reaches a placement."""
        fn, stmt = self.t.function, self.t.statement
        return (fn is not None and stmt is not None and is_test_file(self.ctx.filename)
                and unused_device_binding(fn, stmt))

    # ---- visitors -------------------------------------------------------------------
    def visit_If_body(self, node: cst.If) -> None:
        self._if_tests.append(node.test)

    def leave_If_body(self, node: cst.If) -> None:
        self._if_tests.pop()

    def _none_checked(self, index: cst.BaseExpression) -> bool:
        """``if device_id is not None: w = w.cuda(device_id)``: the code asks whether it was given
        a GPU index before using it, so a run without one (None, the CPU) never gets here."""
        d = dotted(index)
        if d is None:
            return False
        for test in self._if_tests:
            parts = [test]
            while parts:
                t = parts.pop()
                if isinstance(t, cst.BooleanOperation) and isinstance(t.operator, cst.And):
                    parts += [t.left, t.right]
                elif (isinstance(t, cst.Comparison) and len(t.comparisons) == 1
                      and isinstance(t.comparisons[0].operator, cst.IsNot)
                      and isinstance(t.comparisons[0].comparator, cst.Name)
                      and t.comparisons[0].comparator.value == "None" and dotted(t.left) == d):
                    return True
        return False

    def visit_Comparison(self, node: cst.Comparison) -> None:
        # `x.device == torch.device("cuda")`, `torch.device("cuda") in devices`,
        # `type(t) is torch.cuda.FloatTensor`: tests, not placements; they run on a CPU
        self._compared.add(node.left)
        self._compared.update(c.comparator for c in node.comparisons)
        for side in (node.left, *(c.comparator for c in node.comparisons)):
            if isinstance(side, cst.Attribute) and side.attr.value in ("type", "index"):
                self._compared.add(side.value)  # `torch.device("cuda").type`: a name, not a placement
        self._called.add(node.left)
        self._called.update(c.comparator for c in node.comparisons)

    def _mark_type_values(self, elements) -> None:
        for el in elements:
            if isinstance(el, (cst.Element, cst.DictElement)):
                self._called.add(el.value)
            if isinstance(el, cst.DictElement):
                self._called.add(el.key)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._mark_type_values(node.elements)  # a table of types, e.g. for isinstance

    def visit_List(self, node: cst.List) -> None:
        self._mark_type_values(node.elements)

    def visit_Set(self, node: cst.Set) -> None:
        self._mark_type_values(node.elements)

    def visit_Dict(self, node: cst.Dict) -> None:
        self._mark_type_values(node.elements)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) and func.value in ("isinstance", "issubclass") and len(node.args) == 2:
            self._called.add(node.args[1].value)  # a type test never raises on a CPU build
        self._site_guarded[node] = self.t.guarded
        if self._silent() or node in self._dead:
            self._guarded_literals.update(a.value for a in node.args)
            return
        if not places_device(self.facts, node):
            self._unknown_args.update(a.value for a in node.args)
        q = self.facts.qualname(func)
        if q is not None:
            self._torch_call(node, q)
            return
        if isinstance(func, cst.Attribute):
            meth = func.attr.value
            if meth == "cuda":
                self._dot_cuda(node, func)
                return
            if meth == "to":
                a = call_arg(node, 0, None)
                if a is None:
                    a = call_arg(node, None, "device")
                if a is not None and not self.t.guarded:
                    d = dotted(a.value)
                    key = (placed_parameter(self.facts, self.t.function, d) if isinstance(a.value, cst.Name)
                           else placed_init_parameter(self.t.cls, d) if d and d.startswith("self.") else None)
                    if key is not None:
                        self._param_moves[key] = self._param_moves.get(key, 0) + 1
                if a is not None and (is_cuda_string(a.value) or isinstance(a.value, cst.Integer)):
                    self._handled.add(a.value)
                    self._replace_with_device(a.value, a.value,
                                              f"`.to({self.ctx.module.code_for_node(a.value)})` hard-codes "
                                              "the CUDA device", avoid={root_name(func.value)})
                    return
            if meth == "add_argument":
                self._argparse_default(node)
        self._device_kwarg(node, func)

    def _torch_call(self, node: cst.Call, q: str) -> None:
        if q in _OPTION_DECLARATIONS:
            self._argparse_default(node, "command-line option")  # `@click.option("--device", default="cuda")`
            return
        last = q.rsplit(".", 1)[-1]
        if q == "torch.device":
            if node in self._compared:
                return
            if node.args and type(node.args[0].value) is cst.IfExp:
                self._switched_choice(node.args[0].value)  # `torch.device("cuda" if use_cuda else "cpu")`
            if node.args and is_cuda_string(node.args[0].value):
                lit = node.args[0].value
                self._handled.add(lit)
                if guards.unguarded_device_definition(self.facts, self.t.statement, node):
                    if self._unused_test_device():
                        return
                    if len(node.args) == 1:
                        self._guard_in_place(lit, f"`{self.ctx.module.code_for_node(node)}` hard-codes "
                                                  "the CUDA device")
                    else:
                        self.report(node, "`torch.device('cuda', i)` hard-codes a CUDA device index")
                    return
                self._replace_with_device(node, node, f"`{self.ctx.module.code_for_node(node)}` hard-codes "
                                          "the CUDA device",
                                          unsafe=len(node.args) > 1 or node in self._unknown_args)
            return
        if q.startswith("torch.cuda.") and last in LEGACY_TYPES:
            self._called.add(node.func)
            self._legacy_type(node, last)
            return
        if q == "torch.set_default_tensor_type":
            a = node.args[0].value if node.args else None
            if a is not None and ("torch.cuda." in (string_value(a) or "")
                                  or (self.facts.qualname(a) or "").startswith("torch.cuda.")):
                if a is not None and not isinstance(a, cst.SimpleString):
                    self._called.add(a)
                self.report(node, "`set_default_tensor_type` with a CUDA type makes every new tensor "
                                  "CUDA-only; use `torch.set_default_device(device)` behind a guard")
            return
        if last in _NOT_DEVICE_CALLS:
            return
        self._device_kwarg(node, node.func)

    def _stateless_module(self, expr: cst.BaseExpression) -> bool:
        """``nn.CrossEntropyLoss()``, ``nn.LogSoftmax(dim=1)``, ``crit`` bound once to one: a
        torch.nn loss without a ``weight`` tensor (which would be a buffer), an activation,
        pooling or dropout layer whatever its settings, or a container built empty holds no
        parameter or buffer, so ``.cuda()`` on it moves nothing and never touches CUDA; so does
        a choice between two such modules (``A() if cond else B()``), and timm's label-smoothing,
        soft-target and JSD losses."""
        if isinstance(expr, cst.Name):
            # every binding holds nothing (`crit = crit.cuda(gpu)` moves it: no other binding)
            values = self.facts.values.bound_values(expr.value, self.t.scope)
            return bool(values) and all(not isinstance(v, cst.Name) and self._stateless_module(v) for v in values)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self" \
                and self.t.cls is not None:
            # `self.act = nn.LeakyReLU(0.1)` ... `self.act = self.act.cuda()`: every value the class gives it
            values = self.facts.values.attribute_values(f"self.{expr.attr.value}", self.t.cls)
            return bool(values) and all(not isinstance(v, (cst.Name, cst.Attribute)) and self._stateless_module(v)
                                        for v in values)
        if isinstance(expr, cst.IfExp):  # `A() if softmax else B(n)`: whichever is built holds nothing
            return self._stateless_module(expr.body) and self._stateless_module(expr.orelse)
        if not isinstance(expr, cst.Call):
            return False
        if isinstance(expr.func, cst.Name) and self.facts.stateless_module(expr.func.value):
            return True  # a Module (the file's or the project's) holding no parameter or buffer
        spelled = _module_class(expr.func)
        if spelled is not None and spelled in self.facts.project.stateless_modules:
            return True  # `decode.Decoder(...)`, `decode.__dict__["Decoder"](...)`: a project module's class
        q = self.facts.qualname(expr.func) or ""
        last = q.rsplit(".", 1)[-1]
        if q.startswith("timm.loss.") and last in _TIMM_STATELESS_LOSSES:
            return True  # timm's losses keep only numbers (and torch.nn losses without a weight)
        if not q.startswith("torch.nn."):
            return False
        if last in _STATELESS_LAYERS:
            return True
        if last in _CONTAINERS:
            return not expr.args
        return last.endswith("Loss") and not any(
            a.keyword is None or a.keyword.value in ("weight", "pos_weight") for a in expr.args)

    def _dot_cuda(self, node: cst.Call, func: cst.Attribute) -> None:
        if self._stateless_module(func.value):
            return
        positional = [a for a in node.args if a.keyword is None]
        index_kw = call_arg(node, None, "device")
        given = positional[0] if positional else index_kw
        indexed = given is not None
        if given is not None and self._none_checked(given.value):
            return
        if given is not None and isinstance(given.value, cst.Attribute) and given.value.attr.value == "device":
            # `.cuda(other.device)`: the caller chose a device; keep it (`.to(other.device)`)
            choice: DeviceChoice | None = DeviceChoice(given.value, False, False)
            indexed = False
        else:
            choice = self._choose({root_name(func.value)})
        what = ("`.cuda(i)` pins a CUDA device index: raises on a machine without CUDA" if indexed
                else "`.cuda()` hard-codes the CUDA device: raises on a machine without CUDA")
        if choice is None:
            self.report(node, what)
            return
        new = cuda_to_call(node, choice.expr)
        fix = choice.fix(self._applicability(indexed),
                         "use `.to(device)`" + (" (drops the device index)" if indexed else ""), {node: new})
        self.report(node, what, fix)

    def _device_kwarg(self, node: cst.Call, func) -> None:
        for kw in ("device", "map_location", "device_map"):  # (Hugging Face `from_pretrained(device_map="cuda")`)
            a = call_arg(node, None, kw)
            if a is None or a.value in self._handled:
                continue
            v = a.value
            if is_cuda_string(v) or (kw == "device" and isinstance(v, cst.Integer)):
                self._handled.add(v)
                self._replace_with_device(v, v, f"`{kw}={self.ctx.module.code_for_node(v)}` hard-codes the "
                                          "CUDA device: raises on a machine without CUDA", avoid={root_name(func)} if func is not None else (),
                                          unsafe=not places_device(self.facts, node))

    def _argparse_default(self, node: cst.Call, kind: str = "argparse") -> None:
        names = [string_value(a.value) or "" for a in node.args if a.keyword is None]
        a = call_arg(node, None, "default")
        if a is not None and is_cuda_string(a.value) and any("device" in n or "cuda" in n for n in names):
            self._handled.add(a.value)
            if self._rechosen(node, names):
                return
            self._guard_in_place(a.value, f"{kind} default hard-codes the CUDA device (portability advice: a run that keeps the default fails without CUDA)")

    def _rechosen(self, node: cst.Call, names: list) -> bool:
        """``args.device = "cpu"`` where the file reads the options (``elif not
        torch.cuda.is_available(): args.device = "cpu"``): the code chooses past the default, so
        a run that keeps it does not fail without CUDA."""
        d = call_arg(node, None, "dest")
        dest = string_value(d.value) if d is not None else None
        if dest is None:
            longs = [n for n in names if n.startswith("--")] or names
            dest = longs[0].lstrip("-").replace("-", "_") if longs else None
        if not dest:
            return False
        for n in nodes(self.ctx.module, into_scopes=True):
            if type(n) is not cst.Assign or not any(
                    type(t.target) is cst.Attribute and t.target.attr.value == dest
                    and type(t.target.value) is cst.Name and t.target.value.value != "self" for t in n.targets):
                continue
            s = string_value(n.value)
            if (s is not None and s and not is_cuda_string(n.value)) or (
                    type(n.value) is cst.IfExp and guards.guard_polarity(self.facts, n.value.test) != 0):
                return True  # `args.device = "cpu"`, `args.device = "cuda" if torch.cuda.is_available() else "cpu"`
        # `device = args.device if torch.cuda.is_available() and ... else "cpu"`: read only with CUDA
        return self._read_only_with_cuda(self.ctx.module, lambda x: type(x) is cst.Attribute and x.attr.value == dest
                                         and type(x.value) is cst.Name and x.value.value != "self"
                                         and not (self.facts.qualname(x) or "").startswith("torch."))

    def _read_only_with_cuda(self, scope: cst.CSTNode, is_read, depth: int = 2) -> bool:
        """Every read under ``scope`` (``is_read(node)``, at least one) is in the branch of an
        ``if`` or a conditional expression that runs only where CUDA is usable, or in the test
        that asks (``if torch.cuda.is_available() and device == "cuda": torch.device(device)``),
        or is handed whole to a function of the file whose parameter is read only so
        (``run_stream(args.device)`` then ``get_device(device_name)``; ``depth`` such hops)."""
        found = False
        stack = [(scope, False)]
        while stack:
            n, guarded = stack.pop()
            if is_read(n):
                if not guarded:
                    return False
                found = True
                continue
            t = type(n)
            if t is cst.Call and not guarded and depth > 0 and type(n.func) is cst.Name:
                handed = self._handed_on(n, is_read, depth)
                if handed is not None:  # `run(args.device)`: the function reads it only with CUDA
                    if not handed:
                        return False
                    found = True
                    stack.append((n.func, guarded))
                    stack.extend((a.value, guarded) for a in n.args if not is_read(a.value))
                    continue
            if t is cst.Comparison and any(string_value(x) is not None for x in (
                    n.left, *(c.comparator for c in n.comparisons))):
                found = found or any(is_read(x) for x in nodes(n))
                continue  # `device_arg == "xpu"`: compared with a name, placed nowhere
            if t is cst.If or t is cst.IfExp:
                pol = guards.guard_polarity(self.facts, n.test)
                if pol:
                    stack.append((n.test, True))  # (compared with what asks for CUDA: no placement)
                    stack.append((n.body, guarded or pol == 1))
                    if n.orelse is not None:
                        stack.append((n.orelse, guarded or pol == -1))
                    continue
            if t is cst.Attribute or t is cst.Arg:
                stack.append((n.value, guarded))  # (not `torch.device`'s or `f(device=...)`'s name)
                continue
            stack.extend((k, guarded) for k in children(n, trivia=False))
        return found

    def _handed_on(self, call: cst.Call, is_read, depth: int):
        """For a call of a module-level function of the file passing a read (``is_read``) whole
        as an argument: whether every such parameter is read only with CUDA in that function
        (None when the call passes no read, or is no call of such a function)."""
        passed = [(i, a) for i, a in enumerate(call.args) if is_read(a.value)]
        if not passed:
            return None
        fn = next((s for s in self.ctx.module.body if type(s) is cst.FunctionDef
                   and s.name.value == call.func.value), None)
        if fn is None or any(a.star for a in call.args):
            return None
        params = [*fn.params.posonly_params, *fn.params.params]
        for i, a in passed:
            if a.keyword is not None:
                name = a.keyword.value
            elif i < len(params):
                name = params[i].name.value
            else:
                return False
            if not self._read_only_with_cuda(fn.body, lambda x, nm=name: type(x) is cst.Name and x.value == nm,
                                             depth - 1):
                return False
        return True

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        """``device: str = "cuda"``: a configuration class's field (a dataclass, pyrallis or
        tyro config) or an annotated name, read as a device where the code reads it."""
        if node.value is None or not is_cuda_string(node.value):
            return
        if self._silent():
            self._guarded_literals.add(node.value)
            return
        d = dotted(node.target)
        if d is None or "device" not in d.rsplit(".", 1)[-1].lower() or _DEVICE_TYPE_NAME.search(d.rsplit(".", 1)[-1]):
            return
        self._handled.add(node.value)
        if self.t.cls is not None and self.t.function is None:
            # a class field: what reads it is `config.device`, somewhere in the file
            everything = list(nodes(self.ctx.module, into_scopes=True))
            if not any(type(n) is cst.Attribute and n.attr.value == d for n in everything):
                return
            if any(type(n) is cst.AssignTarget and type(n.target) is cst.Attribute and n.target.attr.value == d
                   and not (type(n.target.value) is cst.Name and n.target.value.value == "self")
                   for n in everything):
                return  # `config.device = "cpu"` somewhere: the code chooses past the default
            self._guard_in_place(node.value, f"field `{d}` defaults to the CUDA device (portability advice: "
                                             "a run that keeps the default fails without CUDA)", default=True)
            return
        if self._never_read(d):
            return
        self._guard_in_place(node.value, f"`{d}` is hard-coded to the CUDA device: what it places fails on a machine without CUDA")

    def _legacy_type(self, node: cst.Call, last: str) -> None:
        msg = f"`torch.cuda.{last}(...)` creates a CUDA-only tensor: raises on a machine without CUDA"
        factory = legacy_factory(node)
        choice = self._choose() if factory is not None else None
        if choice is None:
            self.report(node, msg)
            return
        t, _ = torch_ref(self.facts)
        new = legacy_type_call(node, factory, t, LEGACY_TYPES[last], choice.expr)
        self.report(node, msg, choice.fix(self._applicability(), f"use `{t}.{factory}(..., device=...)`",
                                          {node: new}))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value not in LEGACY_TYPES or self._silent() or node in self._called:
            return
        q = self.facts.qualname(node)
        if q is not None and q.startswith("torch.cuda.") and q.rsplit(".", 1)[-1] in LEGACY_TYPES:
            self.report(node, f"`{q}` is a CUDA-only tensor type; use a dtype and `device=`")

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._silent():
            self._guarded_literals.add(node.value)
            return
        if type(node.value) is cst.IfExp:
            for t in node.targets:
                d = dotted(t.target)
                if (d is not None and "device" in d.rsplit(".", 1)[-1].lower()
                        and not _DEVICE_TYPE_NAME.search(d.rsplit(".", 1)[-1]) and not self._never_read(d)):
                    self._switched_choice(node.value)
                    return
            return
        if not is_cuda_string(node.value):
            return
        for t in node.targets:
            d = dotted(t.target)
            if (d is not None and "device" in d.rsplit(".", 1)[-1].lower()
                    and not _DEVICE_TYPE_NAME.search(d.rsplit(".", 1)[-1])):
                self._handled.add(node.value)
                if guards.checked_later(self.facts, self.t.function, d, self.t.statement):
                    return  # validated against availability before the function returns it
                if self._never_read(d):
                    return  # a value nothing reads places nothing
                param = fallback_param(self.t.function, node)
                if param is not None and not self._default_reached(self.t.function, param):
                    return  # `if not device: device = "cuda"`: a default no caller in the project leaves
                self._guard_in_place(node.value, f"`{d}` is hard-coded to the CUDA device: what it places fails on a machine without CUDA")
                return

    def _switched_choice(self, choice: cst.IfExp) -> None:
        """``"cuda" if use_cuda else "cpu"`` where the code itself sets ``use_cuda = True`` (a
        switch no one who runs the program chooses, ``guards.code_set_switch``): the choice is
        always the CUDA device. The fix asks for CUDA too: ``use_cuda and
        torch.cuda.is_available()``."""
        if not (is_cuda_string(choice.body) and string_value(choice.orelse) == "cpu") or choice.body in self._handled:
            return
        if guards.code_set_switch(self.facts, choice.test) is not True:
            return
        self._handled.add(choice.body)
        t, needs_torch = torch_ref(self.facts)
        test = cst.BooleanOperation(left=choice.test, operator=cst.And(),
                                    right=cst.parse_expression(f"{t}.cuda.is_available()"))
        code = self.ctx.module.code_for_node(choice.test)
        self.report(choice.body, f"`{code}` is set in the code, so this choice is always the CUDA device: "
                                 "what it places fails on a machine without CUDA",
                    Fix(self._applicability(), "fall back to the CPU when CUDA is unavailable", {choice.test: test},
                        needs_torch_import=needs_torch))

    def visit_Param(self, node: cst.Param) -> None:
        d = node.default
        if d is None:
            return
        is_device_call = isinstance(d, cst.Call) and self.facts.qualname(d.func) == "torch.device"
        if not (is_cuda_string(d) or is_device_call) or self._silent():
            return
        fn = self.t.function
        if fn is not None and (default_is_dead(self.facts, fn, node) or not param_places(
                fn, node.name.value, self.t.cls if self.t.method is fn else None)):
            self._dead.add(d)  # never runs, or only names a device type / is compared
            return
        if is_device_call and "device" in node.name.value.lower() and fn is not None \
                and not self._default_reached(fn, node):
            self._dead.add(d)  # `device=torch.device("cuda")` that every caller seen replaces
            return
        if is_cuda_string(d) and "device" in node.name.value.lower() and not _DEVICE_TYPE_NAME.search(node.name.value):
            if fn is not None and not self._default_reached(fn, node):
                return  # no call in the project omits it and no command line runs it: every caller seen chooses
            name = node.name.value
            if fn is not None and self._read_only_with_cuda(fn.body, lambda x: type(x) is cst.Name and x.value == name):
                return  # `if torch.cuda.is_available() and device == "cuda": torch.device(device)`
            self._guard_in_place(d, f"parameter `{node.name.value}` defaults to the CUDA device (portability advice: "
                                  "a caller that omits it fails without CUDA)", default=True)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        """``device if device is not None else torch.device("cuda")`` with ``device=None`` a
        parameter: the CUDA device is the parameter's default in effect, reported only where a
        call (in the project) or a command line leaves it in place."""
        fn = self.t.function
        if fn is None or not isinstance(node.body, cst.Name):
            return
        t = node.test
        if not (isinstance(t, cst.Comparison) and len(t.comparisons) == 1
                and isinstance(t.comparisons[0].operator, cst.IsNot) and isinstance(t.left, cst.Name)
                and t.left.value == node.body.value and isinstance(t.comparisons[0].comparator, cst.Name)
                and t.comparisons[0].comparator.value == "None"):
            return
        param = next((p for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)
                      if p.name.value == node.body.value), None)
        if param is None or not (isinstance(param.default, cst.Name) and param.default.value == "None"):
            return
        if not self._default_reached(fn, param):
            self._dead.add(node.orelse)  # a torch.device(...) call
            self._guarded_literals.add(node.orelse)  # a "cuda" string

    def _default_reached(self, fn: cst.FunctionDef, param: cst.Param) -> bool:
        """A call in this file or in another file of the project (``ProjectFacts.defaults_reached``)
        leaves ``param``'s default in place, or a command line runs ``fn``."""
        if default_reached(self.facts, fn, param):
            return True
        owner = self.t.cls.name.value if self.t.cls is not None and self.t.method is fn else None
        callee = owner if owner is not None and fn.name.value == "__init__" else fn.name.value
        return f"{callee}.{param.name.value}" in self.facts.project.defaults_reached

    def report(self, node, message, fix=None) -> None:
        fn = self.t.function
        if fn is None:
            super().report(node, message, fix)
        else:
            self._pending.append((fn, node, message, fix))

    def finish(self) -> None:
        if self._pending:
            g = call_graph(self.facts)
            memo: dict = {}
            for fn, node, msg, fix in self._pending:
                if not guarded_by_callers(g, fn, self._site_guarded, memo):
                    super().report(node, msg, fix)
        if not self._param_moves:
            return
        g = call_graph(self.facts)
        seen: set = set()
        for (fn, param), _ in self._param_moves.items():
            where = fn.name.value
            f = g.func_of_node.get(fn)
            if f is not None and f.cls is not None:
                where = f"{f.cls.name.value}.{where}"
            for lit, via, only_use in literals_reaching(self.facts, fn, param):
                if lit in seen or lit in self._handled or lit in self._guarded_literals:
                    continue
                seen.add(lit)
                self._handled.add(lit)
                code = self.ctx.module.code_for_node(lit)
                msg = (f"`{code}` reaches `.to({param})` in `{where}` through `{via}(...)`: "
                       "it hard-codes a CUDA device")
                _, needs_torch = torch_ref(self.facts)
                # on a GPU the value is the same; safe when nothing else reads the guarded name
                how = self._applicability(not only_use)
                fix = Fix(how, "fall back to the CPU when CUDA is unavailable",
                          {lit: guarded_literal(self.facts, lit)}, needs_torch_import=needs_torch)
                self.report(lit, msg, fix)


def _module_class(func: cst.BaseExpression):
    """``mod.Cls`` for ``mod.Cls`` and ``mod.__dict__["Cls"]`` (a registry lookup by a literal)."""
    if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Attribute) and func.value.attr.value == "__dict__" \
            and len(func.slice) == 1 and isinstance(func.slice[0].slice, cst.Index):
        key = string_value(func.slice[0].slice.value)
        func = cst.Attribute(func.value.value, cst.Name(key)) if key and key.isidentifier() else None
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        return f"{func.value.value}.{func.attr.value}"
    return None
