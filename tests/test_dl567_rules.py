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
    src = ("import torch\ndevice = torch.device('cuda:0')\nx = torch.zeros(\n    2,\n    3,\n"
           "    dtype=torch.float64,\n).to(device)\n")
    assert fix(src, "DL007") == ("import torch\ndevice = torch.device('cuda:0')\nx = torch.zeros(\n    2,\n"
                                 "    3,\n    dtype=torch.float64,\n    device=device,\n)\n")


def test_dl007_keeps_keyword_spacing_and_comments():
    src = "import torch\ndevice = 'cuda:0'\nx = torch.ones(2, dtype = torch.int64).to(device)  # note\n"
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


TEST_MODEL = ("import torch\n\n\nclass TinyLM(torch.nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.w = torch.nn.Parameter(torch.tensor(0.5))\n\n"
              "    def forward(self, ids):\n        return self.w * torch.ones(*ids.shape, 3)\n\n\n"
              "def test_logits_shape():\n    assert TinyLM()(torch.ones(2, 4)).shape == (2, 4, 3)\n")


SETTINGS_DL006 = Settings(select=registry.resolve(["DL006"]))


def test_dl006_a_test_modules_model_that_never_meets_a_device():
    # pytest runs the module's own model on the host: nothing in the file names a device
    assert [d.code for d in lint_source(TEST_MODEL.encode(), "tests/test_lm.py", SETTINGS_DL006).diagnostics] == []
    # the same model in a script, or in a test that moves it, is reported
    assert [d.line for d in lint_source(TEST_MODEL.encode(), "lm.py", SETTINGS_DL006).diagnostics] == [10]
    moved = TEST_MODEL.replace("TinyLM()(torch.ones(2, 4))", "TinyLM().cuda()(torch.ones(2, 4).cuda())")
    assert [d.line for d in lint_source(moved.encode(), "tests/test_lm.py", SETTINGS_DL006).diagnostics] == [10]


def test_dl006_a_random_draw_reduced_to_a_python_condition():
    src = ("import torch\nfrom torch import nn\nclass Aug(nn.Module):\n    def forward(self, x):\n"
           "        if self.training and (torch.rand(1) <= self.p).all():\n            x = x.flip(0)\n"
           "        if bool(torch.rand(1) < self.p):\n            x = x * 2\n"
           "        keep = (torch.rand(x.shape[0]) < self.p).float()\n        return x * keep[:, None]\n")
    # the first two only steer Python control flow; the mask meets the input on its device
    assert codes_at(src, "DL006") == [(9, "DL006")]


def test_dl006_a_host_build_pinned_and_moved_by_the_next_statement():
    src = ("import torch\nfrom torch import nn\nclass Enc(nn.Module):\n    def forward(self, boxes, h, w):\n"
           "        scale = torch.tensor([w, h, w, h], dtype=boxes.dtype)\n"
           "        scale = scale.pin_memory().to(device=boxes.device, non_blocking=True)\n"
           "        return boxes * scale\n")
    assert codes_at(src, "DL006") == []
    # pinned and left on the host: it meets the boxes on their device
    assert codes_at(src.replace(".to(device=boxes.device, non_blocking=True)", ""), "DL006") == [(5, "DL006")]


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
    src = "import torch\ndevice = 3\nstate = torch.load('m.pt')\nw = state['w'].cuda()\n"
    out = fix(src, "DL005", unsafe_fixes=True)
    assert "torch_device = torch.device(" in out
    assert out.endswith("state = torch.load('m.pt', map_location=torch_device)\nw = state['w'].cuda()\n")


def test_dl005_keeps_a_host_program_on_the_host():
    # seen on an H100: a TorchScript module mapped to a new device variable met host inputs
    src = "import torch\nm = torch.jit.load('m.pt')\nprint(m(torch.ones(2)))\n"
    out = fix(src, "DL005", unsafe_fixes=True)
    assert out == "import torch\nm = torch.jit.load('m.pt', map_location='cpu')\nprint(m(torch.ones(2)))\n"


