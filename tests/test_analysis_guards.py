"""The guard model (devlint/analysis/guards.py) and the file's call graph
(devlint/analysis/calls.py), asserted fact by fact on small source files."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from devlint.analysis import guards
from devlint.analysis.calls import UNKNOWN, call_graph
from devlint.facts import prescan


def facts_of(src: str):
    src = textwrap.dedent(src)
    module = cst.parse_module(src)
    return prescan(module, src.encode())


def expr(facts, code: str) -> cst.BaseExpression:
    """An expression parsed in the file's context (aliases come from the facts)."""
    return cst.parse_expression(code)


def func(facts, name: str) -> cst.FunctionDef:
    for stmt in facts.module.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            return stmt
        if isinstance(stmt, cst.ClassDef):
            for m in stmt.body.body:
                if isinstance(m, cst.FunctionDef) and m.name.value == name:
                    return m
    raise KeyError(name)


def cls(facts, name: str) -> cst.ClassDef:
    return next(s for s in facts.module.body if isinstance(s, cst.ClassDef) and s.name.value == name)


# ---- guard_polarity --------------------------------------------------------------------

@pytest.mark.parametrize("test,want", [
    ("torch.cuda.is_available()", 1),
    ("not torch.cuda.is_available()", -1),
    # any package's own CUDA check asks the same question (`import torch_1k as T`, `cupy`)
    ("T.cuda.is_available()", 1),
    ("T.mps.is_available()", 0),
    ("T.is_available()", 0),
    ("use_cuda", 1),  # assigned from is_available()
    ("args.cuda and torch.cuda.is_available()", 1),
    ("args.no_cuda", -1),
    ("x.is_cuda", 1),
    ("device.type == 'cuda'", 1),
    ("device.type != 'cuda'", -1),
    ("device == 'cpu'", -1),
    ("device == torch.device('cuda')", 1),  # the device object, spelled as torch builds it
    ("torch.device('cuda:0') != device", -1),
    ("device == torch.device('cpu')", -1),
    ("device == torch.device(name)", 0),
    ("torch.cuda.device_count() > 0", 1),
    ("torch.cuda.device_count() > rank", 1),
    ("torch.cuda.device_count() >= world_size", 1),
    ("torch.cuda.device_count() >= 0", 0),
    ("torch.cuda.device_count() < 2", -1),
    ("torch.cuda.device_count() == 0", -1),
    ("rank < torch.cuda.device_count()", 1),
    ("torch.cuda.device_count()", 1),
    ("backend == 'nccl'", 1),
    ("dist.get_backend() != 'nccl'", -1),
    ("backend == 'gloo'", 0),
    ("sys.platform == 'linux'", 0),
    ("torch.accelerator.is_available()", 0),  # MPS too: not a CUDA guard
    # a user's switch compared with a number or a bool says what the switch says
    ("args.cuda > 0", 1),
    ("args.cuda == 1", 1),
    ("args.cuda is True", 1),
    ("args.cuda == 0", -1),
    ("args.cuda != 0", 1),
    ("args.no_cuda == False", 1),
    ("args.cuda < 1", 0),
    ("args.epochs > 0", 0),  # not a switch
    ("args.visible_gpus != '-1'", 1),  # a GPU option compared as typed
    ("args.visible_gpus == '-1'", -1),
])
def test_guard_polarity(test, want):
    f = facts_of("import torch\nuse_cuda = torch.cuda.is_available()\n")
    assert guards.guard_polarity(f, expr(f, test)) == want
    assert f.guard_polarity(expr(f, test)) == want  # facts.py delegates


def test_availability_flag_and_device_choice_test():
    f = facts_of("import torch\nok = torch.cuda.is_available()\n")
    assert "ok" in f.guard_flags
    assert guards.is_availability_expr(f, expr(f, "ok"))
    assert not guards.is_availability_expr(f, expr(f, "not ok"))
    # the accelerator-style definition is a device choice (one device variable per file)
    assert guards.is_device_choice_test(f, expr(f, "torch.accelerator.is_available()"))
    assert not guards.is_device_choice_test(f, expr(f, "len(x) > 2"))
    g = facts_of("import torch\ndevice = torch.accelerator.current_accelerator() "
                 "if torch.accelerator.is_available() else torch.device('cpu')\n")
    assert [dv.name for dv in g.device_vars] == ["device"]


# ---- decorators and marks -----------------------------------------------------------------

