"""DL003 reports only traffic that runs on every iteration (item 1) and round trips whose
host value devlint can follow (precision)."""

from __future__ import annotations

import pytest

from devlint.engine import Settings, lint_source

HEAD = "import torch\ndevice = torch.device('cpu')\nw = torch.ones(2)\nk = 10\n"


def _lines(src: str) -> list:
    diags = lint_source(src.encode(), "t.py", Settings(select=frozenset({"DL003"}))).diagnostics
    return [d.line for d in diags]


@pytest.mark.parametrize("test", ["step % 100 == 0", "(step + 1) % k == 0", "not step % k",
                                  "step % k == k - 1 and step > 0", "step == 0", "0 == step"])
def test_some_iterations_only(test):
    src = HEAD + f"for step in range(300):\n    if {test}:\n        print(w.to(device))\n"
    assert _lines(src) == []


@pytest.mark.parametrize("test", ["'%d' % step", "step > 0", "k == 0"])
def test_other_branches_still_run_most_iterations(test):
    src = HEAD + f"for step in range(300):\n    if {test}:\n        print(w.to(device))\n"
    assert _lines(src) == [7]


def test_else_of_a_periodic_branch_runs_most_iterations():
    src = HEAD + "for step in range(300):\n    if step % k == 0:\n        pass\n    else:\n        print(w.to(device))\n"
    assert _lines(src) == [9]


def test_inner_loop_under_a_periodic_branch_is_its_own_loop():
    src = HEAD + ("for step in range(300):\n    if step % k == 0:\n        for x in range(5):\n"
                  "            print(w.to(device) + x)\n")
    assert _lines(src) == [8]


def test_round_trip_through_numpy_and_arithmetic_is_followed():
    src = ("import numpy as np\nimport torch\ndevice = torch.device('cpu')\nfor i in range(3):\n"
           "    h = torch.randn(2).to(device)\n    a = h.cpu().numpy()\n    b = np.sort(a) * 2 + 1\n"
           "    h2 = torch.from_numpy(b).to(device)\n")
    assert _lines(src) == [6, 8]  # where the value leaves the device, and where it comes back


def test_round_trip_through_an_unknown_function_is_not_followed():
    src = ("import torch\ndevice = torch.device('cpu')\nfor i in range(3):\n"
           "    h = torch.randn(2).to(device)\n    b = postprocess(h.cpu())\n    h2 = b.to(device)\n")
    assert _lines(src) == []


def test_item_into_a_device_tensor_defined_in_the_loop():
    src = ("import torch\ndevice = torch.device('cpu')\nfor i in range(3):\n"
           "    acc = torch.zeros(1).to(device)\n    h = torch.randn(2).to(device)\n    acc += h.max().item()\n")
    assert _lines(src) == [6]


def test_item_read_twice_is_needed_on_the_host():
    src = ("import torch\ndevice = torch.device('cpu')\nacc = torch.zeros(1, device=device)\nfor i in range(3):\n"
           "    h = torch.randn(2).to(device)\n    v = h.max().item()\n    print(v)\n    acc += v\n")
    assert _lines(src) == []


DECODE = """\
import torch
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def decode(model, src, bos, eos, max_len):
    dec_input = torch.LongTensor([[bos]]).to(device)
    out = []
    for i in range(max_len):
        outputs = model(src, dec_input)
        pred = outputs.argmax(dim=1)[-1].item()
        if pred == eos:
            break
        out.append(pred)
        dec_input = torch.cat([dec_input, torch.LongTensor([[pred]]).to(device)], dim=1)
    return out
"""


def test_a_greedy_decoders_token_read_for_its_stop_test_is_not_the_waste():
    """The token `.item()` decides the loop's `break`: it has to reach the host every step, so
    only the way back (`LongTensor([[pred]]).to(device)`) is reported. Trap: a token read only
    to be sent back reports both halves."""
    assert _lines(DECODE) == [14]
    only_back = DECODE.replace("        if pred == eos:\n            break\n", "")
    assert _lines(only_back) == [10, 12]
    # printed every hundredth step: not needed on the host every iteration
    periodic = DECODE.replace("        if pred == eos:\n            break\n", "        if i % 100 == 0:\n            print(pred)\n")
    assert _lines(periodic) == [10, 14]
