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


# ---- a port is complete or not offered (issue item 1) -----------------------------------------

def test_data_slice_used_after_the_loop_is_moved_where_the_model_meets_it():
    """`X` feeds the TensorDataset and, sliced, the model: the data set stays on the host (its
    batches move in the loop) and `X[:4]` moves at its use."""
    from fixtures_lib import FIXTURES

    src = (FIXTURES / "DL010" / "data_slice_direct_use" / "before.py").read_text()
    (d,) = lint(src)
    assert d.fix is not None and d.fix.applicability is Applicability.SAFE
    assert "`.to(device)` at 1 direct use of data-set tensors" in d.message
    fixed = fix(src)
    assert "print([round(v, 3) for v in model(X[:4].to(device)).squeeze(1).tolist()])" in fixed
    assert "X = torch.randn(32, 3)\n" in fixed  # the data set itself is not moved


@pytest.mark.parametrize("use, why", [
    # `X` and a new tensor under one name bound by a loop: neither a creation site nor one use to move
    ("for part in (X, torch.zeros(2, 3)):\n    print(model(part).sum().item())\n",
     "`X` would stay on the host (it also feeds `TensorDataset` and is mixed with other values)"),
    # `X` updated in place with the model's output: it cannot move where it is used
    ("with torch.no_grad():\n    X += model(X).mean()\n    print(X.sum().item())\n",
     "`X` would stay on the host (assigned in place)"),
])
def test_data_set_tensor_that_cannot_move_at_its_use_offers_no_fix(use, why):
    src = textwrap.dedent("""\
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    X = torch.randn(8, 3)
    loader = DataLoader(TensorDataset(X, X.sum(1, keepdim=True)), batch_size=4)
    model = nn.Linear(3, 1)
    for xb, yb in loader:
        nn.functional.mse_loss(model(xb), yb).backward()
    """) + use
    (d,) = lint(src)
    assert d.fix is None and why in d.message, d.message


def test_value_from_an_unknown_function_offers_no_fix():
    src = """\
    import torch
    from torch import nn
    from mydata import load_features

    model = nn.Linear(3, 1)
    feats = load_features()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(2):
        model(feats).sum().backward()
        opt.step()
    """
    (d,) = lint(src)
    assert d.fix is None
    assert "`feats` would stay on the host (made by `load_features`)" in d.message


def test_module_level_tensors_used_in_a_function_are_placed():
    src = """\
    import torch
    from torch import nn

    torch.manual_seed(0)
    x = torch.linspace(-1, 1, 20).unsqueeze(1)
    y = x.pow(2) + 0.1 * torch.rand(x.size())


    def main():
        net = nn.Linear(1, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        loss_fn = nn.MSELoss()
        for t in range(3):
            loss = loss_fn(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(round(loss.item(), 4))


    main()
    """
    (d,) = lint(src)
    assert d.fix.applicability is Applicability.SAFE
    fixed = fix(src)
    assert "x = torch.linspace(-1, 1, 20, device=device).unsqueeze(1)" in fixed
    assert "torch.rand(x.size(), device=device)" in fixed
    assert run(fixed) == run(textwrap.dedent(src))


def test_a_helper_parameter_is_resolved_through_its_callers():
    src = """\
    import torch
    from torch import nn


    def evaluate(net, data):
        return net(data).mean().item()


    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    x_val = torch.randn(5, 3)
    print(round(evaluate(model, x_val), 4))
    """
    fixed = fix(src)
    assert "x_val = torch.randn(5, 3, device=device)" in fixed
    assert run(fixed) == run(textwrap.dedent(src))


def test_state_rebound_from_the_model_output_is_still_created_on_the_device():
    """`h = torch.zeros(...)` then `out, h = rnn(x, h)`: `h` is not on the device just because
    one of its bindings is the model's output (issue item 3)."""
    src = """\
    import torch
    from torch import nn

    rnn = nn.GRU(4, 8)
    opt = torch.optim.SGD(rnn.parameters(), lr=0.1)
    for step in range(2):
        seq = torch.randn(5, 2, 4)
        h = torch.zeros(1, 2, 8)
        out, h = rnn(seq, h)
        out.sum().backward()
        opt.step()
    """
    (d,) = lint(src)
    assert "`device=device` on 2 new tensors" in d.message
    fixed = fix(src)
    assert "seq = torch.randn(5, 2, 4, device=device)" in fixed
    assert "h = torch.zeros(1, 2, 8, device=device)" in fixed


