from __future__ import annotations

import re
from collections import Counter
from typing import Optional

import libcst as cst

from devlint import lazyre
from devlint.analysis import guards
from devlint.analysis.calls import call_graph, guarded_by_callers
from devlint.diagnostic import Applicability, Fix
from devlint.facts import dotted
from devlint.fixes import torch_ref
from devlint.rule import Invalid, Rule
from devlint.walk import children, nodes

# What `torch.cuda.<name>` does on a CPU-only build (torch 2.13.0+cpu, measured; the list is
# kept honest by tests/test_cuda_api_list.py, which runs every entry on the installed torch).
# Names are relative to `torch.cuda` (`torch.cuda.memory.X` and `torch.cuda.random.X` are
# folded onto `torch.cuda.X`).
RAISES_ON_CPU = frozenset(
    """synchronize set_device current_device get_device_name get_device_properties
    get_device_capability reset_peak_memory_stats reset_max_memory_allocated
    reset_accumulated_memory_stats memory_summary memory_snapshot mem_get_info Stream Event
    ExternalStream CUDAGraph graph device current_stream default_stream
    set_per_process_memory_fraction ipc_collect init get_rng_state can_device_access_peer
    current_blas_handle get_sync_debug_mode set_sync_debug_mode cudart caching_allocator_alloc
    nvtx.range_push nvtx.range_pop nvtx.mark nvtx.range""".split()
)
# Never reported: these work (or quietly do nothing) without CUDA.
SAFE_ON_CPU = frozenset(
    """is_available is_initialized device_count manual_seed manual_seed_all seed seed_all
    empty_cache memory_allocated max_memory_allocated memory_reserved max_memory_reserved
    memory_stats is_bf16_supported get_arch_list get_gencode_flags set_rng_state
    get_rng_state_all list_gpu_processes stream set_stream device_of amp.GradScaler
    amp.autocast""".split()
)
_OPTIMIZER = lazyre.compile(r"optim|opt$|scaler|trainer", re.I)
# Objects whose use spreads through the code that follows: guarding only the constructor
# would leave the uses crashing, so these are reported without a safe fix when bound.
SPREADING = frozenset({"Stream", "Event", "ExternalStream", "CUDAGraph"})
_CONTEXT_ONLY = frozenset({"device", "graph", "nvtx.range"})



# command-line runners: `fire.Fire(main)` at module level runs `main` when the file is executed
_CLI_RUNNERS = frozenset({"fire.Fire", "absl.app.run", "typer.run", "tyro.cli", "jsonargparse.CLI"})


def _is_script(module: cst.Module, facts=None) -> bool:
    """A file that runs code when executed: a `__main__` block, a module-level loop, a
    module-level call statement of a public function defined in the file (`main()`,
    `train(model)`), or one handing such a function to a command-line runner
    (`fire.Fire(main)`). A library's import-time set-up is not that: `_lazy_call(_check)`,
    `register_x(...)`, `benchmarker = _make_default()`, a call handing over a function."""
    defined = {s.name.value for s in module.body if isinstance(s, cst.FunctionDef)}
    for stmt in module.body:
        if isinstance(stmt, (cst.For, cst.While)):
            return True
        if isinstance(stmt, cst.If) and "__main__" in module.code_for_node(stmt.test):
            return True
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if (facts is not None and isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
                        and facts.qualname(small.value.func) in _CLI_RUNNERS):
                    return True
                value = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
                if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
                    continue
                if isinstance(small, cst.Assign) and (not value.args or any(
                        isinstance(t.target, cst.Name) and (t.target.value.startswith("_") or t.target.value.isupper())
                        for t in small.targets)):
                    continue  # `bases = get_test_bases()`, `_run_slow = parse_flag(...)`: module constants
                name = value.func.value
                if (name in defined and not name.startswith(("_", "register"))
                        and not any(isinstance(a.value, cst.Name) and a.value.value in defined for a in value.args)):
                    return True
    return False


def cuda_api_name(q: Optional[str]) -> Optional[str]:
    """``torch.cuda.memory.memory_summary`` -> ``memory_summary``; None outside torch.cuda."""
    if q is None or not q.startswith("torch.cuda."):
        return None
    rest = q[len("torch.cuda."):]
    for sub in ("memory.", "random.", "streams.", "graphs.", "profiler."):
        if rest.startswith(sub):
            return rest[len(sub):]
    return rest


