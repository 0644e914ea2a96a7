"""The value model (devlint/analysis/values.py) on its own: small files, one fact each."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from devlint.analysis.values import (ACCEL, CONTAINER, DEVICE, DTYPE, FOLLOWS, HOST, MODULE, PARAM, TENSOR)
from devlint.engine import lint_source
from devlint.facts import prescan
from devlint.settings import Settings


def model_of(src: str):
    src = textwrap.dedent(src)
    module = cst.parse_module(src)
    facts = prescan(module, src.encode())
    return facts, module


def _find(module: cst.Module, fn_name):
    if fn_name is None:
        return None
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == fn_name:
            return stmt
        if isinstance(stmt, cst.ClassDef):
            for s in stmt.body.body:
                if isinstance(s, cst.FunctionDef) and s.name.value == fn_name:
                    return s
    raise AssertionError(fn_name)


def _cls(module: cst.Module, name):
    if name is None:
        return None
    return next(s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == name)


def kind(src: str, expr: str, fn=None, cls=None):
    facts, module = model_of(src)
    return facts.values.kind_of(cst.parse_expression(expr), _find(module, fn), _cls(module, cls))


def placement(src: str, expr: str, fn=None, cls=None):
    facts, module = model_of(src)
    p, source = facts.values.placement_of(cst.parse_expression(expr), _find(module, fn), _cls(module, cls))
    return p, (module.code_for_node(source) if source is not None else None)


# ---- kinds ---------------------------------------------------------------------------------

def test_assignment_and_reassignment():
    src = """
    import torch
    from torch import nn
    x = torch.zeros(3)
    y = x.float() * 2
    m = nn.Linear(2, 2)
    m = m.to("cpu")
    p = nn.Parameter(torch.ones(2))
    """
    assert kind(src, "x") == TENSOR
    assert kind(src, "y") == TENSOR
    assert kind(src, "m") == MODULE
    assert kind(src, "p") == PARAM
    assert kind(src, "unknown_name") is None


def test_a_name_bound_to_both_a_tensor_and_a_module_is_unknown():
    src = "import torch\nfrom torch import nn\nv = torch.zeros(3)\nv = nn.Linear(2, 2)\n"
    assert kind(src, "v") is None


def test_tuple_unpacking():
    src = """
    import torch
    a, (b, c) = torch.ones(2), (torch.zeros(2), 3)
    def f(batch: tuple[torch.Tensor, torch.Tensor]):
        x, y = batch
        return x
    """
    assert kind(src, "a") == TENSOR
    assert kind(src, "b") == TENSOR
    assert kind(src, "c") is None
    assert kind(src, "batch", fn="f") == CONTAINER
    assert kind(src, "x", fn="f") == TENSOR


def test_self_attribute_set_in_one_method_read_in_another():
    src = """
    import torch
    class Cache:
        def reset(self):
            self.buf = torch.zeros(4)
        def read(self):
            return self.buf
    """
    assert kind(src, "self.buf", fn="read", cls="Cache") == TENSOR


def test_alias_of_a_legacy_constructor():
    src = """
    import torch
    T = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor
    w = T(3)
    """
    assert kind(src, "w") == TENSOR
    assert kind(src, "T(2, 2)") == TENSOR
    assert kind(src, "T") is None  # the constructor itself is no tensor


def test_loop_targets_of_a_loader_over_a_dataset_class_of_tensors():
    src = """
    import torch
    from torch.utils.data import DataLoader, Dataset
    class Pairs(Dataset):
        def __init__(self):
            self.x = torch.randn(8, 3)
            self.y = torch.zeros(8)
        def __getitem__(self, i):
            return self.x[i], self.y[i]
    loader = DataLoader(Pairs(), batch_size=4)
    for xb, yb in loader:
        pass
    """
    assert kind(src, "xb") == TENSOR
    assert kind(src, "yb") == TENSOR


def test_loader_over_a_dataset_of_unknown_items_stays_unknown():
    src = """
    import torch
    from torch.utils.data import DataLoader, Dataset
    class Docs(Dataset):
        def __getitem__(self, i):
            return {"ids": self.tok(i)}
    for xb, yb in DataLoader(Docs()):
        pass
    """
    assert kind(src, "xb") is None


def test_container_annotations_and_comprehensions():
    src = """
    import torch
    from typing import List
    def f(ts: List[torch.Tensor], ms: List[int]):
        for t in ts:
            pass
        for m in ms:
            pass
    noise = [torch.randn(2) for _ in range(3)]
    """
    assert kind(src, "ts", fn="f") == CONTAINER
    assert kind(src, "t", fn="f") == TENSOR
    assert kind(src, "m", fn="f") is None
    assert kind(src, "noise") == CONTAINER


def test_usage_evidence():
    src = """
    import torch
    def f(a, b, c, g):
        n = a.size(0)
        idx = torch.randperm(n)
        b.to("cpu")
        y = b[idx]
        c.cuda()
        c[:, 0] = 1
        z = torch.cat([g, y])
    def h(d, e):
        d.to("cpu")
        e.to("cpu")
        return e
    """
    assert kind(src, "a", fn="f") == TENSOR  # .size(0)
    assert kind(src, "b", fn="f") == TENSOR  # indexed by a tensor, and has .to()
    assert kind(src, "c", fn="f") == TENSOR  # array item assignment, and has .cuda()
    assert kind(src, "d", fn="h") is None  # only .to(): a Module or a batch does that too
    assert kind(src, "e", fn="h") is None
    assert kind(src, "g", fn="f") == TENSOR  # torch.cat takes tensors


def test_indexing_alone_or_conversion_alone_is_no_evidence():
    src = """
    def f(arr, model):
        arr[:, 0] = 1
        model.to("cpu")
    """
    assert kind(src, "arr", fn="f") is None
    assert kind(src, "model", fn="f") is None


def test_a_mapping_whose_items_are_moved_back_holds_tensors():
    src = """
    def step(batch, nets, d):
        batch["y"] = batch["y"].to(d)
        nets["g"] = nets["g"].to(d)
        return nets["g"](1)
    """
    assert kind(src, "batch", fn="step") == CONTAINER
    assert kind(src, 'batch["x"]', fn="step") == TENSOR
    assert kind(src, "nets", fn="step") is None  # its items are called: Modules
    assert kind(src, 'nets["d"]', fn="step") is None


def test_devices_and_dtypes():
    src = """
    import torch
    def f(m, x):
        dev = next(m.parameters()).device
        d2 = torch.device("cpu")
        return dev
    """
    assert kind(src, "dev", fn="f") == DEVICE
    assert kind(src, "d2", fn="f") == DEVICE
    assert kind(src, "x.device", fn="f") == DEVICE
    assert kind(src, "torch.float16", fn="f") == DTYPE


def test_usage_is_order_independent():
    before = "import torch\ndef f(x):\n    x.pin_memory()\n    x.backward()\n"
    after = "import torch\ndef f(x):\n    x.backward()\n    x.pin_memory()\n"
    assert kind(before, "x", fn="f") == kind(after, "x", fn="f") == TENSOR


def test_the_model_is_frozen_once_built():
    facts, _ = model_of("import torch\nx = torch.zeros(2)\n")
    with pytest.raises(TypeError):
        facts.values.evidence[(None, "y")] = {TENSOR}
    with pytest.raises(AssertionError):
        facts.values.add(None, "y", TENSOR)


def test_dl004_pin_memory_finding_does_not_depend_on_statement_order():
    settings = Settings(select=frozenset({"DL004"}))
    a = "import torch\nfor i in range(3):\n    x = f(i)\n    x.pin_memory()\n    x.backward()\n"
    b = "import torch\nfor i in range(3):\n    x = f(i)\n    x.backward()\n    x.pin_memory()\n"
    ra = [d.code for d in lint_source(a.encode(), "a.py", settings).diagnostics]
    rb = [d.code for d in lint_source(b.encode(), "b.py", settings).diagnostics]
    assert ra == rb == ["DL004"]


# ---- placement ---------------------------------------------------------------------------

def test_placement():
    src = """
    import torch
    def f(x, m):
        a = torch.zeros(3)
        b = torch.zeros(3, device="cuda")
        c = torch.zeros(3).to(x.device)
        d = torch.zeros_like(x)
        e = a.cuda()
        g = b.cpu().float()
        h = torch.ones(2).to(torch.float16)
        return m
    """
    assert placement(src, "a", fn="f") == (HOST, None)
    assert placement(src, "b", fn="f") == (ACCEL, None)
    assert placement(src, "c", fn="f") == (FOLLOWS, "x")
    assert placement(src, "d", fn="f") == (FOLLOWS, "x")
    assert placement(src, "e", fn="f") == (ACCEL, None)
    assert placement(src, "g", fn="f") == (HOST, None)
    assert placement(src, "h", fn="f") == (HOST, None)
    assert placement(src, "m", fn="f") == (None, None)


# ---- usage is read region by region: the same answers in any order ---------------------------

_REGIONS = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = make()

    def forward(self, x):
        def helper(v):
            return v.size(0) + self.w.shape[0]
        return helper(x)

    class Inner:
        def run(self, a):
            return self.cache.numel() + a.dim()

def make():
    q = load()
    return q.size(1)

def main(b, net):
    net.eval()
    return b @ b

z = load()
z.unsqueeze(0)
"""


