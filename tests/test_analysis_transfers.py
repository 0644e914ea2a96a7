"""Transfer facts on their own (devlint/analysis/transfers.py, hostflow.py's host builds,
accumulators.py's meters): small files, one fact each."""

from __future__ import annotations

import textwrap

import libcst as cst

from devlint.analysis.accumulators import clocks_feed_meters, meter_update, read_only_in
from devlint.analysis.hostflow import host_build, int_valued
from devlint.analysis.loops import loop_bindings, occasional_nodes
from devlint.analysis.transfers import element_reads, scalar_payload
from devlint.facts import prescan
from devlint.walk import nodes


def parsed(src: str):
    src = textwrap.dedent(src)
    module = cst.parse_module(src)
    return prescan(module, src.encode()), module


def expr(facts_module, text: str):
    """The first node of the module whose code is ``text``."""
    facts, module = facts_module
    return next(n for n in nodes(module) if isinstance(n, cst.BaseExpression) and module.code_for_node(n) == text)


def build_of(src: str, text: str):
    fm = parsed("import torch\n" + src)
    return host_build(fm[0], expr(fm, text))


def test_host_builds():
    b = build_of("x = torch.arange(n).long().unsqueeze(0)\n", "torch.arange(n).long().unsqueeze(0)")
    assert b is not None and len(b.factories) == 1 and not b.operands and not b.computed and not b.random
    b = build_of("x = torch.LongTensor(b, 4).fill_(0)\n", "torch.LongTensor(b, 4).fill_(0)")
    assert b is not None and len(b.legacy) == 1 and not b.factories
    b = build_of("x = torch.pow(c * torch.ones(n), torch.arange(n).float())\n",
                 "torch.pow(c * torch.ones(n), torch.arange(n).float())")
    assert b is not None and b.computed and len(b.factories) == 2 and [o.value for o in b.operands] == ["c"]
    assert build_of("x = (torch.randn(n) * 2)\n", "(torch.randn(n) * 2)").random


def test_not_host_builds():
    for src in ("torch.ones(n, device=d).long()",          # on the device already
                "torch.ones(3).expand_as(y)",             # a method that takes a tensor
                "torch.LongTensor([1, 2]).fill_(0)",      # built from data
                "torch.FloatTensor(3).fill_(v)",          # filled from a value that may be a tensor
                "torch.ones(3, pin_memory=True).view(3)",  # a pinned staging buffer
                "x.float().view(3)"):                     # no factory at all
        assert build_of(f"x = {src}\n", src) is None, src


def test_int_valued_sizes():
    facts, module = parsed("import torch\ndef f(h, xs, data):\n    b = h.size(0)\n    n = len(xs) + 1\n"
                           "    s = 0.5\n    return b, n, data, s\n")
    fn = module.body[1]
    name = lambda v: cst.Name(v)  # noqa: E731
    assert int_valued(facts, name("b"), fn) and int_valued(facts, name("n"), fn)
    assert not int_valued(facts, name("data"), fn)   # a parameter: maybe a list
    assert not int_valued(facts, name("s"), fn) and int_valued(facts, name("s"), fn, floats=True)


def _loop(module):
    return next(n for n in nodes(module) if isinstance(n, cst.For))


def test_element_reads_of_a_loop_invariant_tensor():
    facts, module = parsed("import torch\nks = torch.ones(3).int()\nfor i in range(3):\n"
                           "    a = ks[i].item()\n    b = ks[i + 1].item()\n    ks2 = ks\n")
    loop = _loop(module)
    bound, mutated = loop_bindings(loop)
    assert [(t, i) for _, t, i in element_reads(facts, loop, set(bound), mutated)] == [("ks", "i")]
    facts, module = parsed("import torch\nks = torch.ones(3).int()\nfor i in range(3):\n"
                           "    a = ks[i].item()\n    ks = ks + 1\n")
    loop = _loop(module)
    bound, mutated = loop_bindings(loop)
    assert element_reads(facts, loop, set(bound), mutated) == []  # rebound in the loop


def test_scalar_payloads():
    fm = parsed("import torch\ndevice = 'cuda'\nfor s in range(3):\n    v = out.item()\n"
                "    a = torch.LongTensor([[v]]).to(device)\n    b = torch.tensor([v], device=device)\n"
                "    c = torch.tensor([v, v], device=device)\n    e = torch.tensor([[s]], device=device)\n")
    facts = fm[0]
    scalars = {"v": None}
    dims, value, legacy, dev, dtype = scalar_payload(facts, expr(fm, "torch.LongTensor([[v]]).to(device)"), scalars)
    assert (dims, value.value, legacy, dev.value, dtype) == (2, "v", "LongTensor", "device", None)
    assert scalar_payload(facts, expr(fm, "torch.tensor([v], device=device)"), scalars)[0] == 1
    assert scalar_payload(facts, expr(fm, "torch.tensor([v, v], device=device)"), scalars) is None
    assert scalar_payload(facts, expr(fm, "torch.tensor([[s]], device=device)"), scalars) is None  # not read back


def test_meters_read_every_n_steps():
    src = ("import time\nend = time.time()\nfor i, x in enumerate(data):\n    losses.update(loss.item(), 8)\n"
           "    batch_time.update(time.time() - end)\n    end = time.time()\n"
           "    if i % 10 == 0:\n        print(losses.avg)\n")
    facts, module = parsed(src)
    loop = _loop(module)
    small = loop.body.body[0].body[0]
    item = small.value.args[0].value
    assert meter_update(small, item) == "losses"
    assert read_only_in(loop.body, "losses", occasional_nodes(loop))
    clock = lambda c: facts.qualname(c.func) == "time.time"  # noqa: E731
    assert clocks_feed_meters(loop.body, clock)
    facts, module = parsed(src.replace("    if i % 10 == 0:\n        print(losses.avg)\n",
                                       "    print(losses.avg)\n    times.append(time.time() - end)\n"))
    loop = _loop(module)
    assert not read_only_in(loop.body, "losses", occasional_nodes(loop))
    assert not clocks_feed_meters(loop.body, lambda c: facts.qualname(c.func) == "time.time")