def messages(src: str, code: str) -> list[tuple[int, str]]:
    diags = lint_source(src.encode(), "t.py", Settings(select=registry.resolve((code,)))).diagnostics
    return [(d.line, d.message) for d in diags if d.code == code]


# ---- issue 15.7 / 16.6: DL006 ------------------------------------------------------------
DL006_HOST = """\
import torch
from torch import nn


class M(nn.Module):
    def forward(self, x):
        idx = torch.arange(x.size(0)).long().cuda()
        order = torch.arange(4)
        if x.is_cuda:
            order = order.cuda()
        zero = torch.zeros(())
        cols = torch.arange(2)
        y = x[:, cols] + zero
        n = torch.tensor(len(x))
        print(torch.ones(2))
        return {"loss": y.sum(), "count": n, "ones": torch.ones(3)}
"""


def test_dl006_host_values_and_placed_casts_are_not_flagged():
    assert codes_at(DL006_HOST, "DL006") == []


def test_dl006_still_flags_a_factory_combined_with_the_input():
    src = DL006_HOST.replace("        zero = torch.zeros(())\n", "        zero = torch.zeros(2)\n")
    assert codes_at(src, "DL006") == [(11, "DL006")]
    src = DL006_HOST.replace("        y = x[:, cols] + zero\n", "        y = x[:, cols] + zero + cols\n")
    assert codes_at(src, "DL006") == [(12, "DL006")]  # `cols` is not only an index any more


SCALES = """\
import torch
from torch import nn
from torch.nn import functional as F


class Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.paths = nn.ModuleList([nn.Conv2d(1, 1, 3)])

    def forward(self, x, ref):
        scales = 1 / (2 ** torch.arange(0, len(self.paths) + 1).float())
        refs = [F.interpolate(ref, scale_factor=s.item()) for s in scales[1:]]
        return self.paths[0](x), refs
"""


def test_dl006_a_tensor_iterated_through_a_slice_stays_on_the_host():
    """`for s in scales[1:]` reads the elements in Python (`s.item()` as a scale factor), as
    iterating the whole tensor does: it never meets a device tensor. Trap: the same tensor
    combined with the input is reported."""
    assert codes_at(SCALES, "DL006") == []
    src = SCALES.replace("        return self.paths[0](x), refs\n", "        return self.paths[0](x) * scales[0], refs\n")
    assert codes_at(src, "DL006") == [(12, "DL006")]


# ---- issue 16.5 / misses / fix layout: DL007 -----------------------------------------
def test_dl007_new_keyword_keeps_a_one_per_line_call_without_trailing_whitespace():
    src = "import torch\nx = torch.ones(\n    2,\n    3\n).cuda()\n"
    out = fix(src, "DL007")
    assert "x = torch.ones(\n    2,\n    3,\n    device=device\n)\n" in out
    assert not any(line != line.rstrip() for line in out.splitlines())


def test_dl007_never_squeezes_the_new_keyword():
    src = "import torch\ndevice = torch.device('cuda:0')\nx = torch.zeros(2,3,).to(device)\n"
    assert fix(src, "DL007").endswith("x = torch.zeros(2,3, device=device,)\n")


def test_dl007_data_tensors_are_not_flagged_but_computed_ones_are():
    src = ("import torch\ndef f(data, x):\n    a = torch.tensor(data).to(x.device)\n"
           "    b = torch.as_tensor(data).cuda()\n    c = torch.randn(4, 2).cuda()\n    return a, b, c\n")
    assert codes_at(src, "DL007") == [(5, "DL007")]


def test_dl007_host_noise_drawn_in_a_loop_is_found():
    src = ("import torch\nfor step in range(3):\n    noise = torch.randn(8, 2).cuda()\n"
           "    labels = torch.randint(0, 3, (8,)).cuda()\n")
    assert codes_at(src, "DL007") == [(3, "DL007"), (4, "DL007")]


