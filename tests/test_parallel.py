"""The fast paths give exactly what the slow ones give.

* devlint's read-only traversal calls the same visitor methods, on the same nodes, in
  the same order as LibCST's ``visit_batched``; its positions equal ``PositionProvider``'s;
* ``--jobs 2`` reports exactly what ``--jobs 1`` reports, in the same order, and fixes
  files the same way.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner
from libcst._batched_visitor import BatchableCSTVisitor
from libcst._batched_visitor import visit_batched as libcst_visit_batched
from libcst.metadata import MetadataWrapper, PositionProvider

from devlint import registry, walk
from devlint.cli import main
from devlint.engine import Settings
from devlint.runner import run_files

HERE = Path(__file__).parent
ROOT = HERE.parent

# Every construct whose children LibCST visits in a non-obvious order, or only sometimes.
ZOO = '''\
"""doc"""
from __future__ import annotations
import torch as T, os.path as osp
from torch import (nn,  # comment
                   optim as O)
from . import sibling
from .pkg import *

@decorator(arg=1)
@other
class Net(nn.Module, metaclass=Meta):
    x: int = 3
    def forward(self, x, /, y=2, *args, z: T.Tensor = None, **kw) -> T.Tensor:
        global G
        a = b = x.to("cuda:0") if T.cuda.is_available() else x
        a += 1; b -= 2
        c = [i for i in range(3) if i if not i]
        d = {k: v for k, v in kw.items()}
        e = {*args, 1}
        f = (yield x)
        g = lambda q, *, r=1: q ** r
        h = f"{x!r:>{width}} {y=} {z:.2f} {'nested'}"
        i = x[1:2, ::3, ...]
        j = not a and b or c
        k = -x @ y // 2 % 3 << 1 >> 1 & 1 | 2 ^ 3
        assert a is not b, "msg"
        del a, b
        with T.no_grad() as ng, open("f") as fh:
            pass
        try:
            raise ValueError("x") from None
        except (ValueError, TypeError) as err:
            pass
        else:
            pass
        finally:
            pass
        try:
            pass
        except* OSError:
            pass
        for p in self.parameters():
            continue
        else:
            pass
        while (n := len(c)) > 0:
            break
        match x:
            case [1, *rest] if rest:
                pass
            case {"k": v, **others}:
                pass
            case Point(x=0) | None as pt:
                pass
            case _:
                pass
        return T.ones(2, device=x.device).cuda()

async def run(q):
    async with q as r:
        async for s in r:
            await s
    return [t async for t in q]

type Alias[T] = list[T]
if __name__ == "__main__":
    Net().cuda()
'''


def _sources():
    yield "zoo", ZOO.encode()
    for p in sorted((ROOT / "rules").glob("*.py")) + sorted((ROOT / "devlint").glob("*.py")):
        yield p.name, p.read_bytes()
    try:
        import torch
    except ImportError:
        return
    base = Path(torch.__file__).parent
    for rel in ("cuda/streams.py", "optim/adam.py", "nn/parallel/data_parallel.py"):
        if (base / rel).exists():
            yield rel, (base / rel).read_bytes()


SOURCES = list(_sources())


class _Recorder(BatchableCSTVisitor):
    """Logs every visitor call, for every node type and some attribute visitors."""

    def __init__(self, log: list, trivia: bool) -> None:
        super().__init__()
        self.log = log
        self.trivia = trivia

    def get_visitors(self):
        names = []
        for t in vars(cst).values():
            if isinstance(t, type) and issubclass(t, cst.CSTNode):
                if self.trivia or t not in walk.TRIVIA:
                    names += [f"visit_{t.__name__}", f"leave_{t.__name__}"]
        for attr in ("If_body", "If_orelse", "IfExp_body", "IfExp_orelse", "For_body", "Call_args",
                     "BooleanOperation_right", "FormattedStringExpression_format_spec",
                     "FunctionDef_returns", "Attribute_value"):
            names += [f"visit_{attr}", f"leave_{attr}"]
        return {n: (lambda node, n=n: self.log.append((n, id(node)))) for n in names}


class _Narrow(BatchableCSTVisitor):
    """What rules look like: a few node types, no names, numbers or strings (whose nodes
    the traversal then does not enter)."""

    def __init__(self, log: list) -> None:
        super().__init__()
        self.log = log

    def get_visitors(self):
        names = [f"{w}_{t}" for t in ("Call", "Attribute", "Assign", "FunctionDef", "Subscript", "Param")
                 for w in ("visit", "leave")] + ["visit_If_body", "leave_Call_args"]
        return {n: (lambda node, n=n: self.log.append((n, id(node)))) for n in names}


@pytest.mark.parametrize("name,source", SOURCES, ids=[n for n, _ in SOURCES])
def test_narrow_traversal_matches_libcst(name, source):
    module = cst.parse_module(source)
    expected, got = [], []
    libcst_visit_batched(module, [_Narrow(expected)])
    walk.visit_batched(module, [_Narrow(got)])
    assert got == expected


@pytest.mark.parametrize("trivia", [False, True], ids=["skip-trivia", "with-trivia"])
@pytest.mark.parametrize("name,source", SOURCES, ids=[n for n, _ in SOURCES])
def test_traversal_matches_libcst(name, source, trivia):
    module = cst.parse_module(source)
    expected, got = [], []
    libcst_visit_batched(module, [_Recorder(expected, trivia)])
    walk.visit_batched(module, [_Recorder(got, trivia)])
    assert len(got) == len(expected)
    assert got == expected


@pytest.mark.parametrize("name,source", SOURCES, ids=[n for n, _ in SOURCES])
def test_positions_match_position_provider(name, source):
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    got = walk.positions(module, list(expected))
    assert got == dict(expected)


@pytest.mark.parametrize("name,source", SOURCES, ids=[n for n, _ in SOURCES])
def test_statement_positions_match_position_provider(name, source):
    """Generating only the statements that hold the nodes gives the same ranges."""
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    everything = list(expected)
    assert walk.positions(module, everything, source) == dict(expected)
    calls = [n for n in everything if isinstance(n, cst.Call)]
    some = calls[len(calls) // 2: len(calls) // 2 + 3] + calls[-1:]
    assert walk.positions(module, some, source) == {n: expected[n] for n in some}


ODD = {
    "crlf-tabs": b"import torch\r\nif True:\r\n\tx = torch.ones(2).cuda()\r\n",
    "no-trailing-newline": b"import torch\nx = torch.ones(2).cuda()",
    "bom": b"\xef\xbb\xbfimport torch\nx = torch.ones(2).cuda()\n",
    "latin-1": b"# -*- coding: latin-1 -*-\nimport torch\ns = '\xe9t\xe9'; x = torch.ones(2).cuda()\n",
    "duplicate-in-docstring": b'"""\nx = torch.ones(2).cuda()\n"""\nimport torch\nx = torch.ones(2).cuda()\n',
    "duplicate-statement": b"import torch\nx = torch.ones(2).cuda()\nx = torch.ones(2).cuda()\n",
    "comment-only-tail": b"import torch\nx = torch.ones(2).cuda()\n# the end\n",
}


@pytest.mark.parametrize("name", list(ODD))
def test_positions_of_odd_files(name):
    src = ODD[name]
    module = cst.parse_module(src)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    assert walk.positions(module, list(expected)) == dict(expected)
    assert walk.positions(module, list(expected), src) == dict(expected)
    calls = [n for n in expected if isinstance(n, cst.Call)]
    assert walk.positions(module, calls[-1:], src) == {calls[-1]: expected[calls[-1]]}


# ---- --jobs 1 vs --jobs 2 ---------------------------------------------------------------

def _project(tmp: Path) -> Path:
    """A directory with findings, clean files, a syntax error and a file to fix."""
    d = tmp / "proj"
    (d / "pkg").mkdir(parents=True)
    fixtures = HERE / "fixtures"
    n = 0
    if fixtures.exists():
        for before in sorted(fixtures.glob("DL*/*/before.py")):
            shutil.copy(before, d / f"case_{n:03d}.py")
            n += 1
    for i, rule in enumerate(registry.all_rules()):
        for j, inv in enumerate(rule.INVALID):
            (d / "pkg" / f"{rule.code}_bad_{j}.py").write_text(inv.code)
        for j, valid in enumerate(rule.VALID):
            (d / "pkg" / f"{rule.code}_ok_{j}.py").write_text(valid)
    (d / "broken.py").write_text("import torch\nx = torch.ones(2).cuda(\n")
    (d / "plain.py").write_text("print('no torch here')\n")
    big = "import torch\n" + "".join(f"x{i} = torch.ones({i}).cuda()\n" for i in range(300))
    (d / "big.py").write_text(big)
    return d


def _check(args: list[str]):
    res = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "json", *args])
    return res.exit_code, res.output


def test_jobs_1_and_2_report_the_same(tmp_path):
    d = _project(tmp_path)
    code1, out1 = _check(["--jobs", "1", "--select", "ALL", str(d)])
    code2, out2 = _check(["--jobs", "2", "--select", "ALL", str(d)])
    assert code1 == code2 == 1
    items = json.loads(out1)
    assert len(items) > 300  # big.py alone has 300
    assert any(i["code"] == "DL000" for i in items)  # broken.py
    assert out1 == out2
    # stable order: by file (as discovered), then position
    assert [i["filename"] for i in items] == sorted(i["filename"] for i in items)


def test_outcomes_come_back_in_the_order_given(tmp_path):
    d = _project(tmp_path)
    # largest first in the pool, but outcomes in the order given (here: reversed)
    files = sorted(str(p) for p in d.rglob("*.py"))[::-1]
    files.insert(5, str(d / "deleted_meanwhile.py"))  # read by a worker: its error comes back too
    settings = Settings(select=registry.resolve(["ALL"]))
    one = run_files([(f, f) for f in files], settings, jobs=1)
    two = run_files([(f, f) for f in files], settings, jobs=2)
    assert [o.path for o in two] == files
    assert [[d.to_dict() for d in o.diagnostics] for o in one] == \
           [[d.to_dict() for d in o.diagnostics] for o in two]
    assert [o.error for o in one] == [o.error for o in two]
    assert two[5].error.startswith("cannot read: No such file")


def test_fix_with_jobs_2_writes_what_jobs_1_writes(tmp_path):
    a = _project(tmp_path / "a")
    b = _project(tmp_path / "b")
    r1 = CliRunner().invoke(main, ["check", "--no-cache", "--fix", "--jobs", "1", str(a)])
    r2 = CliRunner().invoke(main, ["check", "--no-cache", "--fix", "--jobs", "2", str(b)])
    assert r1.exit_code == r2.exit_code
    for p in sorted(a.rglob("*.py")):
        assert p.read_bytes() == (b / p.relative_to(a)).read_bytes(), p.name
    assert "x0 = torch.ones(0, device=device)" in (a / "big.py").read_text()
    assert r1.output.replace(str(a), "") == r2.output.replace(str(b), "")


def test_default_jobs_is_the_cpu_count():
    from devlint.runner import default_jobs

    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert default_jobs() == n


@pytest.mark.parametrize("name,source", SOURCES, ids=[n for n, _ in SOURCES])
def test_children_without_trivia_skips_only_trivia(name, source):
    """``children(n, trivia=False)`` skips the fields that can hold only layout tokens without
    reading them: it still gives every other child, in order."""
    stack = [cst.parse_module(source)]
    while stack:
        n = stack.pop()
        full = walk.children(n, trivia=True)
        assert walk.children(n, trivia=False) == [c for c in full if type(c) not in walk.TRIVIA]
        stack.extend(full)