# ---- the message promises exactly what the fix does (issue item 2) ---------------------------

def _promised(message: str, dev: str) -> dict:
    import re

    m = re.search(r"\(missing: (.*)\)$", message)
    assert m, message
    parts = m.group(1).split("; ")
    out = {"models": [], "batch": 0, "device": 0, "load": 0, "cpu": 0, "to": 0, "legacy": 0, "use": 0, "map": 0}
    for p in parts[1:]:
        if p.startswith("moving the batch in"):
            out["batch"] = int(p.split()[4])
        elif p.startswith(f"`device={dev}` on"):
            out["device"] = int(p.split()[2])
        elif p.startswith(f"`map_location={dev}` on"):
            out["load"] = int(p.split()[2])
        elif p.startswith("`.cpu()` before"):
            out["cpu"] = int(p.split()[2])
        elif p.startswith(f"`.to({dev})` after") and "legacy tensor constructor" in p:
            out["legacy"] = int(p.split()[2])
        elif p.startswith(f"`.to({dev})` after"):
            out["to"] = int(p.split()[2])
        elif p.startswith(f"`.to({dev})` on what"):
            out["map"] = int(p.split()[3])
        elif p.startswith(f"`.to({dev})` at") and "direct use" in p:
            out["use"] = int(p.split()[2])
        else:
            out["models"] = re.findall(r"`(\w+)\.to\(" + dev + r"\)`", p)
            assert out["models"], p
    assert parts[0] == "a device variable"
    return out


def _batch_moves(before: str, after: str, dev: str) -> int:
    """New statements `x, y = x.to(dev), y.to(dev)` / `b = {k: v.to(dev) ...}` / `b = [t.to(dev) ...]`."""
    import re

    move = re.compile(r"^\s+(\w+)(, \w+)* = (\{\w+: \w+|\[\w+|\1)\.to\(" + dev + r"\)")
    old = set(before.splitlines())
    return sum(1 for ln in after.splitlines() if ln not in old and move.match(ln))


def _fixable_cases():
    from fixtures_lib import discover_cases

    return [c for c in discover_cases("DL010") if not c.trap and not c.extra.get("report_only")]


@pytest.mark.parametrize("dev", ["device", "dev"])
@pytest.mark.parametrize("case", _fixable_cases(), ids=lambda c: c.name)
def test_message_promises_match_the_fix(case, dev):
    import re

    before = case.before_path.read_text()
    (d,) = lint(before, filename=str(case.before_path), device_name=dev, unsafe_fixes=case.unsafe)
    promised = _promised(d.message, dev)
    after = fix(before, filename=str(case.before_path), device_name=dev, unsafe_fixes=case.unsafe)

    def grew(s: str) -> int:
        return after.count(s) - before.count(s)

    assert grew(f"device={dev})") + grew(f"device={dev},") == promised["device"]
    assert grew(f"map_location={dev}") == promised["load"]
    assert grew(".cpu().numpy()") == promised["cpu"]
    assert grew(f"from_numpy") == 0 and sum(
        1 for line in after.splitlines() if "from_numpy(" in line and f".to({dev})" in line) == promised["to"]
    assert _batch_moves(before, after, dev) == promised["batch"]
    legacy = r"(?<!lambda \w: )torch\.(?:[A-Z]\w*)?Tensor\([^()]*(?:\([^()]*\)[^()]*)*\)\.to\(" + dev + r"\)"
    assert len(re.findall(legacy, after)) - len(re.findall(legacy, before)) == promised["legacy"]
    # every `.to(dev)` the fix adds is a promised one: models, batch moves, from_numpy, legacy, direct uses
    batch_tos = sum(ln.count(f".to({dev})") for ln in after.splitlines()
                    if ln not in set(before.splitlines()) and re.match(r"^\s+\w+(, \w+)* = ", ln)
                    and _batch_moves("", ln, dev))
    assert grew(f".to({dev})") == len(promised["models"]) + batch_tos + promised["to"] + promised["legacy"] + \
        promised["use"] + promised["map"]
    assert grew("map(lambda ") == promised["map"]
    for name in promised["models"]:
        assert any(ln.lstrip().startswith(f"{name} = ") and ln.rstrip().endswith(f".to({dev})")
                   for ln in after.splitlines()), name
    assert f"{dev} = torch.device(" in after or f"{dev} = T.device(" in after


