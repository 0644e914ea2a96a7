"""DL005 end to end: a checkpoint saved from CUDA tensors, loaded on a CPU-only machine.

Every DL005 fixture with a ``checkpoint`` key in its case.toml reads the checkpoint named
by ``DEVLINT_CHECKPOINT`` when it is set. The before.py program must then fail on a
CPU-only machine and the fixed after.py must run and print what it prints for a
checkpoint saved on the CPU.

* On a machine with CUDA the checkpoint is real: written by this test from tensors on
  ``cuda:0`` (and a TorchScript module scripted on the GPU).
* Everywhere, a byte-faithful stand-in: ``torch.save`` records each storage's device
  only as its location tag, so saving with ``location_tag`` reporting ``"cuda:0"``
  writes the file a GPU machine would write (state_dict checkpoints only; TorchScript
  archives are written by C++ and need the GPU).
"""

from __future__ import annotations

import pytest
import torch

from fixtures_lib import discover_cases, run_program

CASES = [c for c in discover_cases("DL005") if c.extra.get("checkpoint")]


def _linear():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 2)


def _save_state_dict_tagged_cuda(path) -> None:
    import torch.serialization as ser

    original = ser.location_tag
    ser.location_tag = lambda storage: "cuda:0"
    try:
        torch.save(_linear().state_dict(), path)
    finally:
        ser.location_tag = original


def _save_real_cuda(kind: str, path) -> None:
    model = _linear().to("cuda")
    if kind == "jit":
        torch.jit.save(torch.jit.script(model), str(path))
    else:
        torch.save(model.state_dict(), path)


def _check(case, ckpt) -> None:
    env = {"DEVLINT_CHECKPOINT": str(ckpt)}
    reference, _ = run_program(case.after_path)  # its own CPU-saved checkpoint
    assert reference.returncode == 0, reference.stderr[-2000:]
    before, _ = run_program(case.before_path, extra_env=env)
    assert before.returncode != 0, "before.py loaded a CUDA checkpoint on a CPU-only machine"
    assert "CUDA" in before.stderr, before.stderr[-2000:]
    after, _ = run_program(case.after_path, extra_env=env)
    assert after.returncode == 0, after.stderr[-2000:]
    assert after.stdout == reference.stdout


def test_every_dl005_bug_fixture_takes_a_checkpoint():
    assert len(CASES) >= 3


@pytest.mark.parametrize("case", [c for c in CASES if c.extra["checkpoint"] == "state_dict"],
                         ids=lambda c: c.id)
def test_cuda_tagged_checkpoint_needs_map_location_on_cpu(case, tmp_path):
    ckpt = tmp_path / "cuda_tagged.pt"
    _save_state_dict_tagged_cuda(ckpt)
    if not torch.cuda.is_available():  # the stand-in fails exactly as a GPU checkpoint does
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device"):
            torch.load(ckpt)
    _check(case, ckpt)


@pytest.mark.cuda
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_gpu_saved_checkpoint_needs_map_location_on_cpu(case, tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available: cannot write a checkpoint from real CUDA tensors here "
                    "(the CUDA-tagged stand-in test covers the CPU half)")
    ckpt = tmp_path / "gpu.pt"
    _save_real_cuda(case.extra["checkpoint"], ckpt)
    _check(case, ckpt)


def test_test_file_round_trip_across_functions_is_silent():
    """A test file that writes checkpoints and reads them back in a helper (issue 16 item 1)."""
    from devlint.engine import Settings, lint_source

    src = (b"import torch\ndef _load(path):\n    return torch.load(path, weights_only=True)\n"
           b"def test_rt(tmp_path):\n    torch.save({'a': torch.zeros(1)}, tmp_path / 'x.pt')\n"
           b"    assert _load(tmp_path / 'x.pt')['a'].sum() == 0\n")
    sel = Settings(select=frozenset({"DL005"}))
    assert lint_source(src, "test_ckpt.py", sel).diagnostics == []
    # the same code outside a test file is still reported
    assert [d.code for d in lint_source(src, "ckpt.py", sel).diagnostics] == ["DL005"]


def test_evaluation_script_named_test_is_not_a_test_round_trip():
    """A research repository's `test_benchmark.py` that saves images (`save_image`) and loads
    a GPU-trained checkpoint is an evaluation script, not a test reading back what it wrote."""
    from devlint.engine import Settings, lint_source

    src = (b"import torch\nimport torchvision.utils as utils\nfrom model import Generator\n"
           b"model = Generator(4).eval()\nif torch.cuda.is_available():\n    model = model.cuda()\n"
           b"model.load_state_dict(torch.load('epochs/' + NAME))\n"
           b"for i, img in enumerate(images):\n    utils.save_image(model(img), f'out_{i}.png')\n")
    sel = Settings(select=frozenset({"DL005"}))
    assert [d.code for d in lint_source(src, "test_benchmark.py", sel).diagnostics] == ["DL005"]
    # a real test module of that name that writes checkpoints still reads back its own files
    test = src + b"def test_round_trip(tmp_path):\n    torch.save({'a': 1}, tmp_path / 'x.pt')\n"
    assert lint_source(test, "test_benchmark.py", sel).diagnostics == []
