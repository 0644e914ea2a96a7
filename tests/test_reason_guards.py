"""Reasons a line is fine that sit in what the code shows, not in a name (seventh round of the
ecosystem check): `torch` brought in by a star import, a Triton kernel launch, a None-checked GPU
index, a dtype's limits. Each has its trap: the same code without the reason keeps its finding."""

from __future__ import annotations

import textwrap

from devlint import registry
from devlint.engine import fix_source, lint_source
from devlint.settings import Settings


def _codes(src: str, filename: str = "train.py") -> list:
    settings = Settings(select=registry.resolve())
    diags = lint_source(textwrap.dedent(src).encode(), filename, settings).diagnostics
    return sorted((d.line, d.code) for d in diags)


# ---- `from utils import *` brings `torch` -----------------------------------------------------

STAR_ASSERTED = '''\
    from few_shot.callbacks import *

    assert torch.cuda.is_available()
    device = torch.device("cuda")
    loss_fn = torch.nn.NLLLoss().cuda()
    '''

STAR_UNGUARDED = '''\
    from few_shot.callbacks import *

    x = batch.cuda()
    torch.cuda.synchronize()
    '''


def test_a_star_imported_torch_is_torch_and_its_assert_guards_the_script():
    assert _codes(STAR_ASSERTED) == []


def test_a_star_imported_torch_without_a_guard_keeps_its_findings():
    # before, `torch.cuda.synchronize()` was not even recognised: `torch` was an unknown name
    assert _codes(STAR_UNGUARDED) == [(3, "DL002"), (4, "DL004")]


def test_a_file_that_binds_torch_itself_is_not_read_through_the_star():
    src = STAR_UNGUARDED.replace("from few_shot.callbacks import *\n",
                                 "from few_shot.callbacks import *\ntorch = load_backend()\n")
    assert (5, "DL004") not in _codes(src)


def test_fixing_a_star_imported_torch_script_is_valid_and_stable():
    src = textwrap.dedent(STAR_UNGUARDED).encode()
    settings = Settings(select=registry.resolve(), unsafe_fixes=True)
    fixed = fix_source(src, "train.py", settings).source
    compile(fixed, "train.py", "exec")
    assert b"torch.cuda.is_available()" in fixed
    assert fixed.count(b"import torch\n") <= 1  # an explicit import at most once
    assert fix_source(fixed, "train.py", settings).source == fixed  # idempotent


# ---- a Triton kernel launch needs a GPU ------------------------------------------------------

TRITON = '''\
    import torch
    import triton
    import triton.language as tl


    @triton.autotune(configs=[], key=["n"])
    @triton.jit
    def add_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)


    def add(x):
        out = torch.empty(x.shape, device="cuda")
        grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)
        add_kernel[grid](x, out, x.numel())
        return out


    def reference(x):
        return torch.empty(x.shape, device="cuda")


    def sometimes(x, fast):
        out = torch.empty(x.shape, device="cuda")
        if fast:
            add_kernel[(1,)](x, out, x.numel())
        return out


    def table(x, ops):
        out = torch.empty(x.shape, device="cuda")
        ops["add"](x, out)
        return out
    '''


def test_a_function_launching_a_triton_kernel_is_cuda_only():
    codes = _codes(TRITON, "kernels.py")
    assert (13, "DL002") not in codes  # add(): launches add_kernel
    # traps: no launch, a launch on one branch only, a subscript call that is no kernel
    assert {(20, "DL002"), (24, "DL002"), (31, "DL002")} <= set(codes)


def test_importing_triton_alone_guards_nothing():
    src = TRITON.replace('    @triton.autotune(configs=[], key=["n"])\n    @triton.jit\n', "")
    assert (11, "DL002") in _codes(src, "kernels.py")  # two decorator lines fewer


# the wrapper's callers: a test or a benchmark handing it GPU tensors runs only on a GPU too
TRITON_CALLERS = TRITON + '''

    def check():
        for n in (256, 1024):
            x = torch.randn(n, device="cuda")
            torch.testing.assert_close(add(x), x + x)


    def bench(x, source):
        y = torch.randn(8, device="cuda")
        if source == "torch":
            ms = triton.testing.do_bench(lambda: x + y)
        else:
            ms = triton.testing.do_bench(lambda: add(x))
        return ms


    def compare(x, fast):
        y = torch.randn(8, device="cuda")
        if fast:
            return add(y)
        return y


    if __name__ == "__main__":
        z = torch.randn(8, device="cuda")
        print(add(z))
    '''