class UnguardedCudaApi(Rule):
    """
    ## What it does
    Flags CUDA runtime calls that raise on a machine without CUDA (`torch.cuda.synchronize()`,
    `set_device`, `current_device`, `get_device_name`, `get_device_properties`,
    `reset_peak_memory_stats`, `memory_summary`, `Stream()`, `Event()`,
    `with torch.cuda.device(i):`, `t.pin_memory()` ...) where no availability check guards
    them. Calls that are harmless without CUDA (`manual_seed_all`, `empty_cache`,
    `device_count`, `memory_allocated`, cudnn flags, `GradScaler`) are never reported, nor
    are calls where the file makes sure of a GPU (`devlint.analysis.guards`): tests gated by a
    GPU mark (`@requires_cuda`, `@RunIf(min_cuda_gpus=1)`,
    `@pytest.mark.skipif(not torch.cuda.is_available(), ...)`, `pytestmark = ...`), code after
    `assert torch.cuda.is_available()`, after `init_process_group("nccl")` or after a call of
    a function of the file that exits without a GPU. A file or function *name* guards
    nothing: `train_gpu.py` crashes on a laptop like any other script. Inside
    functions, only *scripts* are checked (a file with an `if __name__ == "__main__":`
    block, a module-level loop, a module-level call of one of its own public functions, or
    one handing it to a command-line runner such as `fire.Fire(main)`); there a
    `.pin_memory()` raises whatever it pins (a tensor, or a batch class pinning its
    tensors), except a Module or a class's own `pin_memory()` method (the DataLoader calls
    it when asked to pin). A helper stays quiet when every call of it in the file is guarded (by its caller or
    the caller's callers). In a library module the caller decides whether a CUDA-only helper
    runs (devlint does not follow calls across files), except for a training step: a
    function that runs `backward()` / `optimizer.step()` / `optimizer.zero_grad()` (itself or
    in a helper it calls; a loss scaler may run the backward and the step) and calls
    `torch.cuda.synchronize()` unguarded.

    ## Why is this bad?
    A script that otherwise falls back to the CPU crashes with `Torch not compiled with
    CUDA enabled` at the first timing `synchronize()` or the `get_device_name()` in a log
    line. The guard costs nothing on a GPU machine.

    ## Example
    ```python
    for step in range(10):
        loss = train_step()
        torch.cuda.synchronize()
    ```

    ## Use instead
    ```python
    for step in range(10):
        loss = train_step()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    ```

    ## Fix safety
    Safe: the statement is wrapped in `if torch.cuda.is_available():` (or in the file's
    own availability flag, such as `use_cuda = torch.cuda.is_available()`), so on a GPU
    machine it runs exactly as before and on a CPU-only machine it is skipped instead of
    crashing. No fix is offered when the statement binds a name used elsewhere (guarding
    it would leave the name undefined on CPU), for `Stream`/`Event`/`CUDAGraph` objects
    whose use spreads through the code, for `with torch.cuda.device(i):` blocks, and for
    calls inside expressions that are not a statement of their own (`return`, `if` tests,
    lambdas, comprehensions).
    """

    code = "DL004"
    # name, summary, default and prefilter: devlint/catalogue.py

    VALID = [
        "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
        "import torch\ntorch.cuda.manual_seed_all(0)\ntorch.cuda.empty_cache()\nn = torch.cuda.device_count()\n",
        "import torch\nuse_cuda = torch.cuda.is_available()\nif use_cuda:\n    torch.cuda.set_device(0)\n",
        "import torch\ndef f():\n    if not torch.cuda.is_available():\n        return None\n"
        "    return torch.cuda.get_device_name(0)\n",
        "import torch\ndef f(device):\n    if device.type == 'cuda':\n        torch.cuda.synchronize()\n",
        "import torch\ndef f(x):\n    if x.is_cuda:\n        torch.cuda.synchronize()\n",
        # a device string the caller chose: the CUDA branch runs only when CUDA was asked for
        "import sys\nimport torch\ndef sync(device):\n    if 'cuda' in device:\n        torch.cuda.synchronize(device)\n"
        "if __name__ == '__main__':\n    sync(sys.argv[1])\n",
        "import sys\nimport torch\ndef sync(device):\n    if device.startswith('cuda'):\n        torch.cuda.synchronize(device)\n"
        "if __name__ == '__main__':\n    sync(sys.argv[1])\n",
        "import torch\ndef f(d):\n    if torch.device(d).type == 'cuda':\n        torch.cuda.get_device_capability()\n",
        "import torch\nif torch.cuda.device_count() > 0:\n    print(torch.cuda.get_device_name(0))\n",
        "import torch\ntorch.backends.cudnn.benchmark = True\nscaler = torch.cuda.amp.GradScaler()\n",
        "import torch\ndef bench_cuda():\n    torch.cuda.synchronize()\n",
        "import torch, unittest\nclass T(unittest.TestCase):\n"
        "    @unittest.skipIf(not torch.cuda.is_available(), 'no cuda')\n"
        "    def test_x(self):\n        torch.cuda.synchronize()\n",
        "import argparse, torch\np = argparse.ArgumentParser()\nargs = p.parse_args()\n"
        "args.cuda = not args.no_cuda and torch.cuda.is_available()\nif args.cuda:\n"
        "    torch.cuda.set_device(0)\n",
        "def f(batch):\n    return batch.pin_memory()\n",  # a library: its caller decides
        "import torch\nname = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu'\n",
        # a library module: its CUDA-only helper is guarded (or not) by the caller
        "import torch\ndef cuda_elapsed(start, end):\n    torch.cuda.synchronize()\n"
        "    return start.elapsed_time(end)\n",
        # a script's helper that every caller guards
        "import torch\ndef gpu_name():\n    return torch.cuda.get_device_name(0)\n"
        "if __name__ == '__main__':\n    if torch.cuda.is_available():\n        print(gpu_name())\n",
        # tests gated for GPUs, whatever the helper is imported as
        "import torch\nfrom tests.helpers import RunIf as R\n@R(min_cuda_gpus=1)\n"
        "def test_sync():\n    torch.cuda.synchronize()\ntest_sync()\n",
        "import pytest, torch\npytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')]\n"
        "torch.cuda.set_device(0)\n",
        # CUDA-only by design, and the file says so
        "import torch\nassert torch.cuda.is_available(), 'needs a GPU'\ntorch.cuda.set_device(0)\n",
        "import torch\nimport torch.distributed as dist\ndef main(rank):\n"
        "    dist.init_process_group(backend='nccl', rank=rank, world_size=2)\n    torch.cuda.set_device(rank)\n"
        "if __name__ == '__main__':\n    main(0)\n",
        "import torch\nclass Bench:\n    def __init__(self):\n        if not torch.cuda.is_available():\n"
        "            raise RuntimeError('GPU only')\n    def run(self):\n        torch.cuda.synchronize()\n"
        "Bench().run()\n",
        # the index is -1 where CUDA is absent: `torch.cuda.device(-1)` does nothing
        "import argparse\nimport torch\nargs = argparse.ArgumentParser().parse_args()\n"
        "if torch.cuda.is_available():\n    args.gpu_index = 0\nelse:\n    args.gpu_index = -1\n"
        "with torch.cuda.device(args.gpu_index):\n    x = torch.ones(2)\n",
        # a failure without CUDA is handled
        "import torch\ntry:\n    name = torch.cuda.get_device_name(0)\nexcept (RuntimeError, AssertionError):\n"
        "    name = 'cpu'\nprint(name)\n",
        "import torch\nfrom state import DistributedType\ndef check(state):\n"
        "    if state.distributed_type == DistributedType.MULTI_GPU:\n        torch.cuda.synchronize()\n"
        "if __name__ == '__main__':\n    check(None)\n",
        # a library function that does no training step: its caller decides
        "import torch\ndef timed(fn):\n    torch.cuda.synchronize()\n    return fn()\n",
        # a library's helper that pins what it is given, and one that resets the peak statistics
        "import torch\ndef pinned(batch):\n    return batch.pin_memory()\n",
        "import torch\ndef measure(fn):\n    torch.cuda.reset_peak_memory_stats()\n    return fn()\n",
        # a script's batch class: the DataLoader calls its own `pin_memory()` when asked to pin
        "import torch\nclass Batch:\n    def __init__(self, x):\n        self.x = torch.as_tensor(x)\n"
        "    def pin_memory(self):\n        self.x = self.x.pin_memory()\n        return self\n"
        "if __name__ == '__main__':\n    print(Batch([1]).x)\n",
        # a script's pin inside a guard; a Module has no `pin_memory()` of torch's
        "import torch\ndef prefetch(batch):\n    if torch.cuda.is_available():\n        batch = batch.pin_memory()\n"
        "    return batch\nif __name__ == '__main__':\n    prefetch(None)\n",
    ]
    INVALID = [
        Invalid("import torch\ntorch.cuda.synchronize()\n",
                "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n"),
        Invalid(
            "import torch\nuse_cuda = torch.cuda.is_available()\ndef log():\n"
            "    # peak memory\n    print(torch.cuda.max_memory_allocated())  # MB\n"
            "    torch.cuda.reset_peak_memory_stats()\nlog()\n",
            "import torch\nuse_cuda = torch.cuda.is_available()\ndef log():\n"
            "    # peak memory\n    print(torch.cuda.max_memory_allocated())  # MB\n"
            "    if use_cuda:\n        torch.cuda.reset_peak_memory_stats()\nlog()\n",
        ),
        Invalid("from torch.cuda import synchronize as sync\nsync()\n",
                "from torch.cuda import synchronize as sync\nimport torch\n"
                "if torch.cuda.is_available():\n    sync()\n"),
        Invalid("import torch\nname = torch.cuda.get_device_name(0)\nprint(name)\n"),
        # a script's helper pins whatever it is given: a batch's `pin_memory()` raises as a tensor's does
        Invalid("import torch\ndef prefetch(batch):\n    return batch.pin_memory()\n"
                "if __name__ == '__main__':\n    prefetch(torch.ones(2))\n"),
        # a function a command-line runner calls is a script's function
        Invalid(
            "import fire\nimport torch\ndef evaluate(n=2):\n    torch.cuda.reset_peak_memory_stats()\n"
            "    print(torch.ones(n).sum())\nfire.Fire(evaluate)\n",
            "import fire\nimport torch\ndef evaluate(n=2):\n    if torch.cuda.is_available():\n"
            "        torch.cuda.reset_peak_memory_stats()\n    print(torch.ones(n).sum())\nfire.Fire(evaluate)\n",
        ),
        # a tuple item of a DataLoader batch, pinned in a script's function
        Invalid(
            "from torch.utils.data import DataLoader\ndef run(loader):\n    for xb, yb in loader:\n"
            "        xb = xb.pin_memory()\n        print(xb, yb)\n"
            "if __name__ == '__main__':\n    run(DataLoader(list(range(4))))\n"),
        Invalid("import torch\nstart = torch.cuda.Event(enable_timing=True)\nstart.record()\n"),
        Invalid("import torch\nwith torch.cuda.device(1):\n    x = torch.ones(2)\n"),
        Invalid("import torch\nx = torch.ones(3)\ny = x.pin_memory()\nprint(y)\n"),
        Invalid(  # a function name is no guard, in a script its unguarded caller runs it
            "import torch\ndef bench_cuda():\n    torch.cuda.synchronize()\n"
            "if __name__ == '__main__':\n    bench_cuda()\n",
            "import torch\ndef bench_cuda():\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
            "if __name__ == '__main__':\n    bench_cuda()\n",
        ),
        Invalid(  # a library's training step that synchronizes unguarded
            "import torch\ndef _step(model, opt, x):\n    model(x).sum().backward()\n    opt.step()\n"
            "def train_epoch(model, opt, loader):\n    for x in loader:\n        _step(model, opt, x)\n"
            "        torch.cuda.synchronize()\n",
            "import torch\ndef _step(model, opt, x):\n    model(x).sum().backward()\n    opt.step()\n"
            "def train_epoch(model, opt, loader):\n    for x in loader:\n        _step(model, opt, x)\n"
            "        if torch.cuda.is_available():\n            torch.cuda.synchronize()\n",
        ),
        Invalid(  # ... also where a loss scaler runs the backward and the optimizer's step
            "import torch\ndef train_one_epoch(model, loader, optimizer, loss_scaler):\n    for x in loader:\n"
            "        loss = model(x).sum()\n        optimizer.zero_grad()\n        loss_scaler(loss, optimizer)\n"
            "        torch.cuda.synchronize()\n",
            "import torch\ndef train_one_epoch(model, loader, optimizer, loss_scaler):\n    for x in loader:\n"
            "        loss = model(x).sum()\n        optimizer.zero_grad()\n        loss_scaler(loss, optimizer)\n"
            "        if torch.cuda.is_available():\n            torch.cuda.synchronize()\n",
        ),
        Invalid("import torch\nprint('GPU:', torch.cuda.get_device_name(0))\n",
                "import torch\nif torch.cuda.is_available():\n    print('GPU:', torch.cuda.get_device_name(0))\n"),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._stmts: list = []  # innermost statement line that may be wrapped, or None
        self._script = _is_script(ctx.module, ctx.facts)
        self._site_guarded: dict = {}  # Call inside a function -> guarded there
        self._steps: set = set()  # functions that run a training step (backward / optimizer.step)
        self._pending: list = []  # (function, node, message, fix): decided in finish()
        self._name_uses: Optional[Counter] = None
        self._flag: Optional[str] = None
        self._negative_indices: Optional[set] = None  # names the file sets to a negative device index
        self._flag_done = False

    # ---- context ----------------------------------------------------------------------
    def visit_SimpleStatementLine(self, node) -> None:
        self._stmts.append(node)

    def leave_SimpleStatementLine(self, node) -> None:
        self._stmts.pop()

    # a call under these cannot be wrapped in an `if` (batched visitors need real method names)
    def visit_IndentedBlock(self, node) -> None:
        self._stmts.append(None)

    def leave_IndentedBlock(self, node) -> None:
        self._stmts.pop()

    def visit_SimpleStatementSuite(self, node) -> None:
        self._stmts.append(None)

    def leave_SimpleStatementSuite(self, node) -> None:
        self._stmts.pop()

    def visit_Lambda(self, node) -> None:
        self._stmts.append(None)

    def leave_Lambda(self, node) -> None:
        self._stmts.pop()

    def visit_ListComp(self, node) -> None:
        self._stmts.append(None)

    def leave_ListComp(self, node) -> None:
        self._stmts.pop()

    def visit_SetComp(self, node) -> None:
        self._stmts.append(None)

    def leave_SetComp(self, node) -> None:
        self._stmts.pop()

    def visit_DictComp(self, node) -> None:
        self._stmts.append(None)

    def leave_DictComp(self, node) -> None:
        self._stmts.pop()

    def visit_GeneratorExp(self, node) -> None:
        self._stmts.append(None)

    def leave_GeneratorExp(self, node) -> None:
        self._stmts.pop()

    # ---- detection ----------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        fn = self.t.function
        self._site_guarded[node] = self.t.guarded
        if fn is not None:
            func = node.func
            if isinstance(func, cst.Attribute) and (
                    func.attr.value == "backward"
                    or (func.attr.value in ("step", "zero_grad") and _OPTIMIZER.search(dotted(func.value) or ""))):
                self._steps.add(fn)  # (`optimizer.zero_grad()`: a step whose backward a loss scaler runs)
        if self.t.guarded:
            return
        api = cuda_api_name(self.facts.qualname(node.func))
        if fn is not None and not self._script and api != "synchronize":
            return  # a library module: only a training step's synchronize() is checked (finish)
        if api is not None:
            if api == "set_device" and self.facts.mentions(b"init_process_group") and (
                    node in guards.distributed_model(self.facts).pins):
                return  # pins this rank's GPU for the process group its block starts: a multi-GPU launch
            if api in RAISES_ON_CPU:
                self._found(node, f"torch.cuda.{api}", api)
            return
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "pin_memory" and not node.args:
            if fn is not None and fn.name.value == "pin_memory" and self.t.method is fn:
                return  # a batch class's own `pin_memory()`: the DataLoader calls it when asked to pin
            kind = self.t.kind_of(func.value)
            # a tensor; or, in a script, anything but a Module: a batch class's `pin_memory()`
            # pins its tensors, which raises just the same
            if (kind is not None or self._script) and kind != "module":
                self._found(node, "Tensor.pin_memory" if kind is not None else "pin_memory", "pin_memory")

    def _no_device_index(self, node: cst.Call) -> bool:
        """``with torch.cuda.device(args.gpu_index):`` where the file sets that index to a
        negative number (on its no-CUDA branch): ``torch.cuda.device(-1)`` does nothing."""
        d = dotted(node.args[0].value) if node.args else None
        if d is None:
            return False
        if self._negative_indices is None:
            self._negative_indices = {
                t for n in nodes(self.ctx.module, into_scopes=True) if isinstance(n, cst.Assign)
                and isinstance(n.value, cst.UnaryOperation) and isinstance(n.value.operator, cst.Minus)
                and isinstance(n.value.expression, cst.Integer)
                for t in (dotted(tg.target) for tg in n.targets) if t is not None}
        return d in self._negative_indices

    def _found(self, node: cst.Call, what: str, api: str) -> None:
        msg = f"`{what}()` raises on a machine without CUDA and no availability check guards it"
        stmt = self._stmts[-1] if self._stmts else None
        if api == "device" and self._no_device_index(node):
            return
        if api in _CONTEXT_ONLY:
            self._emit(node, msg + " (guard the whole block, or pick the device once)")
            return
        if stmt is None or len(stmt.body) != 1:
            self._emit(node, msg)
            return
        small = stmt.body[0]
        if isinstance(small, cst.Expr):
            pass
        elif isinstance(small, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            if not all(isinstance(t, cst.Name) for t in targets):
                self._emit(node, msg)
                return
            used = [t.value for t in targets if self._uses(t.value) > 1]
            if used or api in SPREADING:
                what_used = f"`{used[0]}` is used elsewhere" if used else "its use spreads through the code"
                self._emit(node, f"{msg}; {what_used}, so guard the code that uses it too")
                return
        else:
            self._emit(node, msg)
            return
        self._emit(node, msg, self._wrap_fix(stmt))

    def _emit(self, node: cst.Call, msg: str, fix: Optional[Fix] = None) -> None:
        fn = self.t.function
        if fn is None:
            self.report(node, msg, fix)
        else:
            self._pending.append((fn, node, msg, fix))

    def finish(self) -> None:
        """A finding inside a function stands unless every call of the function in the file
        is guarded (by its caller, or its caller's callers). In a library module only a
        training step's `synchronize()` is reported (the caller picks the device elsewhere)."""
        if not self._pending:
            return
        g = call_graph(self.facts)
        memo: dict = {}
        for fn, node, msg, fix in self._pending:
            if guarded_by_callers(g, fn, self._site_guarded, memo):
                continue
            if not self._script and not self._runs_step(g, fn, set()):
                continue
            self.report(node, msg, fix)

    def _runs_step(self, g, fn, seen: set) -> bool:
        """``fn`` calls ``backward()`` / ``optimizer.step()``, itself or in a helper of the file."""
        if fn in self._steps:
            return True
        if fn in seen:
            return False
        seen.add(fn)
        for f in g.funcs.values():
            if f.node is not fn and any(caller is fn for _, caller in f.sites):
                if self._runs_step(g, f.node, seen):
                    return True
        return False

    def _uses(self, name: str) -> int:
        if self._name_uses is None:
            counts: Counter = Counter()
            stack = [self.ctx.module]
            while stack:
                n = stack.pop()
                if isinstance(n, cst.Name):
                    counts[n.value] += 1
                stack.extend(children(n, trivia=False))
            self._name_uses = counts
        return self._name_uses[name]

    def _guard_flag(self) -> Optional[str]:
        """A module-level ``flag = torch.cuda.is_available()``-style name defined before here."""
        fn = self.t.function
        for stmt in self.ctx.module.body:
            if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1):
                continue
            s = stmt.body[0]
            if not (isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Name)):
                continue
            name = s.targets[0].target.value
            if name not in self.facts.guard_flags or guards.guard_polarity(self.facts, s.value) != 1:
                continue
            if fn is None and stmt not in self.t.seen_statements:
                continue
            if fn is not None and name in self.facts.assigned_in.get(fn, ()):
                continue
            if sum(1 for st in self.ctx.module.body if _binds_name(st, name)) != 1:
                continue  # reassigned at module level: not a reliable flag
            return name
        return None

    def _wrap_fix(self, stmt: cst.SimpleStatementLine) -> Fix:
        flag = self._guard_flag()
        needs_torch = False
        if flag is not None:
            test: cst.BaseExpression = cst.Name(flag)
            how = f"guard it with `if {flag}:`"
        else:
            t, needs_torch = torch_ref(self.facts)
            test = cst.parse_expression(f"{t}.cuda.is_available()")
            how = f"guard it with `if {t}.cuda.is_available():`"
        new = cst.If(test=test, body=cst.IndentedBlock(body=[stmt.with_changes(leading_lines=())]),
                     leading_lines=stmt.leading_lines)
        return Fix(Applicability.SAFE, how, {stmt: new}, needs_torch_import=needs_torch)


def _binds_name(stmt: cst.CSTNode, name: str) -> bool:
    if isinstance(stmt, cst.SimpleStatementLine):
        for s in stmt.body:
            if isinstance(s, cst.Assign) and any(dotted(t.target) == name for t in s.targets):
                return True
            if isinstance(s, (cst.AnnAssign, cst.AugAssign)) and dotted(s.target) == name:
                return True
    return False