GATED = '''
import unittest
import pytest
import torch
from lightning.pytorch.utilities.testing import RunIf as Only
from helpers import requires_cuda as needs_hw
from tests_helpers import skip_if_no_cuda

requires_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
slow = pytest.mark.slow

@Only(min_cuda_gpus=1)
def test_runif(): ...

@pytest.mark.skipif(not torch.cuda.is_available(), reason="cuda")
def test_skipif(): ...

@unittest.skipUnless(torch.cuda.is_available(), "cuda")
def test_skipunless(): ...

@needs_hw
def test_alias(): ...

@skip_if_no_cuda
def test_helper(): ...

@requires_gpu
def test_bound_mark(): ...

@two_gpus
def test_two(): ...

@pytest.mark.gpu
def test_marker(): ...

@slow
def test_slow(): ...

@pytest.mark.skipif(sys.platform == "win32", reason="posix")
def test_posix(): ...

@Only(min_cuda_gpus=0)
def test_zero(): ...

def test_plain(): ...
'''


@pytest.mark.parametrize("name,want", [
    ("test_runif", True), ("test_skipif", True), ("test_skipunless", True), ("test_alias", True),
    ("test_helper", True), ("test_bound_mark", True), ("test_two", True), ("test_marker", True),
    ("test_slow", False), ("test_posix", False), ("test_zero", False), ("test_plain", False),
])
def test_decorator_guards(name, want):
    f = facts_of(GATED)
    assert guards.decorator_guards(f, func(f, name)) is want
    assert f.decorator_guards(func(f, name)) is want


def test_gpu_marks_are_the_names_bound_to_gpu_marks():
    f = facts_of(GATED)
    assert guards.model(f).gpu_marks == {"requires_gpu", "two_gpus"}
    assert not guards.model(f).file_guarded


def test_pytest_param_with_a_gpu_mark():
    f = facts_of(GATED)
    yes = expr(f, "pytest.param('cuda', marks=requires_gpu)")
    listed = expr(f, "pytest.param('cuda', marks=[Only(min_cuda_gpus=1)])")
    no = expr(f, "pytest.param('cuda', marks=slow)")
    bare = expr(f, "pytest.param('cuda')")
    assert guards.param_guards(f, yes) and guards.param_guards(f, listed)
    assert not guards.param_guards(f, no) and not guards.param_guards(f, bare)


@pytest.mark.parametrize("line,want", [
    ("pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')", True),
    ("pytestmark = [pytest.mark.slow, RunIf(min_cuda_gpus=1)]", True),
    ("pytestmark = pytest.mark.slow", False),
])
def test_module_level_pytestmark_guards_the_file(line, want):
    f = facts_of(f"import pytest\nimport torch\nfrom helpers import RunIf\n{line}\n")
    assert guards.model(f).file_guarded is want


# ---- statements that ensure a GPU ----------------------------------------------------------

ENSURE = '''
import sys
import torch
import torch.distributed as dist

def check_gpu():
    if not torch.cuda.is_available():
        sys.exit("this script needs a GPU")

def setup(rank):
    dist.init_process_group("nccl", rank=rank, world_size=2)

def check_then_setup(rank):
    check_gpu()

def maybe(flag):
    if flag:
        return
    assert torch.cuda.is_available()

def warn_only():
    if not torch.cuda.is_available():
        print("no GPU")

class Trainer:
    def __init__(self, rank):
        assert torch.cuda.device_count() > rank
        self.rank = rank

    def fit(self):
        pass

class Plain:
    def __init__(self):
        self.x = 1
'''


def test_functions_that_exit_without_a_gpu():
    f = facts_of(ENSURE)
    m = guards.model(f)
    assert {"check_gpu", "setup", "check_then_setup", "Trainer"} <= m.ensuring
    assert "maybe" not in m.ensuring  # returns early before its assert on another condition
    assert "warn_only" not in m.ensuring  # prints and goes on
    assert "Plain" not in m.ensuring
    assert m.guarded_classes == {cls(f, "Trainer")}


@pytest.mark.parametrize("stmt,want", [
    ("assert torch.cuda.is_available()\n", True),
    ("assert torch.cuda.device_count() > rank\n", True),
    ("check_gpu()\n", True),
    ("trainer = Trainer(0)\n", True),
    ("dist.init_process_group(backend='nccl')\n", True),
    ("dist.init_process_group('gloo')\n", False),
    ("if not torch.cuda.is_available():\n    raise SystemExit('GPU required')\n", True),
    ("if torch.cuda.is_available():\n    pass\nelse:\n    sys.exit(1)\n", True),
    ("warn_only()\n", False),
    ("print('hi')\n", False),
])
def test_statement_ensures_cuda(stmt, want):
    f = facts_of(ENSURE)
    assert guards.statement_ensures_cuda(f, cst.parse_statement(stmt)) is want


METHODS = ENSURE + '''
def train(model):
    assert torch.cuda.is_available()

class Bench:
    def prepare(self):
        check_gpu()

bench = Bench()
'''


