"""DL010 missing-device-placement: behaviour the fixtures do not pin down on their own."""

from __future__ import annotations

import contextlib
import io
import textwrap

import pytest

from devlint.diagnostic import Applicability
from devlint.engine import Settings, fix_source, lint_source

SEL = frozenset({"DL010"})


def lint(src: str, filename: str = "train.py", **kw):
    return lint_source(textwrap.dedent(src).encode(), filename, Settings(select=SEL, **kw)).diagnostics


def fix(src: str, filename: str = "train.py", **kw) -> str:
    out = fix_source(textwrap.dedent(src).encode(), filename, Settings(select=SEL, **kw))
    assert out.converged
    return out.source.decode()


def run(src: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(src, "<fixture>", "exec"), {"__name__": "__main__"})
    return buf.getvalue()


SCRIPT = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(8, 3), torch.randn(8, 1)), batch_size=4)
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
print(round(loss.item(), 5))
"""


def test_script_is_reported_once_at_the_model():
    diags = lint(SCRIPT)
    assert [(d.code, d.line) for d in diags] == [("DL010", 7)]
    assert "`model`" in diags[0].message and "moving the batch in 1 loop" in diags[0].message
    assert diags[0].fix.applicability is Applicability.SAFE


@pytest.mark.parametrize("name", ["test_train.py", "train_test.py", "conftest.py"])
def test_test_files_are_not_reported(name):
    assert lint(SCRIPT, filename=f"pkg/{name}") == []


def test_accelerator_style_ports_and_keeps_the_output():
    fixed = fix(SCRIPT, fix_style="accelerator")
    assert ("device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() "
            'else torch.device("cpu")') in fixed
    assert "model = nn.Linear(3, 1).to(device)" in fixed
    assert "    x, y = x.to(device), y.to(device)\n" in fixed
    assert lint(fixed) == []
    assert run(fixed) == run(SCRIPT)


def test_device_mentioned_only_in_a_comment_still_reported():
    src = SCRIPT.replace("model = nn.Linear(3, 1)", "# TODO: pick a device\nmodel = nn.Linear(3, 1)")
    assert [d.code for d in lint(src)] == ["DL010"]


@pytest.mark.parametrize("aware", [
    "torch.set_default_device('cpu')\n",
    "model = model.to('cpu')\n",
    "print(torch.cuda.is_available())\n",
    "ckpt = torch.load('x.pt', map_location='cpu') if False else None\n",
])
def test_any_device_handling_means_the_file_was_ported(aware):
    src = SCRIPT.replace("opt = ", aware + "opt = ")
    assert lint(src) == []


def test_dtype_conversions_are_not_device_handling():
    src = SCRIPT.replace("loss = nn.functional.mse_loss(model(x), y)",
                         "loss = nn.functional.mse_loss(model(x.to(torch.float32)), y.to(dtype=torch.float32))")
    assert [d.code for d in lint(src)] == ["DL010"]


def test_unknown_batch_structure_offers_no_fix_and_names_the_batch():
    """A port that cannot move the batch the model reads would be incomplete: no fix at all."""
    src = """\
    import torch
    from torch import nn
    from torch.utils.data import DataLoader
    from mydata import make_dataset

    model = nn.Linear(3, 1)
    for batch in DataLoader(make_dataset()):
        print(model(batch.features))
    """
    (d,) = lint(src)
    assert d.fix is None
    assert "`batch` would stay on the host (cannot tell the structure of the batch" in d.message
    assert fix(src, unsafe_fixes=True) == textwrap.dedent(src)


def test_loader_over_unknown_dataset_is_unsafe_but_moves_the_batch():
    src = """\
    import torch
    from torch import nn
    from torch.utils.data import DataLoader
    from mydata import make_dataset

    model = nn.Linear(3, 1)
    for x, y in DataLoader(make_dataset()):
        print(model(x) - y)
    """
    (d,) = lint(src)
    assert d.fix.applicability is Applicability.UNSAFE
    assert "may yield non-tensors" in d.fix.message
    assert "    x, y = x.to(device), y.to(device)\n" in fix(src, unsafe_fixes=True)


def test_factory_with_a_cpu_generator_offers_no_fix():
    src = """\
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(0)
    model = nn.Linear(3, 1)
    x = torch.randn(4, 3, generator=g)
    print(model(x))
    """
    (d,) = lint(src)
    assert d.fix is None
    assert "`x` would stay on the host (a factory with a CPU `generator=`" in d.message


def test_list_batch_uses_a_fresh_name():
    src = """\
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    t = 3
    model = nn.Linear(3, 1)
    for batch in DataLoader(TensorDataset(torch.randn(4, 3)), batch_size=2):
        print(model(batch[0]).shape, t)
    """
    fixed = fix(src)
    assert "    batch = [item.to(device) for item in batch]\n" in fixed
    assert run(fixed) == run(textwrap.dedent(src))


def test_no_torch_import_adds_one():
    src = """\
    from torch import nn, randn

    model = nn.Linear(3, 1)
    print(model(randn(2, 3)).shape)
    """
    fixed = fix(src)
    assert fixed.startswith("from torch import nn, randn\nimport torch\ndevice = torch.device(")
    assert "print(model(randn(2, 3, device=device)).shape)" in fixed
    assert run(fixed) == run(textwrap.dedent(src))


def test_torch_alias_is_used():
    src = """\
    import torch as T
    import torch.nn as nn

    net = nn.Linear(3, 1)
    h = T.zeros(2, 3)
    print(net(h).sum().item())
    """
    fixed = fix(src)
    assert 'device = T.device("cuda" if T.cuda.is_available() else "cpu")' in fixed
    assert "h = T.zeros(2, 3, device=device)" in fixed


def test_host_reads_do_not_make_a_tensor_device_bound():
    # `x.size(0)` and `len(x)` are Python ints: a factory sized from them is not on the device
    src = """\
    import torch
    from torch import nn

    model = nn.Linear(3, 1)
    x = torch.randn(4, 3)
    out = model(x)
    idx = torch.arange(out.size(0))
    print(idx.numpy(), out.detach().numpy().shape)
    """
    fixed = fix(src)
    assert "idx = torch.arange(out.size(0))\n" in fixed
    assert "idx.numpy()" in fixed and "out.detach().cpu().numpy()" in fixed


def test_imported_model_class_needs_module_usage():
    called_only = textwrap.dedent("""\
    import torch
    from mymodels import Net

    model = Net()
    print(model(torch.randn(2, 3)))
    """)
    assert lint(called_only) == []  # `Net` could be any callable
    trained = called_only.replace("print(", "model.eval()\nprint(")
    assert [d.code for d in lint(trained)] == ["DL010"]


def test_second_fix_is_a_no_op_and_nothing_is_left():
    fixed = fix(SCRIPT)
    assert fix(fixed) == fixed
    assert lint(fixed) == []


def test_the_porting_guide_example_is_what_fix_produces():
    import re
    from pathlib import Path

    guide = (Path(__file__).parent.parent / "docs" / "porting.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", guide, re.S)
    before, after = blocks[1], blocks[2]
    assert fix(before) == after
    assert run(after) == run(before)


def test_numpy_reading_a_device_tensor_makes_the_fix_unsafe():
    src = """\
    import numpy as np
    import torch
    from torch import nn

    model = nn.Linear(3, 1)
    out = model(torch.randn(2, 3)).detach()
    print(np.asarray(out), np.asarray([1, 2]))
    """
    (d,) = lint(src)
    assert d.fix.applicability is Applicability.UNSAFE
    assert "`np.asarray` reads values that are now on the device" in d.fix.message


def test_ignored_batch_items_are_not_moved():
    src = """\
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    model = nn.Linear(3, 1)
    for x, _ in DataLoader(TensorDataset(torch.randn(4, 3), torch.randn(4)), batch_size=2):
        print(model(x).shape)
    """
    assert "    x = x.to(device)\n" in fix(src)


def test_model_handed_to_an_imported_trainer_is_unsafe():
    src = """\
    import torch
    from torch import nn
    from engine import train_one_epoch

    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        train_one_epoch(model, optimizer)
    """
    (d,) = lint(src)
    assert d.fix.applicability is Applicability.UNSAFE
    assert "passed to `train_one_epoch`" in d.fix.message


def test_the_report_is_at_the_model_not_the_loss():
    src = """\
    import torch
    from torch import nn

    criterion = nn.MSELoss()
    model = nn.Linear(3, 1)
    print(criterion(model(torch.randn(2, 3)), torch.zeros(2, 1)).item())
    """
    (d,) = lint(src)
    assert d.line == 5
    fixed = fix(src)
    assert "criterion = nn.MSELoss()\n" in fixed
    assert "torch.zeros(2, 1, device=device)" in fixed


def test_helpers_that_never_see_the_model_are_left_alone():
    src = """\
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset


    def mean_of(loader):
        total = 0.0
        for x, y in loader:
            total += x.sum().item()
        return total


    def fit(net, loader):
        for x, y in loader:
            print(net(x).shape)


    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(4, 3), torch.randn(4)), batch_size=2)
    model = nn.Linear(3, 1)
    print(mean_of(loader))
    fit(model, loader)
    """
    fixed = fix(src)
    assert fixed.count("x, y = x.to(device), y.to(device)") == 1
    assert "def fit(net, loader):\n    for x, y in loader:\n        x, y = x.to(device), y.to(device)\n" in fixed
    assert "    for x, y in loader:\n        total += x.sum().item()\n" in fixed
    assert run(fixed) == run(textwrap.dedent(src))


def test_message_uses_the_configured_device_name():
    """The message's promises name the variable the fix inserts (issue 15 item 3)."""
    src = """\
    import torch
    from torch import nn
    model = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    print(model(x).detach().numpy())
    """
    (d,) = lint(src, device_name="dev")
    assert "`model.to(dev)`" in d.message and "`device=dev` on 1 new tensor" in d.message
    fixed = fix(src, device_name="dev")
    assert "model = nn.Linear(4, 2).to(dev)" in fixed and "torch.randn(3, 4, device=dev)" in fixed


def test_library_smoke_test_main_is_not_a_script():
    """A model library whose __main__ block only checks a shape is silent; one that trains is not."""
    lib = """\
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x)

    if __name__ == "__main__":
        net = Net()
        print(net(torch.randn(3, 4)).shape)
    """
    assert lint(lib, filename="net.py") == []
    trains = textwrap.dedent(lib) + (
        "    opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "    net(torch.randn(3, 4)).sum().backward()\n"
        "    opt.step()\n"
    )
    assert [d.code for d in lint(trains, filename="net.py")] == ["DL010"]