def test_a_function_calling_a_triton_wrapper_or_timing_on_the_gpu_is_cuda_only():
    codes = set(_codes(TRITON_CALLERS, "kernels.py"))
    assert not {(38, "DL002"), (43, "DL002"), (59, "DL002")} & codes  # check(), bench(), __main__
    assert (52, "DL002") in codes  # trap: compare() calls the wrapper on one branch only


def test_a_main_block_that_calls_no_kernel_keeps_its_finding():
    src = TRITON_CALLERS.replace("        print(add(z))\n", "        print(reference(z))\n")
    assert (59, "DL002") in _codes(src, "kernels.py")


def test_kernels_run_in_tritons_cpu_interpreter_guard_nothing():
    src = 'import os\nos.environ["TRITON_INTERPRET"] = "1"\n' + textwrap.dedent(TRITON_CALLERS)
    codes = set(_codes(src, "kernels.py"))
    assert {(15, "DL002"), (40, "DL002"), (61, "DL002")} <= codes  # add(), check(), __main__: run on the CPU
    commented = src.replace('os.environ["TRITON_INTERPRET"]', '# os.environ["TRITON_INTERPRET"]')
    assert (61, "DL002") not in _codes(commented, "kernels.py")


MESH = '''\
    import os
    import torch
    from torch.distributed.device_mesh import init_device_mesh


    def setup():
        mesh = init_device_mesh("cuda", (int(os.environ["WORLD_SIZE"]),))
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        return mesh


    def main():
        mesh = setup()
        x = torch.randn(4, device="cuda")
        print(mesh, x)
    '''


def test_a_cuda_device_mesh_runs_on_gpus():
    assert _codes(MESH, "main.py") == []


def test_a_cpu_device_mesh_guards_nothing():
    codes = set(_codes(MESH.replace('init_device_mesh("cuda"', 'init_device_mesh("cpu"'), "main.py"))
    assert (14, "DL002") in codes


# ---- `model.train()` is no call of the script's `def train` ---------------------------------

TRAIN = '''\
    import sys
    import torch


    def main(model, data):
        if not torch.cuda.is_available():
            sys.exit("needs a GPU")
        train(model, data)


    def train(model, data):
        model.train()
        for x in data:
            model(batch(x))


    def batch(x):
        return x.pin_memory()


    if __name__ == "__main__":
        main(torch.nn.Linear(2, 2), [torch.ones(2)])
    '''


def test_a_method_call_of_the_same_name_is_no_unguarded_caller():
    assert _codes(TRAIN) == []


def test_a_bare_unguarded_call_of_the_function_keeps_the_finding():
    src = TRAIN.replace('    if __name__ == "__main__":\n', '    train(None, [])\n\n    if __name__ == "__main__":\n')
    assert (18, "DL004") in _codes(src)


# ---- eighth round: the first id of a GPU list option ---------------------------------------------

FIRST_GPU = '''\
    import torch

    def setup(opt):
        if opt.gpus[0] >= 0:
            opt.device = torch.device('cuda')
        else:
            opt.device = torch.device('cpu')
        return opt
    '''


def test_the_first_id_of_a_gpu_list_option_compared_with_zero_is_the_users_switch():
    # `--gpus -1` is the CPU (CenterNet's and FairMOT's `opts.py`): `opt.gpus[0] >= 0` chose a GPU
    assert _codes(FIRST_GPU) == []


def test_the_first_item_of_another_option_guards_nothing():
    assert _codes(FIRST_GPU.replace("opt.gpus[0]", "opt.scales[0]")) == [(5, "DL002")]


# ---- eighth round: diffusers' xformers attention raises without CUDA ------------------------------

XFORMERS = '''\
    import torch
    from diffusers import UNet2DConditionModel

    def load(path):
        unet = UNet2DConditionModel.from_pretrained(path)
        unet.enable_xformers_memory_efficient_attention()
        generator = torch.Generator(device=torch.device("cuda:0"))
        return unet.to("cuda"), generator
    '''


def test_code_after_enabling_xformers_attention_runs_only_with_cuda():
    # diffusers' `set_use_memory_efficient_attention_xformers` raises ValueError without CUDA
    assert _codes(XFORMERS) == []


def test_enabling_xformers_only_where_cuda_is_up_guards_nothing_after_it():
    src = XFORMERS.replace("        unet.enable_xformers_memory_efficient_attention()\n",
                           "        if torch.cuda.is_available():\n"
                           "            unet.enable_xformers_memory_efficient_attention()\n")
    assert _codes(src) == [(8, "DL002"), (9, "DL002")]


# ---- thirteenth round: transformers' FlashAttention 2 request raises without a GPU ------------------