@pytest.mark.parametrize("stmt,want", [
    ("train(model)\n", True),  # the file's `def train`
    ("model.train()\n", False),  # nn.Module.train: a method name alone runs no `def train`
    ("self.prepare()\n", True),  # a method of the file that checks for a GPU
    ("bench.prepare()\n", True),  # ... called on an instance the file builds
    ("loader.prepare()\n", False),  # ... not on something else
])
def test_a_method_call_ensures_only_on_an_instance_of_its_class(stmt, want):
    f = facts_of(METHODS)
    assert guards.statement_ensures_cuda(f, cst.parse_statement(stmt)) is want


# ---- CUDA extension code --------------------------------------------------------------------

def test_autograd_function_feeding_a_compiled_kernel_is_cuda_only():
    f = facts_of('''
        import torch
        from torch.autograd import Function
        from . import _C

        class RoIAlign(Function):
            @staticmethod
            def forward(ctx, x):
                out = torch.cuda.FloatTensor(x.size(0))
                _C.roi_align_forward(x, out)
                return out
        ''')
    assert guards.model(f).cuda_extension and guards.model(f).file_guarded


def test_cpp_extension_load_and_torch_ops_count_as_kernels():
    f = facts_of('''
        import torch
        from torch.utils.cpp_extension import load
        ext = load(name="fused", sources=["fused.cu"])
        class Fused(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return ext.forward(x)
        ''')
    assert guards.model(f).cuda_extension
    g = facts_of('''
        import torch
        class Op(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return torch.ops.mylib.fused(x)
        ''')
    assert guards.model(g).cuda_extension


def test_a_pure_python_autograd_function_is_not_extension_code():
    f = facts_of('''
        import numpy as np
        import torch
        class Clip(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return torch.from_numpy(np.clip(x.numpy(), 0, 1))
        ''')
    assert not guards.model(f).cuda_extension and not guards.model(f).file_guarded


def test_model_is_computed_once_per_file():
    f = facts_of(ENSURE)
    assert guards.model(f) is guards.model(f)


# ---- the call graph -----------------------------------------------------------------------

CALLS = '''
import torch

def make(n, device="cuda"):
    return torch.zeros(n, device=device)

def run(dev):
    a = make(2, device="cpu")
    b = make(3, dev)
    c = make(*sizes)
    return a, b, c

class Trainer:
    def __init__(self, model, gpu_id):
        self.model = model.to(gpu_id)

    def step(self, x):
        return self.model(x)

def main():
    t = Trainer(None, 0)
    t.step(1)
    register(callback=run)
'''


def test_call_sites_and_bound_arguments():
    f = facts_of(CALLS)
    g = call_graph(f)
    make = g.funcs["make"]
    sites = g.callers_of(func(f, "make"))
    assert len(sites) == 3 and all(caller is func(f, "run") for _, caller in sites)
    bound = [make.bound_arg(call, "device") for call, _ in sites]
    assert isinstance(bound[0], cst.SimpleString) and bound[0].value == '"cpu"'
    assert isinstance(bound[1], cst.Name) and bound[1].value == "dev"
    assert bound[2] is UNKNOWN
    init = g.funcs["Trainer"]
    (call, caller), = g.callers_of(func(f, "__init__"))
    assert caller is func(f, "main")
    assert isinstance(init.bound_arg(call, "gpu_id"), cst.Integer)  # `self` is not counted
    assert len(g.callers_of(func(f, "step"))) == 1


def test_a_function_used_as_a_value_has_unknown_callers():
    f = facts_of(CALLS)
    assert call_graph(f).callers_of(func(f, "run")) is None  # register(callback=run)
    assert call_graph(f) is call_graph(f)


# ---- more guards: project spellings, handled probes, backends, CUDA-only packages ----------

@pytest.mark.parametrize("test,want", [
    ("device == 'gpu'", 1),
    ("IS_CUDA_SYSTEM or IS_ROCM_SYSTEM", 1),  # ROCm builds run the torch.cuda API
    ("IS_CUDA_SYSTEM or IS_MPS_SYSTEM", 0),
    ("shipping", 0),
    ("all([x.is_cuda, x.device.index == 1])", 1),
    ("any([x.is_cuda, flag])", 0),
    ("any([x.is_cuda, use_cuda])", 1),
    ("state.distributed_type == DistributedType.MULTI_GPU", 1),
    ("state.distributed_type != DistributedType.MULTI_GPU", -1),
    ("state.distributed_type == DistributedType.MULTI_CPU", 0),
    ("kind == Kind.default", 0),
])
def test_project_spellings_of_a_gpu_branch(test, want):
    f = facts_of("import torch\n")
    assert guards.guard_polarity(f, expr(f, test)) == want


@pytest.mark.parametrize("handler,want", [
    ("except RuntimeError:", True),
    ("except (ValueError, AssertionError):", True),
    ("except Exception as e:", True),
    ("except:", True),
    ("except ValueError:", False),
    ("except ImportError:", False),
])
def test_try_guards_when_the_failure_is_handled(handler, want):
    stmt = cst.parse_statement(f"try:\n    torch.ones(1, device='cuda')\n{handler}\n    pass\n")
    assert guards.try_guards(stmt) is want