def test_configured_device_name_reaches_the_message_and_the_fix(tmp_path, monkeypatch):
    """`device-name` in `[tool.devlint]`, through the real CLI."""
    from click.testing import CliRunner

    from devlint.cli import main

    (tmp_path / "pyproject.toml").write_text('[tool.devlint]\ndevice-name = "accel"\n')
    (tmp_path / "train.py").write_text(SCRIPT.replace("model = nn.Linear(3, 1)",
                                                      "model = nn.Linear(3, 1)\nw = torch.ones(1)"))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["check", "--select", "DL010", "--no-cache", "train.py"])
    assert "`model.to(accel)`" in res.output and "moving the batch in 1 loop" in res.output
    res = CliRunner().invoke(main, ["check", "--select", "DL010", "--no-cache", "--fix", "train.py"])
    fixed = (tmp_path / "train.py").read_text()
    assert 'accel = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in fixed
    assert "    x, y = x.to(accel), y.to(accel)\n" in fixed


# ---- only scripts that train or evaluate (issue item 4) ----------------------------------------

MODEL_LIB = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)

"""


@pytest.mark.parametrize("smoke", [
    # the model-zoo layout: a `test()` helper nobody calls on import
    "def test():\n    net = Net()\n    y = net(torch.randn(2, 4))\n    print(y.size())\n",
    # a __main__ block that checks a few input shapes
    "if __name__ == '__main__':\n    net = Net()\n    for shape in [(1, 4), (3, 4)]:\n"
    "        print(net(torch.randn(*shape)).shape)\n",
    # a __main__ block calling a main() that only runs the model once
    "def main():\n    net = Net()\n    print(net(torch.randn(2, 4)).shape)\n\n\nif __name__ == '__main__':\n    main()\n",
])
def test_model_library_with_a_smoke_test_is_silent(smoke):
    assert lint(MODEL_LIB + smoke, filename="models/net.py") == []


@pytest.mark.parametrize("script", [
    # evaluation over a loader
    "if __name__ == '__main__':\n    from torch.utils.data import DataLoader, TensorDataset\n    net = Net()\n"
    "    for (x,) in DataLoader(TensorDataset(torch.randn(4, 4)), batch_size=2):\n        print(net(x).shape)\n",
    # a training step in a function the __main__ block calls
    "def main():\n    net = Net()\n    opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
    "    net(torch.randn(2, 4)).sum().backward()\n    opt.step()\n\n\nif __name__ == '__main__':\n    main()\n",
    # the smoke test run on import: a script
    "net = Net()\nprint(net(torch.randn(2, 4)).shape)\n",
])
def test_model_library_that_trains_or_evaluates_is_reported(script):
    assert [d.code for d in lint(MODEL_LIB + script, filename="models/net.py")] == ["DL010"]


def test_the_leftover_is_named_as_the_model_meets_it():
    """The old MNIST tutorial: test images taken from a torchvision dataset's attribute."""
    src = """\
    import torch
    import torchvision
    from torch import nn
    from torch.utils.data import DataLoader

    train_data = torchvision.datasets.MNIST(root="./mnist", train=True)
    test_data = torchvision.datasets.MNIST(root="./mnist", train=False)
    test_x = torch.unsqueeze(test_data.data, dim=1).float()[:2000] / 255.0
    cnn = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    opt = torch.optim.Adam(cnn.parameters())
    for x, y in DataLoader(train_data, batch_size=50):
        nn.functional.cross_entropy(cnn(x), y).backward()
        opt.step()
    print(cnn(test_x).argmax(1)[:10])
    """
    (d,) = lint(src)
    assert d.fix is None
    assert "`test_x` would stay on the host (made by `torchvision.datasets.MNIST`)" in d.message