def _questions(module):
    """(expr, scope, cls) for every name and self attribute of the file, from where it is read."""
    out = []
    for node in (n for n in _all_nodes(module) if isinstance(n, cst.FunctionDef)):
        cls = next((c for c in _all_nodes(module) if isinstance(c, cst.ClassDef)
                    and any(m is node for m in _all_nodes(c))), None)
        for expr in ("x", "v", "a", "q", "b", "net", "self.w", "self.cache", "z"):
            out.append((expr, node, cls))
    out += [(e, None, None) for e in ("z", "q", "b")]
    return out


def _all_nodes(root):
    from devlint.walk import nodes

    return list(nodes(root, into_scopes=True))


def test_usage_regions_answer_alike_in_any_order():
    module = cst.parse_module(_REGIONS)
    qs = _questions(module)
    whole = prescan(module, _REGIONS.encode())
    _ = whole.values.usage  # every region read up front
    expected = [whole.values.kind_of(cst.parse_expression(e), s, c) for e, s, c in qs]
    assert TENSOR in expected and MODULE in expected  # the file gives evidence of both
    for order in (qs, list(reversed(qs))):
        facts = prescan(module, _REGIONS.encode())
        got = {id(q): facts.values.kind_of(cst.parse_expression(q[0]), q[1], q[2]) for q in order}
        assert [got[id(q)] for q in qs] == expected