FLASH = '''\
    import torch
    from transformers import AutoModelForCausalLM

    def get_models(path):
        model = AutoModelForCausalLM.from_pretrained(
            path, attn_implementation="flash_attention_2", device_map="cuda:0")
        ref = AutoModelForCausalLM.from_pretrained(path, use_flash_attention_2=True).to("cuda:1")
        model = model.to("cuda:0")
        return model, ref
    '''


def test_a_flash_attention_2_request_and_what_follows_it_run_only_with_a_gpu():
    # transformers' `_check_and_enable_flash_attn_2`: ImportError without flash_attn (every CPU-only
    # build), ValueError on a CUDA build with no GPU
    assert _codes(FLASH) == []


def test_another_attention_or_one_chosen_at_run_time_guards_nothing():
    assert _codes(FLASH.replace('"flash_attention_2"', '"sdpa"').replace("use_flash_attention_2=True", "low_cpu_mem_usage=True")) == [
        (6, "DL002"), (7, "DL002"), (8, "DL002")]
    assert (6, "DL002") in _codes(FLASH.replace('attn_implementation="flash_attention_2"', "attn_implementation=attn")
                                  .replace("use_flash_attention_2=True", "use_flash_attention_2=flash"))


# ---- fifteenth round (fresh19): a predicate that first returns False, `getattr(dev, "type")`,
# ---- `contextlib.suppress(Exception)` ----------------------------------------------------------

EARLY_FALSE = '''\
    import torch

    def _supported() -> bool:
        if not torch.cuda.is_available():
            return False
        try:
            return torch.cuda.get_device_capability()[0] >= 8
        except Exception:
            return True

    def preferred():
        if not _supported():
            return False
        return torch.zeros(3, device=torch.device("cuda", 0)).sum() > 0
    '''


def test_a_predicate_that_first_returns_false_without_cuda_guards_its_callers():
    assert _codes(EARLY_FALSE) == []


def test_a_predicate_that_returns_false_when_cuda_is_up_guards_nothing():
    src = EARLY_FALSE.replace("if not torch.cuda.is_available():", "if torch.cuda.is_available():")
    assert _codes(src) == [(14, "DL002")]


def test_a_predicate_whose_first_return_is_truthy_guards_nothing():
    src = EARLY_FALSE.replace("            return False\n        try", "            return True\n        try")
    assert _codes(src) == [(14, "DL002")]


GETATTR_TYPE = '''\
    import torch

    def mem_util(device):
        dev = device if isinstance(device, torch.device) else torch.device(device)
        if getattr(dev, "type", "") != "cuda":
            return None
        return torch.cuda.mem_get_info(torch.device("cuda", dev.index))
    '''


def test_a_device_type_read_through_getattr_guards_like_the_attribute():
    assert _codes(GETATTR_TYPE) == []


def test_another_attribute_read_through_getattr_guards_nothing():
    assert _codes(GETATTR_TYPE.replace('"type"', '"name"')) == [(7, "DL002")]


SUPPRESSED = '''\
    import contextlib
    import torch

    def free_memory(i):
        with contextlib.suppress(Exception):
            return torch.cuda.mem_get_info(torch.device("cuda", i))
    '''


def test_a_cuda_probe_under_suppress_exception_is_handled_like_try_except():
    assert _codes(SUPPRESSED) == []


def test_suppressing_an_unrelated_error_guards_nothing():
    assert _codes(SUPPRESSED.replace("suppress(Exception)", "suppress(KeyError)")) == [(6, "DL002")]


def test_an_early_false_predicate_about_something_else_keeps_what_its_name_says_of_dist():
    # `is_dist_avail_and_initialized()` starts `if not dist.is_available(): return False` (no CUDA
    # question): the distributed model still reads it as "a process group is up"
    src = '''\
    import torch
    import torch.distributed as dist

    def is_dist_avail_and_initialized():
        if not dist.is_available():
            return False
        if not dist.is_initialized():
            return False
        return True

    def sync(x):
        if not is_dist_avail_and_initialized():
            return
        t = torch.tensor([x], device="cuda")
        dist.all_reduce(t)

    def main(rank):
        dist.init_process_group("nccl", rank=rank, world_size=2)
    '''
    assert _codes(src) == []


# ---- code after a module-level `assert False` / `raise` / `sys.exit()` never runs -----------------

STOPPED = '''\
    import sys
    import torch

    x = torch.zeros(3).cuda()
    assert False, "the rest is unfinished"
    y = torch.zeros(3).cuda()
    '''


