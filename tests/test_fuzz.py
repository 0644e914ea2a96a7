"""Property-based fuzzing: on generated valid Python (hypothesmith) and on mutations of
small device-placement programs (inserted comments, renamed variables, reordered
statements, aliases), the linter never raises, a fix always parses and compiles, and
fixing a fixed file changes nothing (fix o fix = fix)."""

from __future__ import annotations

import ast

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devlint import registry
from devlint.engine import Settings, fix_source, lint_source

ALL = Settings(select=registry.resolve(["ALL"]), unsafe_fixes=True)
FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

SEEDS = [
    "import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.fc = nn.Linear(4, 2)\n        self.w = torch.ones(2)\n\n"
    "    def forward(self, x):\n        m = torch.zeros(x.shape[0], 2)\n        return self.fc(x) + m\n\n"
    "model = Net().cuda()\nx = torch.randn(8, 4).cuda()\nx.cuda()\ny = model(x)\nprint(y.sum().item())\n",
    "import torch\ndevice = torch.device('cuda:0')\nt = torch.ones(3).to(device)\nt.half()\n"
    "state = torch.load('ckpt.pt')\ntorch.cuda.synchronize()\nfor i in range(3):\n"
    "    z = torch.zeros(2).cuda()\n    v = z.cpu().numpy()\n    print(v)\n",
    "import torch\nx = torch.ones(2)\ny = x.cuda().cuda()\nz = torch.zeros(3).cuda().to('cuda')\n"
    "def f(a):\n    a.cuda()\n    return a.to('cuda')\n",
]


def _check(source: bytes) -> None:
    lint_source(source, "fuzz.py", ALL)  # never raises
    out = fix_source(source, "fuzz.py", ALL)
    if out.source != source:
        cst.parse_module(out.source)
        try:
            ast.parse(source)
        except SyntaxError:
            pass
        else:
            ast.parse(out.source)  # compiled before: compiles after
    again = fix_source(out.source, "fuzz.py", ALL)
    assert again.source == out.source, "fix o fix != fix"


hypothesmith = pytest.importorskip("hypothesmith")


@FUZZ
@given(hypothesmith.from_grammar())
def test_generated_python_never_breaks(code):
    src = ("import torch\n" + code).encode()
    try:
        ast.parse(src)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    _check(src)


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(hypothesmith.from_node())
def test_generated_python_with_cuda_calls(code):
    lines = code.splitlines(keepends=True)
    src = ("import torch\nt = torch.ones(2).cuda()\nt.cuda()\n" + "".join(lines)
           + "\nu = torch.zeros(3).cuda()\n").encode()
    try:
        ast.parse(src)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    _check(src)


# ---- mutations of the seed programs -------------------------------------------------

NAMES = st.sampled_from(["x", "y", "model", "device", "t", "torch2", "cuda", "self_", "data"])


class _Rename(cst.CSTTransformer):
    def __init__(self, old, new):
        self.old, self.new = old, new

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.new) if updated.value == self.old else updated


def _mutate(seed: str, ops) -> str:
    module = cst.parse_module(seed)
    for op in ops:
        kind = op[0]
        body = list(module.body)
        if kind == "comment" and body:
            i = op[1] % len(body)
            stmt = body[i]
            lead = [*getattr(stmt, "leading_lines", []), cst.EmptyLine(comment=cst.Comment(f"# {op[2]} cuda"))]
            body[i] = stmt.with_changes(leading_lines=lead)
        elif kind == "rename":
            module = module.visit(_Rename(op[1], op[2]))
            continue
        elif kind == "swap" and len(body) > 3:
            i = 2 + op[1] % (len(body) - 3)
            body[i], body[i + 1] = body[i + 1], body[i]
        elif kind == "alias":
            code = module.code.replace("torch.", f"{op[2]}.").replace(f"import {op[2]}.", "import torch.")
            module = cst.parse_module(code.replace("import torch\n", f"import torch as {op[2]}\n", 1))
            continue
        elif kind == "wrap" and body:
            i = op[1] % len(body)
            if isinstance(body[i], cst.SimpleStatementLine):
                body[i] = cst.If(test=cst.Name("cond"), body=cst.IndentedBlock(body=[body[i]]))
        module = module.with_changes(body=body)
    return module.code


OPS = st.lists(st.one_of(
    st.tuples(st.just("comment"), st.integers(0, 30), NAMES),
    st.tuples(st.just("rename"), NAMES, NAMES),
    st.tuples(st.just("swap"), st.integers(0, 30), NAMES),
    st.tuples(st.just("alias"), st.integers(0, 1), st.sampled_from(["th", "T", "pt"])),
    st.tuples(st.just("wrap"), st.integers(0, 30), NAMES),
), max_size=6)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(SEEDS))), OPS)
def test_mutated_programs_never_break(i, ops):
    src = _mutate(SEEDS[i], ops)
    _check(src.encode())