def test_usage_reads_only_the_regions_a_question_needs():
    module = cst.parse_module(_REGIONS)
    facts = prescan(module, _REGIONS.encode())
    main = next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == "main")
    assert facts.values.kind_of(cst.parse_expression("net"), main) == MODULE  # `net.eval()`
    assert facts.values._walked == {main}
    net = _cls(module, "Net")
    facts.values.kind_of(cst.parse_expression("self.w"), None, net)
    # the class's own body is in the module's region, and its methods (nested ones included)
    assert {None, main} < facts.values._walked
    assert len(facts.values._walked) == 2 + 3  # __init__, forward, helper; not Inner.run or make


def test_a_loss_weight_is_a_tensor():
    src = """
    import torch
    import torch.nn.functional as F
    from torch import nn
    def f(out, y, w, cw, lr):
        crit = nn.BCEWithLogitsLoss(pos_weight=cw)
        return F.cross_entropy(out, y, weight=w) + lr
    """
    assert kind(src, "w", "f") == TENSOR
    assert kind(src, "cw", "f") == TENSOR
    assert kind(src, "lr", "f") is None


# ---- evidence from how a name is bound --------------------------------------------------

def test_a_parameter_moved_like_a_sibling_tensor_is_a_tensor():
    src = """
    import torch
    class T:
        def fit(self, x1, vx1, batch, d):
            x1.to(d)
            vx1.to(d)
            batch.cuda()
            self.to(d)
            return x1.size(0)
        def other(self, m, x, d):
            m.to(d)
            x.to("cpu")
            return x.size(0)
    """
    assert kind(src, "vx1", fn="fit", cls="T") == TENSOR
    assert kind(src, "batch", fn="fit", cls="T") is None  # moved another way (`.cuda()`)
    assert kind(src, "self", fn="fit", cls="T") is None  # the instance, not a sibling
    assert kind(src, "m", fn="other", cls="T") is None  # `.to(d)` vs `.to("cpu")`


def test_a_sibling_used_as_a_mapping_or_passed_a_module_stays_unknown():
    src = """
    import torch
    from torch import nn
    def step(model, inputs, labels, d):
        inputs.to(d)
        labels.to(d)
        return model(**inputs), labels.size(0)
    def prep(model, x, d):
        model.to(d)
        x.to(d)
        return x.size(0)
    prep(nn.Linear(2, 2), torch.ones(2), "cpu")
    """
    assert kind(src, "labels", fn="step") == TENSOR
    assert kind(src, "inputs", fn="step") is None
    assert kind(src, "model", fn="prep") is None


