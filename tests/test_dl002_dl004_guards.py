"""DL002 / DL004 as a user sees them: a file name guards nothing (the fixed script runs on a
CPU-only machine), and one file gets one device variable whatever rules ask for it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from devlint import registry
from devlint.engine import fix_source, lint_source
from devlint.settings import Settings

GPU_SCRIPT = textwrap.dedent('''\
    import torch
    from torch import nn


    def to_gpu(t):
        return t.cuda()


    def cuda_setup():
        torch.cuda.set_device(0)


    if __name__ == "__main__":
        cuda_setup()
        model = nn.Linear(4, 2).cuda()
        x = to_gpu(torch.ones(3, 4))
        torch.cuda.synchronize()
        print(round(model(x).sum().item() * 0 + 1.0, 1))
    ''')

NAMES = ["train_gpu.py", "gpu_train.py", "cuda_train.py", "multi_gpu.py", "gpu.py", "cuda/train.py"]


def _settings(**kw) -> Settings:
    return Settings(select=registry.resolve(["DL002", "DL004"]), **kw)


@pytest.mark.parametrize("filename", NAMES)
def test_a_file_name_is_no_guard(filename):
    diags = lint_source(GPU_SCRIPT.encode(), filename, _settings()).diagnostics
    found = sorted((d.code, d.line) for d in diags)
    assert found == [("DL002", 6), ("DL002", 15), ("DL004", 10), ("DL004", 17)]


def test_the_fixed_gpu_named_script_runs_on_cpu(tmp_path):
    out = fix_source(GPU_SCRIPT.encode(), "train_gpu.py", _settings())
    assert out.remaining == []
    path = tmp_path / "train_gpu.py"
    path.write_bytes(out.source)
    # the original crashes on a CPU-only build at set_device(0); the fixed one runs
    orig = tmp_path / "orig_gpu.py"
    orig.write_text(GPU_SCRIPT)
    env_cmd = [sys.executable, "-c",
               "import torch, runpy, sys; torch.cuda.is_available = lambda: False; "
               "runpy.run_path(sys.argv[1], run_name='__main__')"]
    if not __import__("torch").cuda.is_available():
        bad = subprocess.run(env_cmd + [str(orig)], capture_output=True, text=True, timeout=120)
        assert bad.returncode != 0
    ok = subprocess.run(env_cmd + [str(path)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "1.0"


ONE_VAR = textwrap.dedent('''\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x) + torch.zeros(2)


    x = torch.ones(2, device="cuda").cuda()
    model = Net()
    print(model(torch.randn(3, 4)))
    ''')

LEGACY = textwrap.dedent('''\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x) + torch.zeros(2)


    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(2):
        loss = model(torch.randn(3, 4)).sum()
        loss.backward()
        opt.step()
    ''')


@pytest.mark.parametrize("src", [ONE_VAR, LEGACY], ids=["dl002_nested", "dl010_legacy"])
@pytest.mark.parametrize("style,name", [("accelerator", "device"), ("cuda", "dev"), ("accelerator", "dev")])
def test_one_file_one_device_variable(src, style, name):
    settings = Settings(select=registry.resolve(["DL002", "DL006", "DL010"]), unsafe_fixes=True,
                        fix_style=style, device_name=name)
    out = fix_source(src.encode(), "train.py", settings)
    text = out.source.decode()
    definitions = [ln for ln in text.splitlines() if " = torch." in ln and "is_available()" in ln]
    assert definitions and definitions[0].startswith(f"{name} = "), text
    assert len(definitions) == 1, text
    assert "torch_device" not in text and "device_ =" not in text
    assert not [d for d in out.remaining if d.code in ("DL002", "DL010")]
    compile(text, "train.py", "exec")


CACHE_KEYS = textwrap.dedent('''\
    import torch


    def test_cache_keeps_one_entry_per_device(cache):
        device_0 = torch.device("cuda:0")
        device_1 = torch.device("cuda:1")
        assert cache.get(device_0) is not cache.get(device_1)


    def test_moves_to_the_gpu():
        dev = torch.device("cuda:0")
        assert torch.ones(1).to(dev).is_cuda
    ''')


def test_a_test_device_used_only_as_a_key_is_not_a_placement():
    diags = lint_source(CACHE_KEYS.encode(), "tests/test_cache.py", _settings()).diagnostics
    assert [(d.code, d.line) for d in diags] == [("DL002", 11)]
    # outside a test file the same definitions are device choices: all three are reported
    diags = lint_source(CACHE_KEYS.encode(), "cache_check.py", _settings()).diagnostics
    assert sorted(d.line for d in diags) == [5, 6, 11]


PATTERN_CACHE = textwrap.dedent('''\
    """Patterns kept on the host, handed out on a cuda device when asked."""
    import torch


    class PatternCache:
        def __init__(self):
            self.counts = {}
            self.patterns = {}

        def get(self, key, target_device=None):
            self.counts[key] = self.counts.get(key, 0) + 1
            pattern = self.patterns[key]
            return pattern if target_device is None else pattern.to(target_device)


    cache = PatternCache()
    ''')


def test_a_dicts_get_is_not_a_call_of_the_classs_own_get():
    # `self.counts.get(key, 0)`: the 0 is a count's default, handed to dict.get
    assert lint_source(PATTERN_CACHE.encode(), "cache.py", _settings()).diagnostics == []
    # the class's own `get` called on an instance: the 0 is a device index
    called = PATTERN_CACHE + "print(cache.get('k', 0))\n"
    assert [(d.code, d.line) for d in lint_source(called.encode(), "cache.py", _settings()).diagnostics] == [
        ("DL002", 17)]


FLASH_TEST = textwrap.dedent('''\
    import pytest
    import torch


    def test_flash_path():
        try:
            import flash_attn  # noqa: F401
        except ImportError:
            pytest.skip("flash_attn not installed")
        q = torch.randn(2, 8).cuda()
        assert q.sum().item() == q.sum().item()
    ''')


def test_a_test_that_skips_unless_a_cuda_only_package_imports_runs_only_with_cuda():
    assert lint_source(FLASH_TEST.encode(), "tests/test_flash.py", _settings()).diagnostics == []
    skips = FLASH_TEST.replace('''        try:
            import flash_attn  # noqa: F401
        except ImportError:
            pytest.skip("flash_attn not installed")
''', '''        pytest.importorskip("flash_attn")
''')
    assert lint_source(skips.encode(), "tests/test_flash.py", _settings()).diagnostics == []
    # the handler carries on without the package: the test also runs where it is missing
    carries_on = FLASH_TEST.replace('pytest.skip("flash_attn not installed")', "flash_attn = None")
    assert [(d.code, d.line) for d in lint_source(carries_on.encode(), "tests/test_flash.py", _settings()).diagnostics] \
        == [("DL002", 10)]
    # a package with a CPU build (numpy) says nothing about CUDA
    numpy = FLASH_TEST.replace("import flash_attn", "import numpy")
    assert [(d.code, d.line) for d in lint_source(numpy.encode(), "tests/test_flash.py", _settings()).diagnostics] \
        == [("DL002", 10)]


DDP_SCRIPT = textwrap.dedent('''\
    import torch
    from torch.nn.parallel import DistributedDataParallel


    def wrap(model):
        model = DistributedDataParallel(model.cuda(), device_ids=[torch.cuda.current_device()])
        torch.cuda.synchronize()
        return model


    if __name__ == "__main__":
        wrap(torch.nn.Linear(2, 2))
    ''')


def test_a_model_wrapped_in_ddp_with_device_ids_runs_only_on_gpus():
    assert lint_source(DDP_SCRIPT.encode(), "wrap.py", _settings()).diagnostics == []
    # no device ids (a CPU module, `gloo`): the wrap says nothing about a GPU
    cpu = DDP_SCRIPT.replace("model.cuda(), device_ids=[torch.cuda.current_device()]", "model.cuda()")
    assert [(d.code, d.line) for d in lint_source(cpu.encode(), "wrap.py", _settings()).diagnostics] == [
        ("DL002", 6), ("DL004", 7)]