# ---- issues 15.6 / 16.4: DL008 ----------------------------------------------------------
LOOP = """\
import torch
model.cuda()
for x, y in train_loader:
    pred = model(x.cuda())
    loss = pred.sum()
    loss.backward()
    optimizer.step()
{line}
"""


def test_dl008_per_step_print_says_log_every_n_steps():
    [(line, msg)] = messages(LOOP.format(line="    print(step, loss.item())"), "DL008")
    assert line == 8 and "log every N steps" in msg and "after the loop" not in msg


def test_dl008_one_finding_per_expression():
    src = LOOP.format(line="    hits += (pred.argmax(1).cpu() == y.cuda().cpu()).sum().item()")
    assert [line for line, _ in messages(src, "DL008")] == [8]


def test_dl008_silent_on_a_cpu_only_script():
    src = LOOP.replace("model.cuda()\n", "").replace("x.cuda()", "x").format(line="    total += loss.item()")
    assert messages(src, "DL008") == []
    assert len(messages(LOOP.format(line="    total += loss.item()"), "DL008")) == 1


def test_dl008_a_batch_value_moved_in_the_expression_is_still_reported():
    src = LOOP.format(line="    total += y.cuda().sum().item()")
    assert [line for line, _ in messages(src, "DL008")] == [8]


def test_dl006_random_draws_read_by_python_are_not_flagged():
    src = """\
import torch
from torch import nn


class Aug(nn.Module):
    def forward(self, img):
        if torch.rand(1) < 0.5 and not torch.randint(2, (1,)):
            return img
        area = 4 * torch.empty(1).uniform_(0.1, 0.3).item()
        ratio = torch.exp(torch.empty(1).uniform_(-1.0, 1.0)).item()
        return img * area * ratio, self.space(4)

    def space(self, n):
        s = {"rotate": (torch.linspace(0.0, 30.0, n), True)}
        s.update({"posterize": (8 - (torch.arange(n) / 4).round().int(), False)})
        sub = torch.randperm(n)[:2]
        return s, img[sub]
"""
    assert codes_at(src, "DL006") == []
    flagged = src.replace("return img * area * ratio", "return img * torch.rand(1) * area * ratio")
    assert codes_at(flagged, "DL006") == [(11, "DL006")]


def test_dl008_a_value_read_only_to_be_logged_gets_the_logging_advice():
    src = LOOP.format(line="    v = loss.item()\n    logger.info(f'loss {v:.3f}')")
    [(line, msg)] = messages(src, "DL008")
    assert line == 8 and "log every N steps" in msg
    kept = LOOP.format(line="    v = loss.item()\n    history.append(v)")
    [(_, msg)] = messages(kept, "DL008")
    assert "read it once after the loop" in msg


def test_dl006_follows_a_returned_value_to_its_callers_in_the_class():
    src = """\
import torch
from torch import nn


class Jitter(nn.Module):
    @staticmethod
    def get_params(n):
        order = torch.randperm(n)
        probs = torch.rand((2,))
        return order, probs

    def forward(self, img):
        order, probs = self.get_params(4)
        for i in order:
            if probs[0] <= 0.5:
                img = img + i
        mask = torch.empty(3, 3)
        mask.fill_(torch.tensor(torch.finfo(img.dtype).min))
        return img * mask
"""
    assert codes_at(src, "DL006") == [(17, "DL006")]
    used = src.replace("img = img + i", "img = img + probs")  # `probs` meets the input
    assert codes_at(used, "DL006") == [(9, "DL006"), (17, "DL006")]


def test_dl006_values_placed_by_every_caller_or_cached_are_not_flagged():
    src = """\
import functools
import torch
from torch import nn


class Net(nn.Module):
    def make_mask(self, n):
        mask = torch.triu(torch.ones(n, n), diagonal=1)
        return mask

    @functools.lru_cache(maxsize=8)
    def table(self, n):
        return torch.arange(n)

    def forward(self, x):
        mask = self.make_mask(x.size(0)).to(x.device)
        return x @ mask + self.table(3).sum()
"""
    assert codes_at(src, "DL006") == []
    unplaced = src.replace("self.make_mask(x.size(0)).to(x.device)", "self.make_mask(x.size(0))")
    assert codes_at(unplaced, "DL006") == [(8, "DL006")]


