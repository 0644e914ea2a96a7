"""DL005-DL007 behaviour a user notices beyond the generated examples: the fix loop
converges whatever the selection, fixes keep formatting, and the findings are precise."""

from __future__ import annotations

import pytest

from devlint import registry
from devlint.engine import Settings, fix_source, lint_source


def fix(src: str, *codes: str, unsafe_fixes: bool = False) -> str:
    out = fix_source(src.encode(), "t.py", Settings(select=registry.resolve(codes), unsafe_fixes=unsafe_fixes))
    assert out.converged
    return out.source.decode()


def codes_at(src: str, *codes: str) -> list[tuple[int, str]]:
    diags = lint_source(src.encode(), "t.py", Settings(select=registry.resolve(codes))).diagnostics
    return [(d.line, d.code) for d in diags]


CUDA_FACTORIES = """\
import torch
from torch import nn

a = torch.zeros(3).cuda()
b = torch.tensor([1, 2]).cuda()


class M(nn.Module):
    def forward(self, x):
        return x + torch.ones(1).cuda()
"""


@pytest.mark.parametrize("selection", [("DL002", "DL007"), ("DL007", "DL002"), ("DL007",), ("DL00",)])
def test_dl002_and_dl007_converge_to_one_result(selection):
    out = fix(CUDA_FACTORIES, *selection)
    assert "a = torch.zeros(3, device=device)" in out
    # built from Python data: no DL007 (device= would copy just the same); DL002 keeps it portable
    if "DL002" in selection or selection == ("DL00",):
        assert "b = torch.tensor([1, 2]).to(device)" in out
    else:
        assert "b = torch.tensor([1, 2]).cuda()" in out
    assert "x + torch.ones(1, device=x.device)" in out
    assert out.count("device = torch.device(") == 1
    assert fix(out, *selection) == out
    assert not codes_at(out, *selection)


def test_dl002_alone_then_dl007_reaches_the_same_file():
    staged = fix(fix(CUDA_FACTORIES, "DL002"), "DL007")
    assert staged == fix(CUDA_FACTORIES, "DL002", "DL007")


def test_dl007_keeps_a_multiline_call_layout():
    src = ("import torch\ndevice = torch.device('cpu')\nx = torch.zeros(\n    2,\n    3,\n"
           "    dtype=torch.float64,\n).to(device)\n")
    assert fix(src, "DL007") == ("import torch\ndevice = torch.device('cpu')\nx = torch.zeros(\n    2,\n"
                                 "    3,\n    dtype=torch.float64,\n    device=device,\n)\n")


def test_dl007_keeps_keyword_spacing_and_comments():
    src = "import torch\ndevice = 'cpu'\nx = torch.ones(2, dtype = torch.int64).to(device)  # note\n"
    assert fix(src, "DL007").endswith("x = torch.ones(2, dtype = torch.int64, device = device)  # note\n")


@pytest.mark.parametrize("src", [
    "import torch\nx = torch.normal(torch.zeros(3), torch.ones(3)).to('cpu')\n",  # tensor overload: no device=
    "import torch\nx = torch.zeros(3).to(0.5)\n",
    "import torch\nx = torch.zeros(3).to(*args)\n",
    "import torch\nx = torch.zeros(3, out=y).to('cpu')\n",
    "import numpy as np\nx = np.zeros(3).to('cpu')\n",
])
def test_dl007_precision(src):
    assert codes_at(src, "DL007") == []


def test_dl006_only_in_per_call_methods():
    src = """\
import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.zeros(3)

    def forward(self, x):
        return self.step(x)

    def step(self, x):
        return self.inner(x) + torch.ones(3)

    def inner(self, x: torch.Tensor):
        return x * torch.arange(3)

    def export(self):
        return torch.zeros(3)
"""
    assert codes_at(src, "DL006") == [(14, "DL006"), (17, "DL006")]


def test_dl006_does_not_guess_a_tensor_argument():
    src = ("import torch\nfrom torch import nn\nclass M(nn.Module):\n"
           "    def forward(self, cfg):\n        return torch.ones(cfg['n'])\n")
    assert codes_at(src, "DL006") == [(5, "DL006")]
    assert fix(src, "DL006", unsafe_fixes=True) == src  # no tensor argument, no parameters: no fix


def test_dl006_normal_tensor_overload_is_not_flagged():
    src = ("import torch\nfrom torch import nn\nclass M(nn.Module):\n"
           "    def forward(self, mu):\n        return torch.normal(mu, torch.ones_like(mu))\n")
    assert codes_at(src, "DL006") == []


def test_dl005_skips_guarded_and_forwarded_loads():
    src = ("import torch\nuse_cuda = torch.cuda.is_available()\nif use_cuda:\n    s = torch.load('a')\n"
           "def f(p, *a, **k):\n    return torch.load(p, *a, **k)\n")
    assert codes_at(src, "DL005") == []


def test_dl005_uses_the_files_device_variable_and_never_shadows():
    src = "import torch\ndevice = 3\nstate = torch.load('m.pt')\n"
    out = fix(src, "DL005", unsafe_fixes=True)
    assert "torch_device = torch.device(" in out
    assert out.endswith("state = torch.load('m.pt', map_location=torch_device)\n")