@pytest.mark.parametrize("make_x, why", [
    # `.type(torch.FloatTensor)` converts to a CPU tensor type: on a GPU it moves `x` back
    ("x = torch.cat((torch.zeros(4, 2), torch.ones(4, 2))).type(torch.FloatTensor)",
     "`x` would stay on the host (converted to a CPU tensor type)"),
    # a legacy constructor over unpacked arguments: which form it is cannot be told
    ("shape = (8, 2)\nx = torch.FloatTensor(*shape).fill_(0.5)",
     "`x` would stay on the host (a CPU tensor type `torch.FloatTensor` with unpacked arguments)"),
])
def test_cpu_tensor_types_offer_no_fix(make_x, why):
    src = textwrap.dedent("""\
    import torch
    from torch import nn

    net = nn.Linear(2, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    {make_x}
    for t in range(3):
        opt.zero_grad()
        net(x).sum().backward()
        opt.step()
    """).format(make_x=make_x)
    (d,) = lint(src)
    assert d.fix is None and why in d.message


def test_models_trained_in_a_loop_over_a_list_of_them():
    """The optimizer-comparison tutorial: `for net, opt in zip(nets, optimizers): net(b_x)`."""
    src = """\
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(8, 1), torch.randn(8, 1)), batch_size=4)
    net_a, net_b = nn.Linear(1, 1), nn.Linear(1, 1)
    net_sgd = nn.Linear(1, 1)
    net_adam = nn.Linear(1, 1)
    nets = [net_sgd, net_adam]
    opts = [torch.optim.SGD(net_sgd.parameters(), lr=0.1), torch.optim.Adam(net_adam.parameters())]
    loss_func = nn.MSELoss()
    history = [[], []]
    for b_x, b_y in loader:
        for net, opt, hist in zip(nets, opts, history):
            loss = loss_func(net(b_x), b_y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            hist.append(loss.data.numpy())
    print([round(float(h[-1]), 4) for h in history])
    """
    (d,) = lint(src)
    assert d.fix.applicability is Applicability.SAFE
    fixed = fix(src)
    assert "net_sgd = nn.Linear(1, 1).to(device)" in fixed and "net_adam = nn.Linear(1, 1).to(device)" in fixed
    assert "    b_x, b_y = b_x.to(device), b_y.to(device)\n" in fixed
    assert "hist.append(loss.data.cpu().numpy())" in fixed
    assert run(fixed) == run(textwrap.dedent(src))


def test_a_tensor_returned_by_a_function_of_the_file_is_placed_where_it_is_made():
    src = """\
    import numpy as np
    import torch
    from torch import nn


    def real_samples(n):
        return torch.from_numpy(np.linspace(-1, 1, n * 3).reshape(n, 3)).float()


    torch.manual_seed(0)
    D = nn.Sequential(nn.Linear(3, 1), nn.Sigmoid())
    opt = torch.optim.Adam(D.parameters())
    for step in range(2):
        loss = -torch.log(D(real_samples(4))).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(round(loss.item(), 4))
    """
    fixed = fix(src)
    assert "return torch.from_numpy(np.linspace(-1, 1, n * 3).reshape(n, 3)).to(device).float()" in fixed
    assert run(fixed) == run(textwrap.dedent(src))


# ---- issue 22: shapes the port used to refuse ----------------------------------------------------

LEGACY = """\
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Linear(2, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
rows = [[0.0, 1.0], [1.0, 0.5]]
{make_x}
for t in range(3):
    opt.zero_grad()
    loss = net(x).sum()
    loss.backward()
    opt.step()
print(round(loss.item(), 5))
"""