def test_nothing_after_a_module_level_stop_is_reported():
    assert _codes(STOPPED) == [(4, "DL007")]
    assert _codes(STOPPED.replace('assert False, "the rest is unfinished"', "sys.exit(0)")) == [(4, "DL007")]
    assert _codes(STOPPED.replace('assert False, "the rest is unfinished"', "raise SystemExit")) == [(4, "DL007")]


def test_a_conditional_or_real_assertion_stops_nothing():
    assert _codes(STOPPED.replace("assert False", "assert len(sys.argv) > 1")) == [(4, "DL007"), (6, "DL007")]
    assert _codes(STOPPED.replace('assert False, "the rest is unfinished"',
                                  "if len(sys.argv) < 2:\n        sys.exit(0)")) == [(4, "DL007"), (7, "DL007")]


def test_a_notebook_cell_that_raises_leaves_later_cells_reported(tmp_path):
    import json

    nb = {"cells": [{"cell_type": "code", "source": ["import torch\n", "raise SystemExit('stop')\n"],
                     "metadata": {}, "outputs": [], "execution_count": None},
                    {"cell_type": "code", "source": ["x = torch.zeros(3).cuda()\n"], "metadata": {}, "outputs": [],
                     "execution_count": None}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    from devlint.runner import process_source
    path = tmp_path / "demo.ipynb"
    path.write_text(json.dumps(nb))
    out = process_source(path.read_bytes(), str(path), "demo.ipynb", Settings(select=registry.resolve()))
    assert [d.code for d in out.diagnostics] == ["DL007"]


# ---- a branch switched off by hand with a literal never runs ------------------------------------

SWITCHED_OFF = '''\
    import os
    import torch

    def resume(model, path):
        if os.path.isfile(path) and False:
            model.load_state_dict(torch.load(path))
        if 0:
            model = model.cuda()
        device = torch.device("cuda:0") if False else torch.device("cpu")
        return model.to(device)
    '''


def test_a_branch_a_literal_switches_off_never_runs():
    assert _codes(SWITCHED_OFF) == []


def test_a_literal_that_selects_the_branch_keeps_its_findings():
    src = (SWITCHED_OFF.replace("and False", "or True").replace("if 0:", "if 1:")
           .replace("if False else", "if True else"))
    assert _codes(src) == [(6, "DL005"), (8, "DL002"), (9, "DL002")]


def test_the_else_of_a_branch_switched_off_runs():
    src = '''\
    import torch

    def place(x):
        if False:
            pass
        else:
            x = x.cuda()
        return x
    '''
    assert _codes(src) == [(7, "DL002")]


# ---- a branch reached only with CUDA, by elimination along an if/elif chain ---------------------

CHAIN = '''\
    import torch

    def place(model, gpu=None):
        if not torch.cuda.is_available() and not torch.backends.mps.is_available():
            print("using CPU, this will be slow")
        elif gpu is not None and torch.cuda.is_available():
            torch.cuda.set_device(gpu)
            model = model.cuda(gpu)
        elif torch.backends.mps.is_available():
            model = model.to(torch.device("mps"))
        else:
            model = torch.nn.DataParallel(model).cuda()
        return model
    '''


def test_the_last_branch_of_a_chain_that_ruled_out_the_host_needs_cuda():
    """The ImageNet example's chain: no CUDA and no MPS takes the first branch, MPS its own, so
    the final `else` runs only where CUDA is."""
    assert _codes(CHAIN) == []


def test_a_chain_that_leaves_a_way_without_cuda_keeps_its_findings():
    # without the MPS branch, a Mac with MPS (and no CUDA) reaches the `else`
    no_mps = CHAIN.replace('''        elif torch.backends.mps.is_available():
            model = model.to(torch.device("mps"))
''', "")
    assert _codes(no_mps) == [(10, "DL002")]
    # a flag ruled out is no CUDA ruled in: `--cuda` off and no GPU both reach the `else`
    flag = '''\
    import torch

    def place(model, args):
        if args.cuda:
            model = model.cuda()
        elif torch.cuda.is_available():
            print("a GPU is there: pass --cuda")
        else:
            model = model.cuda()
        return model
    '''
    assert _codes(flag) == [(9, "DL002")]


# ---- an assert on which GPU the program runs on ---------------------------------------------------

GPU_NAMED = '''\
    import torch


    def bench(n):
        x = torch.randn(n, n, device="cuda")
        torch.cuda.synchronize()
        return x


    def main():
        device_name = torch.cuda.get_device_name(0)
        assert "B200" in device_name, f"this benchmark assumes B200, got {device_name!r}"
        x = torch.randn(4, 4, device="cuda")
        print(bench(8), x)


    def fp8():
        assert torch.cuda.get_device_capability() >= (8, 9)
        return torch.ones(2, device="cuda")


    if __name__ == "__main__":
        main()
    '''


def test_an_assert_on_the_gpus_name_or_capability_requires_that_gpu():
    """A benchmark that asserts it runs on a B200 (or on SM 8.9+) needs that GPU: what follows
    the assert, the query it checks, and a helper only that code calls are CUDA-only."""
    assert _codes(GPU_NAMED) == []


def test_a_device_query_that_is_only_printed_or_branched_on_keeps_its_findings():
    printed = GPU_NAMED.replace('assert "B200" in device_name', 'print("B200" in device_name)')
    assert _codes(printed) == [(5, "DL002"), (6, "DL004"), (11, "DL004"), (13, "DL002")]
    branched = GPU_NAMED.replace("    assert torch.cuda.get_device_capability() >= (8, 9)\n        return",
                                 "    if torch.cuda.get_device_capability() >= (8, 9):\n            return")
    assert _codes(branched) == [(18, "DL004"), (19, "DL002")]


# ---- `.cuda()` of an attribute that only ever holds a parameter-free module -------------------------

ACTIVATION_ATTR = '''\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, use_cuda):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.act = nn.LeakyReLU(negative_slope=0.1)
            if use_cuda:
                self.fc = self.fc.cuda()
            self.act = self.act.cuda()

        def forward(self, x):
            return self.act(self.fc(x))
    '''


def test_cuda_of_an_attribute_holding_an_activation_moves_nothing():
    """`self.act = nn.LeakyReLU(0.1)` then `self.act = self.act.cuda()`: the module has no
    parameter or buffer, so `.cuda()` touches no tensor and runs on a machine without CUDA.
    Trap: an attribute that holds a module with a parameter (`nn.PReLU()`), or that the class
    also binds to one, keeps the finding."""
    assert _codes(ACTIVATION_ATTR) == []
    assert _codes(ACTIVATION_ATTR.replace("nn.LeakyReLU(negative_slope=0.1)", "nn.PReLU()")) == [(12, "DL002")]
    also = ACTIVATION_ATTR.replace("            self.act = self.act.cuda()\n",
                                   "            self.act = nn.Linear(2, 2)\n            self.act = self.act.cuda()\n")
    assert _codes(also) == [(13, "DL002")]


# ---- a branch the code's own switch never selects ----------------------------------------------------

UNNORMALIZED = '''\
    import torch


    def proximity_cost(images, states, unnormalize=False, s_std=None):
        states = states.view(-1, 4).clone()
        if unnormalize:
            states = states * s_std.cuda()
        return images, states


    cost = proximity_cost(torch.ones(2), torch.ones(4))
    print(cost)
    '''


def test_a_branch_every_call_leaves_switched_off_never_runs():
    """An exported notebook (work at its top, no `__main__` block) whose only call leaves
    `unnormalize` at its `False` default: the `.cuda()` under `if unnormalize:` never runs."""
    assert _codes(UNNORMALIZED) == []


def test_a_switch_some_call_turns_on_or_a_library_function_keeps_its_findings():
    on = UNNORMALIZED.replace("proximity_cost(torch.ones(2), torch.ones(4))",
                              "proximity_cost(torch.ones(2), torch.ones(4), unnormalize=True, s_std=torch.ones(4))")
    assert _codes(on) == [(7, "DL002")]
    library = UNNORMALIZED.replace("\n\n    cost = proximity_cost(torch.ones(2), torch.ones(4))\n    print(cost)\n", "\n")
    assert _codes(library) == [(7, "DL002")]


# ---- an option's CUDA default handed to a function that asks for CUDA before using it --------------

HANDED_OPTION = '''\
    import argparse
    import torch


    def get_device(device_arg):
        if device_arg == "cuda" and torch.cuda.is_available():
            return torch.device("cuda")
        elif device_arg == "mps" and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")


    def run(size, device_name):
        device = get_device(device_name)
        print(torch.ones(size, device=device))


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", type=str, default="cuda")
        args = parser.parse_args()
        run(4, args.device)
    '''


def test_an_option_default_handed_to_a_function_that_checks_cuda_is_chosen_past():
    """`run(4, args.device)` hands the option to `get_device`, which returns the GPU only when
    it is usable (the other branches compare the name with "mps" and fall back to the CPU):
    a run keeping the default `"cuda"` works without CUDA. Trap: `run` placing with the option
    itself keeps the finding."""
    assert _codes(HANDED_OPTION) == []
    placed = HANDED_OPTION.replace("device = get_device(device_name)", "device = torch.device(device_name)")
    assert (20, "DL002") in _codes(placed)