def test_tuple_items_of_a_loader_are_tensors_once_converted():
    src = """
    from torch.utils.data import DataLoader
    def train(model, loader, d):
        for xb, yb in loader:
            xb.to(d)
            print(yb)
    def evaluate(loader, d):
        for i, (xb, yb) in enumerate(loader):
            xb.to(d)
        return len(loader.dataset)
    def unknown(loader, d):
        for xb, yb in loader:
            xb.to(d)
    def mapping(loader, d):
        for enc, yb in loader:
            enc.to(d)
            enc["ids"]
    def rebound(loader, d):
        for xb, yb in loader:
            xb = prepare(xb)
            xb.to(d)
    for xb, yb in DataLoader(range(4), collate_fn=list):
        xb.to("cpu")
    train(None, DataLoader(range(4)), "cpu")
    mapping(DataLoader(range(4)), "cpu")
    rebound(DataLoader(range(4)), "cpu")
    """
    assert kind(src, "xb", fn="train") == TENSOR  # every call passes a DataLoader
    assert kind(src, "yb", fn="train") is None  # a list or a dict has no `.to()`: not converted, unknown
    assert kind(src, "xb", fn="evaluate") == TENSOR  # read as a DataLoader (`loader.dataset`)
    assert kind(src, "xb", fn="unknown") is None  # nothing says `loader` is a DataLoader
    assert kind(src, "enc", fn="mapping") is None  # used as a mapping
    assert kind(src, "xb", fn="rebound") is None  # bound again to an unknown value
    assert kind(src, "xb") is None  # a custom collate_fn may build anything


def test_elements_of_a_list_of_tensors():
    src = """
    import torch
    from torch import nn
    def f(d, x: torch.Tensor):
        for t in [torch.ones(2), torch.zeros(2)]:
            t.to(d)
        for c in x.chunk(2):
            c.to(d)
        for m in [nn.Linear(2, 2), nn.ReLU()]:
            m.to(d)
        for k in {"a": torch.ones(2)}:
            print(k)
    """
    assert kind(src, "t", fn="f") == TENSOR
    assert kind(src, "c", fn="f") == TENSOR
    assert kind(src, "m", fn="f") is None
    assert kind(src, "k", fn="f") is None


def test_values_unpacked_from_a_function_of_the_file():
    src = """
    import torch
    def split(data: torch.Tensor):
        return data[:, :3], data[:, 3:]
    def slices(arr):
        return arr[:, :3], arr[:, 3:]
    def fields(b):
        return b["x"], b["y"]
    def run(data, d):
        x, y = split(data)
        a, b = slices(data)
        a.to(d)
        p, q = fields(data)
        p.to(d)
    """
    assert kind(src, "x", fn="run") == TENSOR
    assert kind(src, "a", fn="run") == TENSOR  # an array slice converted with `.to()`
    assert kind(src, "b", fn="run") is None  # an array slice (NumPy too), never converted
    assert kind(src, "p", fn="run") is None


def test_elements_of_a_list_built_by_appending_tensors():
    src = """
    import torch
    def f(d, n):
        ts = []
        for i in range(n):
            ts.append(torch.randn(2))
        for t in ts:
            t.to(d)
        mixed = []
        mixed.append(torch.ones(2))
        mixed.append(n)
        for m in mixed:
            m.to(d)
    """
    assert kind(src, "t", fn="f") == TENSOR
    assert kind(src, "m", fn="f") is None


def test_a_name_read_as_another_object_is_never_derived():
    src = """
    import torch
    from torch.utils.data import DataLoader
    def run(model, input_ids, device):
        model.to(device)
        input_ids.to(device)
        return model.generate(input_ids.unsqueeze(0))
    def batches(loader, device):
        for enc, y in loader:
            enc.to(device)
            print(enc.input_ids, y)
    batches(DataLoader(range(4)), "cpu")
    """
    assert kind(src, "input_ids", fn="run") == TENSOR
    assert kind(src, "model", fn="run") is None  # `.generate(...)`: no tensor method
    assert kind(src, "enc", fn="batches") is None  # `.input_ids`: no tensor attribute


def test_a_call_that_passes_star_args_shows_no_loader():
    src = """
    from torch.utils.data import DataLoader
    def train(model, loader, d):
        for xb, yb in loader:
            xb.to(d)
    train(None, DataLoader(range(4)), "cpu")
    train(*parts)
    """
    assert kind(src, "xb", fn="train") is None  # the second call's loader cannot be known