@pytest.mark.parametrize("make_x, placed", [
    # data in the call: a factory on the device with the constructor's dtype
    ("x = torch.FloatTensor([[0.0, 1.0], [1.0, 0.5]])",
     "x = torch.tensor([[0.0, 1.0], [1.0, 0.5]], dtype=torch.float32, device=device)"),
    ("x = torch.FloatTensor([r for r in rows])",
     "x = torch.tensor([r for r in rows], dtype=torch.float32, device=device)"),
    # sizes: an uninitialised tensor, filled in place
    ("x = torch.FloatTensor(2, 2)\nx.fill_(0.25)", "x = torch.empty(2, 2, dtype=torch.float32, device=device)"),
    # data from a variable (`torch.LongTensor(3)` would be three elements, `torch.tensor(3)` one): moved
    ("x = torch.FloatTensor(rows)", "x = torch.FloatTensor(rows).to(device)"),
    # `torch.Tensor` follows the default dtype: moved
    ("x = torch.Tensor([[0.0, 1.0]])", "x = torch.Tensor([[0.0, 1.0]]).to(device)"),
])
def test_legacy_constructors_are_created_on_the_device(make_x, placed):
    src = LEGACY.format(make_x=make_x)
    (d,) = lint(src)
    assert d.fix is not None and d.fix.applicability is Applicability.SAFE, d.message
    fixed = fix(src)
    assert placed in fixed
    assert run(fixed) == run(src)
    assert fix(fixed) == fixed


def test_python_data_built_with_set_and_rebound_as_a_tensor_is_ported():
    """The word2vec tutorial: the batch is first Python lists (one-hot rows made by NumPy over a
    vocabulary made by `set`), then the same name is rebound to a tensor."""
    src = """\
    import random
    import numpy as np
    import torch
    from torch import nn

    random.seed(0)
    torch.manual_seed(0)
    sentences = ["a b c", "b c a", "c a b"]
    vocab = list(sorted(set(" ".join(sentences).split())))
    index = {w: i for i, w in enumerate(vocab)}


    def make_batch():
        picked = random.sample(sentences, 3)
        return [np.eye(3)[index[s.split()[0]]] for s in picked], [index[s.split()[2]] for s in picked]


    model = nn.Linear(3, 3)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    inputs, targets = make_batch()
    inputs = torch.Tensor(np.array(inputs))
    targets = torch.LongTensor(targets)
    for step in range(3):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        opt.step()
    print(round(loss.item(), 4))
    """
    (d,) = lint(src)
    assert d.fix is not None and d.fix.applicability is Applicability.SAFE, d.message
    fixed = fix(src)
    assert "inputs = torch.Tensor(np.array(inputs)).to(device)" in fixed
    assert run(fixed) == run(textwrap.dedent(src))


def test_a_read_before_the_rebinding_keeps_the_earlier_value():
    """The rebinding comes after the model met the earlier value: that value, made by a call the
    file cannot see, would stay on the host."""
    src = """\
    import torch
    from torch import nn
    from mydata import load_features

    model = nn.Linear(3, 1)
    feats = load_features()
    print(model(feats))
    feats = torch.FloatTensor(feats)
    print(model(feats))
    """
    (d,) = lint(src)
    assert d.fix is None
    assert "`feats` would stay on the host (made by `load_features`)" in d.message


def test_writing_into_a_tensor_does_not_change_where_it_lives():
    """`t[i] = value`: the one-hot tensor is still created on the device, whatever the value's
    origin (here a string read by a call the file cannot see)."""
    src = """\
    import string
    import torch
    from torch import nn

    letters = string.ascii_lowercase


    def char_tensor(word):
        t = torch.zeros(len(word)).long()
        for i in range(len(word)):
            t[i] = letters.index(word[i])
        return t


    torch.manual_seed(0)
    embed = nn.Embedding(26, 4)
    print(embed(char_tensor("abc")).shape)
    """
    (d,) = lint(src)
    assert d.fix is not None, d.message
    fixed = fix(src)
    assert "t = torch.zeros(len(word), device=device).long()" in fixed
    assert run(fixed) == run(textwrap.dedent(src))


def test_unpacked_call_arguments_and_tuple_results_are_followed_element_wise():
    """`train(*random_pair())`, `category, line, x, y = random_example()`: each parameter and name
    gets its own element of the returned tuple (the string elements are no tensors to place)."""
    src = """\
    import random
    import torch
    from torch import nn

    random.seed(0)
    torch.manual_seed(0)
    words = ["ab", "ba", "aa"]
    net = nn.Linear(2, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)


    def random_pair():
        word = random.choice(words)
        return word, torch.FloatTensor([[float(c == "a") for c in word]]), torch.LongTensor([int(word[0] == "a")])


    def train(word, x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()


    for step in range(3):
        loss = train(*random_pair())
    word, x, y = random_pair()
    print(word, round(loss, 4), net(x).argmax(1).tolist())
    """
    (d,) = lint(src)
    assert d.fix is not None and d.fix.applicability is Applicability.SAFE, d.message
    fixed = fix(src)
    assert "torch.tensor([[float(c == \"a\") for c in word]], dtype=torch.float32, device=device)" in fixed
    assert run(fixed) == run(textwrap.dedent(src))