def test_dl006_a_table_filled_on_the_host_and_returned_placed_is_not_flagged():
    src = """\
import torch
from torch import nn


class Attn(nn.Module):
    def forward(self, x):
        rel = torch.zeros(1, 4, 4, 3)
        ind = x.new_ones(4, 4)
        rel[:, :, :, 0] = ind
        return x + rel.to(device=x.device, dtype=x.dtype).sum()
"""
    assert codes_at(src, "DL006") == []
    mixed = src.replace("rel[:, :, :, 0] = ind", "rel = rel + x.sum()")
    assert codes_at(mixed, "DL006") == [(7, "DL006")]


HOST_SCRIPT = """\
import torch
from torch import nn


class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(4, 8)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(1), 8)
        return self.rnn(x, h0)


model = RNN(){move}
for step in range(3):
    out, _ = model(torch.randn(5, 2, 4){move})
"""


@pytest.mark.parametrize("move, found", [
    # a script that never names a device runs its module on the host: the factory is right there
    ("", []),
    # the same script moving the module to the GPU leaves the hidden state behind
    (".cuda()", [(11, "DL006")]),
])
def test_dl006_in_a_script_that_never_names_a_device(move, found):
    assert codes_at(HOST_SCRIPT.format(move=move), "DL006") == found


LOADED_TO_ARRAYS = """\
import numpy as np
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
net = torch.nn.Linear(2, 2).to(device)

grads = torch.load("grads.pt")
data = np.concatenate([np.array(k) for k in grads], axis=0)

other = torch.load("other.pt")
rows = [k * 2 for k in other]
print(np.array(rows), data)
"""


def test_dl005_a_loaded_list_whose_elements_become_arrays_holds_host_tensors():
    """`[np.array(k) for k in grads]`: `np.array` raises on a CUDA tensor, so the file holds
    host tensors. Trap: another load whose loop only does arithmetic (its loop name spelled the
    same) keeps its finding; the conversion counts only inside the loop over that load."""
    assert codes_at(LOADED_TO_ARRAYS, "DL005") == [(10, "DL005")]


def test_dl007_a_host_tensor_moved_to_the_cpu_copies_nothing():
    """`.to("cpu")` of a fresh host tensor, or `.to(DEVICE)` with `DEVICE = torch.device("cpu")`
    its only binding, returns the same tensor: nothing is copied. Trap: a name that may also be
    bound to a GPU keeps the finding."""
    src = ("import torch\ndef draw(n, boxes):\n    return torch.cat([boxes, torch.zeros(n, 1).to('cpu')], 1)\n\n"
           "def export(n):\n    DEVICE = torch.device('cpu')\n    return torch.zeros(2, n).to(torch.int32).to(DEVICE)\n")
    assert codes_at(src, "DL007") == []
    src = ("import torch\ndef run(n, gpu):\n    device = 'cpu'\n    if gpu:\n        device = 'cuda'\n"
           "    return torch.zeros(2, n).to(device)\n")
    assert codes_at(src, "DL007") == [(6, "DL007")]


HANDED = """\
import torch
from torch import nn


def cuda_variable(tensor):
    if torch.cuda.is_available():
        return tensor.cuda()
    return tensor


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, hidden, enc):
        scores = cuda_variable(torch.zeros(len(enc)))
        return scores + self.fc(hidden).sum()
"""


def test_dl006_a_factory_handed_to_a_function_that_moves_it_is_placed():
    """`cuda_variable(torch.zeros(n))`: the file's own function moves its argument to the GPU
    at once, as `.cuda()` on the factory would. Trap: a function that only casts it leaves a
    host tensor, reported."""
    assert codes_at(HANDED, "DL006") == []
    assert codes_at(HANDED.replace("return tensor.cuda()", "return tensor.float()"), "DL006") == [(17, "DL006")]