def test_backend_class_that_declares_its_cuda_availability():
    f = facts_of('''
        import torch
        class CUDAAccelerator:
            @staticmethod
            def is_available():
                return num_cuda_devices() > 0
            def devices(self, ids):
                return [torch.device("cuda", i) for i in ids]
        class Other:
            @staticmethod
            def is_available():
                return True
        ''')
    assert guards.model(f).guarded_classes == {cls(f, "CUDAAccelerator")}


def test_code_importing_a_cuda_only_package():
    f = facts_of('''
        import torch
        def export_engine(x):
            import tensorrt as trt
            class Calibrator:
                def get_batch(self):
                    return x.to("cuda")
            return Calibrator
        def plain(x):
            import numpy
            return x.cuda()
        ''')
    m = guards.model(f)
    assert m.cuda_only_functions == {func(f, "export_engine")}
    assert not m.file_guarded
    g = facts_of("import cupy as cp\nimport torch\nx = torch.ones(1).cuda()\n")
    assert guards.model(g).file_guarded
    # unsloth raises at import without a GPU ("Requires at least 1 GPU"): a fine-tuning script on it
    g = facts_of("from unsloth import FastLanguageModel\nimport torch\nx = torch.ones(1).to('cuda')\n")
    assert guards.model(g).file_guarded
    g = facts_of("from unslothed import FastLanguageModel\nimport torch\nx = torch.ones(1).to('cuda')\n")
    assert not guards.model(g).file_guarded


# ---- value flow through the file's calls ------------------------------------------------------

from devlint.analysis.calls import guarded_by_callers, literals_reaching, param_places  # noqa: E402

FLOW = '''
import torch

def autocast_on(device="cuda"):
    return torch.is_autocast_enabled(device)

def zeros(n, device="cuda"):
    return torch.zeros(n, device=device)

class Erase:
    def __init__(self, device="cuda"):
        self.device = device

    def __call__(self, x):
        return x + torch.empty(1, device=self.device)

class Scaler:
    def __init__(self, device="cuda"):
        self.scaler = torch.amp.GradScaler(device=device)

class Trainer:
    def __init__(self, model, gpu_id):
        self.model = model.to(gpu_id)

def main(device):
    Trainer(None, device)

def helper():
    return 1

def outer():
    return helper()

if __name__ == "__main__":
    device = 0
    main(device)
    if torch.cuda.is_available():
        outer()
    main(1)
'''


@pytest.mark.parametrize("fn,param,cls_name,want", [
    ("autocast_on", "device", None, False),
    ("zeros", "device", None, True),
    ("__init__", "device", "Erase", True),  # self.device reaches torch.empty(device=...)
    ("__init__", "device", "Scaler", False),  # GradScaler(device=...) is a device type
])
def test_param_places(fn, param, cls_name, want):
    f = facts_of(FLOW)
    c = cls(f, cls_name) if cls_name else None
    node = next(m for m in c.body.body if isinstance(m, cst.FunctionDef)) if c else func(f, fn)
    assert param_places(node, param, c) is want


def test_literals_reaching_a_parameter_through_two_calls():
    f = facts_of(FLOW)
    init = next(m for m in cls(f, "Trainer").body.body if isinstance(m, cst.FunctionDef))
    found = [(type(lit).__name__, lit.value, via, only) for lit, via, only in literals_reaching(f, init, "gpu_id")]
    # `device = 0` (used once: by main(device)) and the literal `main(1)`; main's `device` passes on only
    assert sorted(found) == [("Integer", "0", "main", True), ("Integer", "1", "main", True)]


def test_guarded_by_callers():
    f = facts_of(FLOW)
    g = call_graph(f)
    (site_outer, _), = g.callers_of(func(f, "outer"))
    (site_helper, _), = g.callers_of(func(f, "helper"))
    guarded = {site_outer: True, site_helper: False}
    assert guarded_by_callers(g, func(f, "outer"), guarded, {})
    assert guarded_by_callers(g, func(f, "helper"), guarded, {})  # its only caller is guarded
    assert not guarded_by_callers(g, func(f, "outer"), {site_outer: False}, {})
    assert not guarded_by_callers(g, func(f, "zeros"), guarded, {})  # no caller in the file


def test_editing_an_analysis_module_invalidates_the_lint_cache():
    import os

    from devlint.cache import code_fingerprint

    path = guards.__file__
    st = os.stat(path)
    code_fingerprint.cache_clear()
    before = code_fingerprint()
    try:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        code_fingerprint.cache_clear()
        assert code_fingerprint() != before
    finally:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        code_fingerprint.cache_clear()