def test_a_model_method_other_than_forward_makes_its_tensors_on_the_device():
    """`hidden = rnn.init_hidden()`: the method's `torch.zeros` is created on the device too;
    a CPU tensor indexed by the model's output (`confusion[i][guess]`) goes with it."""
    src = """\
    import torch
    from torch import nn


    class RNN(nn.Module):
        def __init__(self, n_in, n_hidden, n_out):
            super().__init__()
            self.n_hidden = n_hidden
            self.i2h = nn.Linear(n_in + n_hidden, n_hidden)
            self.i2o = nn.Linear(n_in + n_hidden, n_out)

        def forward(self, x, h):
            xh = torch.cat((x, h), 1)
            return self.i2o(xh), self.i2h(xh)

        def init_hidden(self):
            return torch.zeros(1, self.n_hidden)


    torch.manual_seed(0)
    rnn = RNN(3, 4, 2)
    confusion = torch.zeros(2, 2)
    for step in range(4):
        hidden = rnn.init_hidden()
        out, hidden = rnn(torch.randn(1, 3), hidden)
        guess = out.argmax(1)[0]
        confusion[step % 2][guess] += 1
    print(confusion.numpy().tolist())
    """
    fixed = fix(src)
    assert "return torch.zeros(1, self.n_hidden, device=device)" in fixed
    assert "confusion = torch.zeros(2, 2, device=device)" in fixed
    assert "print(confusion.cpu().numpy().tolist())" in fixed
    assert run(fixed) == run(textwrap.dedent(src))


def test_a_vocabulary_made_by_set_is_python_data_not_a_value_to_place():
    """The batch is read (`len`) before it is rebound to a tensor, so both bindings count; the
    first is Python lists of indices into a vocabulary made by `set`: nothing to place there."""
    src = """\
    import torch
    from torch import nn

    torch.manual_seed(0)
    sentences = ["i like dogs", "i love milk", "you hate cats"]
    words = sorted(set(" ".join(sentences).split()))
    index = {w: i for i, w in enumerate(words)}
    batch = [[index[w] for w in s.split()[:2]] for s in sentences]
    print(len(batch), "sentences")
    batch = torch.LongTensor(batch)
    model = nn.Sequential(nn.Embedding(len(words), 3), nn.Flatten(), nn.Linear(6, 2))
    print(model(batch).argmax(1).tolist())
    """
    (d,) = lint(src)
    assert d.fix is not None and d.fix.applicability is Applicability.SAFE, d.message
    fixed = fix(src)
    assert "batch = torch.LongTensor(batch).to(device)" in fixed
    assert run(fixed) == run(textwrap.dedent(src))


def test_the_lengths_of_a_packed_sequence_stay_on_the_host():
    """`pack_padded_sequence(emb, lengths)` wants `lengths` on the CPU: it is no operand that
    must join the embedded batch on the device."""
    src = """\
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence


    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(6, 3)
            self.rnn = nn.GRU(3, 4, batch_first=True)

        def forward(self, tokens, sizes):
            lengths = torch.tensor(sizes)
            _, h = self.rnn(pack_padded_sequence(self.emb(tokens), lengths, batch_first=True))
            return h[-1]


    torch.manual_seed(0)
    model = Tagger()
    tokens = torch.tensor([[1, 2, 3], [4, 5, 0]])
    print(model(tokens, [3, 2]).shape)
    """
    fixed = fix(src)
    assert "lengths = torch.tensor(sizes)\n" in fixed
    assert "tokens = torch.tensor([[1, 2, 3], [4, 5, 0]], device=device)" in fixed
    assert run(fixed) == run(textwrap.dedent(src))
