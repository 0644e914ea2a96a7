from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from devlint import lazyre
from devlint.analysis.accumulators import (accumulation, clocks_feed_meters, contains, meter_update, read_only_in,
                                           short)
from devlint.analysis.loops import Loop, LoopFrames, every_iteration, in_test_code, occasional_nodes
from devlint.analysis.usage import host_loop_names, log_call, may_touch_device, only_logged, only_reads, usage_of
from devlint.facts import MODULE, PARAM, TENSOR, TENSOR_ONLY_USE, dotted
from devlint.fixes import accumulate_on_device
from devlint.rule import Invalid, Rule

_OPTIMIZER_NAME = lazyre.compile(r"optim|^opt(?:_|\d|$)|_opt(?:_|\d|$)", re.I)
_LOADER_NAME = lazyre.compile(r"loader", re.I)
_ITER_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "zip", "trange"})
_TIMERS = frozenset({"time.time", "time.perf_counter", "time.monotonic", "time.process_time",
                     "timeit.default_timer", "torch.cuda.Event"})
# What a sync is called in messages.
_WHAT = {"item": "`.item()`", "tolist": "`.tolist()`", "cpu": "`.cpu()`", "print": "`print(tensor)`",
         "sync": "`torch.cuda.synchronize()`"}


@dataclass(eq=False)
class _Candidate:
    kind: str
    node: cst.Call
    frames: tuple  # snapshot of the context stack
    in_test: bool
    small: Optional[cst.CSTNode]  # innermost simple statement (Assign / AugAssign / Expr)
    stmt: Optional[cst.CSTNode]  # its line
    scope: Optional[cst.CSTNode]
    cls: Optional[cst.CSTNode]
    in_log: bool = False  # an argument of print / logger.* / set_postfix: per-step logging
    meter: Optional[str] = None  # `losses.update(loss.item(), n)`, the meter read every N steps only


class SyncInLoop(LoopFrames, Rule):
    """
    ## What it does
    Flags a device-to-host synchronisation that runs on every iteration of a training
    or evaluation loop: `.item()`, `.tolist()`, `.cpu()`, `print(tensor)` and
    `torch.cuda.synchronize()`. Off by default (a performance rule): enable it with
    `--select DL008`.

    A *training loop* is a loop whose own body calls `.backward()` or
    `optimizer.step()`; an *evaluation loop* iterates a data loader inside
    `torch.no_grad()` / `torch.inference_mode()`. Not flagged: a sync whose value
    steers control flow or a check (`if loss.item() < tol: break`, `assert`,
    `self.assertEqual(...)`, or a name assigned from it and tested in the loop): it
    must reach the host; a sync under an `if` inside the
    loop (logging every N steps); `.cpu()` results appended to a list (collecting
    outputs on the host bounds GPU memory); `synchronize()` in a loop that reads a
    clock (timing needs it); anything after the loop. A loop that only averages its step
    times into running meters (`batch_time.update(time.time() - end)`) does not time its
    steps on purpose: there, `.item()` handed to a meter the loop reads every N steps at
    most (`losses.update(loss.item(), n)` printed under `if i % print_freq == 0:`) is
    flagged. Also not flagged (issues 15/16):
    a file that never mentions a device (a CPU-only script), batch values the loop never
    moves (`y.sum().item()` for `for x, y in loader`), `.tolist()` outputs collected into
    a list (predictions for a metric), any sync in a loop that times each batch with a
    clock, and a value re-read after the iteration already synced on it. A sync inside
    `print`/logging calls is advised "log every N steps"; nested syncs in one expression
    give one finding. An explicit `torch.cuda.synchronize()` in test code (a test file, or
    an enclosing function or class named as a test) is a deliberate barrier: it makes an
    asynchronous error or a hang surface at the step that caused it.

    ## Why is this bad?
    CUDA runs asynchronously: the Python loop queues work and races ahead. Reading a
    value on the host makes the CPU wait until the GPU has finished everything queued
    so far, every step, so the GPU idles while the next batch is prepared. Summing the
    loss on the device and reading it once after the loop keeps the pipeline full.

    ## Example
    ```python
    total = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    ```

    ## Use instead
    ```python
    total = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.detach()
    total = torch.as_tensor(total).item()
    ```

    ## Fix safety
    Unsafe. Offered only for `.item()` whose value is summed into a number
    (`acc += x.item()`, possibly scaled: `acc += x.item() * n`) or appended to a list,
    when the accumulator is initialised by a literal (`0`, `0.0`, `[]`) just before
    the loop in the same block and is not read inside the loop. The value is then
    accumulated on the device (`x.detach()`) and converted once after the loop
    (`torch.as_tensor(acc).item()`, which also handles a loop that ran zero times and
    keeps ints ints). The sum is computed in the tensor's dtype (float32) instead of
    Python's float64, so the last digits can differ. `print(tensor)`, `.cpu()`,
    `.tolist()` and `synchronize()` are reported without a fix.
    """

    code = "DL008"
    # name, summary, default and prefilter: devlint/catalogue.py

    VALID = [
        # a meter fed every step in a loop that times each step on its own
        "import time, torch\nmodel.cuda()\nfor i, x in enumerate(data):\n    t0 = time.time()\n"
        "    loss = model(x).sum()\n    loss.backward()\n    losses.update(loss.item(), 8)\n"
        "    times.append(time.time() - t0)\n    if i % 10 == 0:\n        print(losses.avg)\n",
        # the value steers control flow: it must reach the host
        "import torch\nmodel.cuda()\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n"
        "    if loss.item() < 1e-3:\n        break\n",
        "import torch\nmodel.cuda()\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n"
        "    v = loss.item()\n    if v != v:\n        raise ValueError('nan')\n",
        # logging every N steps
        "import torch\nmodel.cuda()\nfor step, x in enumerate(data):\n    loss = model(x).sum()\n    loss.backward()\n"
        "    if step % 100 == 0:\n        print(step, loss.item())\n",
        # after the loop
        "import torch\nmodel.cuda()\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\nprint(loss.item())\n",
        # not a training loop
        "import torch\nmodel.cuda()\nfor x in data:\n    print(x.sum().item())\n",
        # a per-epoch sync (the step loop is the inner one)
        "import torch\nmodel.cuda()\nfor epoch in range(3):\n    for x in data:\n        model(x).sum().backward()\n"
        "        opt.step()\n    print(epoch, evaluate().item())\n",
        # collecting outputs on the host in an eval loop
        "import torch\nmodel.cuda()\nwith torch.no_grad():\n    for x in loader:\n        preds.append(model(x).argmax(1).cpu())\n",
        # checked by a test assertion
        "import torch\nmodel.cuda()\nfor x in data:\n    model(x).sum().backward()\n"
        "    self.assertEqual(model.weight.grad.sum().item(), 3.0)\n    fns[0](x)\n    get()(x)\n",
        # a test synchronizes on purpose (an async error or hang shows at its step)
        "import torch\nmodel.cuda()\ndef test_join(model, data):\n    for x in data:\n"
        "        model(x).sum().backward()\n        torch.cuda.synchronize()\n",
        # timing needs the synchronize
        "import time, torch\nmodel.cuda()\nfor x in data:\n    t0 = time.perf_counter()\n    model(x).sum().backward()\n"
        "    torch.cuda.synchronize()\n    times.append(time.perf_counter() - t0)\n",
        # a CPU-only script: nothing ever waits for a device
        "import torch\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n    total += loss.item()\n",
        # batch values the loop never moves are on the host already
        "import torch\nmodel.cuda()\nfor x, y in train_loader:\n    loss = model(x.cuda()).sum()\n    loss.backward()\n"
        "    seen += y.sum().item()\n    labels.extend(y.tolist())\n",
        # host predictions collected per step for a metric
        "import torch\nmodel.cuda()\nwith torch.no_grad():\n    for x in val_loader:\n"
        "        preds.extend(model(x).argmax(1).tolist())\n",
        # per-batch timing with time.time(): the loop pays for the sync on purpose
        "import time, torch\nmodel.cuda()\nfor x in data:\n    t0 = time.time()\n    loss = model(x).sum()\n"
        "    loss.backward()\n    total += loss.item()\n    times.append(time.time() - t0)\n",
        # re-read after a sync in the same iteration (the first read steers control flow)
        "import torch\nmodel.cuda()\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n"
        "    if loss.item() > 1e3:\n        break\n    total += loss.item()\n",
    ]
    INVALID = [
        # a running meter read every N steps, step times only averaged into meters
        Invalid("import time, torch\nmodel.cuda()\nend = time.time()\nfor i, x in enumerate(data):\n"
                "    loss = model(x).sum()\n    loss.backward()\n    losses.update(loss.item(), 8)\n"
                "    batch_time.update(time.time() - end)\n    end = time.time()\n"
                "    if i % 10 == 0:\n        print(losses.avg, batch_time.avg)\n"),
        Invalid(
            "import torch\nmodel.cuda()\ntotal = 0.0\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n"
            "    opt.step()\n    total += loss.item()\nprint(total)\n",
            "import torch\nmodel.cuda()\ntotal = 0.0\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n"
            "    opt.step()\n    total += loss.detach()\ntotal = torch.as_tensor(total).item()\nprint(total)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nmodel.cuda()\n@torch.no_grad()\ndef evaluate(model, val_loader):\n    correct, seen = 0, 0\n"
            "    hits = 0\n    for x, y in val_loader:\n        hits += (model(x).argmax(1) == y).sum().item()\n"
            "    return hits\n",
            "import torch\nmodel.cuda()\n@torch.no_grad()\ndef evaluate(model, val_loader):\n    correct, seen = 0, 0\n"
            "    hits = 0\n    for x, y in val_loader:\n        hits += (model(x).argmax(1) == y).sum().detach()\n"
            "    hits = torch.as_tensor(hits).item()\n    return hits\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nmodel.cuda()\nlosses = []\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n"
            "    losses.append(loss.item())\n",
            "import torch\nmodel.cuda()\nlosses = []\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n"
            "    losses.append(loss.detach())\nlosses = [v.item() for v in losses]\n",
            unsafe=True,
        ),
        # read inside the loop: report only
        Invalid("import torch\nmodel.cuda()\nmodel.cuda()\ntotal = 0.0\nfor i, x in enumerate(data):\n    loss = model(x).sum()\n"
                "    loss.backward()\n    total += loss.item()\n    pbar.set_postfix(avg=total / (i + 1))\n"),
        Invalid("import torch\nmodel.cuda()\nmodel.cuda()\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n    print(loss)\n"),
        Invalid("import torch\nmodel.cuda()\nmodel.cuda()\nfor x in data:\n    model(x).sum().backward()\n    optimizer.step()\n"
                "    torch.cuda.synchronize()\n"),
        Invalid("import torch\nmodel.cuda()\nmodel.cuda()\nwith torch.inference_mode():\n    for x in test_loader:\n"
                "        scores = model(x).softmax(-1).cpu().numpy()\n        report(scores)\n"),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.init_frames()
        self.candidates: list[_Candidate] = []
        self.optimizers: set = set()
        self.loaders: set = set()
        self.collected: set = set()  # calls inside `.append(...)` / `.extend(...)` arguments
        self.numpy_cpu: set = set()  # `.cpu()` calls followed by `.numpy()`
        self.assert_calls: set = set()  # `self.assertEqual(...)` & co: a test, like `assert`
        self.log_calls: list = []  # enclosing print / logging calls

    # ---- DL008's hooks into LoopFrames ------------------------------------------------------
    def on_assign(self, node: cst.Assign) -> None:
        v = node.value
        if isinstance(v, cst.Call):
            q = self.facts.qualname(v.func) or ""
            for t in node.targets:
                d = dotted(t.target)
                if d is None:
                    continue
                if q.startswith("torch.optim.") and "lr_scheduler" not in q:
                    self.optimizers.add(d)
                if q.endswith("DataLoader"):
                    self.loaders.add(d)

    def loop_is_eval(self, node: cst.For) -> bool:
        return self.in_nograd() and self._loader_like(node.iter)

    def _loader_like(self, it: cst.BaseExpression) -> bool:
        while isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in _ITER_WRAPPERS:
            if not it.args:
                return False
            it = it.args[0].value
        d = dotted(it)
        if d is None:
            return False
        return d in self.loaders or bool(_LOADER_NAME.search(d.rsplit(".", 1)[-1]))

    # ---- evidence and candidates ---------------------------------------------------------
    def _mark(self, attr: str) -> None:
        loops = self.fn_loops()
        if loops:
            setattr(loops[0], attr, True)

    def _is_optimizer(self, node: cst.BaseExpression) -> bool:
        d = dotted(node)
        return d is not None and (d in self.optimizers or bool(_OPTIMIZER_NAME.search(d.rsplit(".", 1)[-1])))

    def _candidate(self, kind: str, node: cst.Call) -> None:
        if not self.fn_loops():
            return
        small = self.smalls[-1] if self.smalls else None
        in_log = any(c is not node for c in self.log_calls)
        self.candidates.append(_Candidate(kind, node, tuple(self.frames), self.test_depth > 0, small,
                                          self.t.statement, self.t.scope, self.t.cls, in_log))

    def leave_Call(self, node: cst.Call) -> None:
        if node in self.assert_calls:
            self.test_depth -= 1
        if self.log_calls and self.log_calls[-1] is node:
            self.log_calls.pop()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if log_call(node):
            self.log_calls.append(node)
        last = func.attr.value if isinstance(func, cst.Attribute) else (
            func.value if isinstance(func, cst.Name) else "")
        if last.startswith("assert"):
            self.assert_calls.add(node)
            self.test_depth += 1
        q = self.facts.qualname(func)
        if q is not None:
            if q == "torch.autograd.backward":
                self._mark("step")
            elif q == "torch.cuda.synchronize":
                if not in_test_code(self.t.functions, self.t.classes, self.ctx.filename):
                    self._candidate("sync", node)  # in a test it is a deliberate barrier
            elif q in _TIMERS:
                for lp in self.fn_loops():
                    lp.timed = True
            return
        if isinstance(func, cst.Name):
            if func.value == "print" and "print" not in self.facts.bound_names and node.args:
                self._candidate("print", node)
            elif func.value in ("perf_counter", "default_timer"):
                for lp in self.fn_loops():
                    lp.timed = True
            return
        if not isinstance(func, cst.Attribute):
            return
        meth = func.attr.value
        if meth == "backward":
            self._mark("step")
        elif meth == "step" and (self._is_optimizer(func.value)
                                 or any(self._is_optimizer(a.value) for a in node.args)):
            self._mark("step")
        elif meth in ("append", "extend") and len(node.args) == 1:
            v = node.args[0].value
            while isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute):
                self.collected.add(v)
                v = v.func.value
        elif meth == "numpy" and isinstance(func.value, cst.Call):
            inner = func.value
            if isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "cpu":
                self.numpy_cpu.add(inner)
        if meth in ("item", "tolist", "cpu") and not node.args:
            self._candidate(meth, node)

    # ---- decisions -----------------------------------------------------------------------
    def _tensor_evidence(self, c: _Candidate, expr: cst.BaseExpression) -> bool:
        if self.facts.kind_of(expr, c.scope, c.cls) in (TENSOR, PARAM):
            return True
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            return expr.func.attr.value in TENSOR_ONLY_USE | {"argmax", "argmin", "softmax", "sigmoid"}
        return False

    def _not_a_tensor(self, c: _Candidate, recv: cst.BaseExpression) -> bool:
        """Evidence that ``recv`` is no tensor (numpy arrays have .item()/.tolist() too)."""
        if self.facts.kind_of(recv, c.scope, c.cls) == MODULE:
            return True
        node = recv
        while True:
            if isinstance(node, cst.Call):
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("numpy", "cpu"):
                    return True  # the sync is the `.cpu()` before it, reported there
                q = self.facts.qualname(node.func) or ""
                if q.split(".")[0] in ("numpy", "np", "pandas", "math"):
                    return True
                node = node.func
            elif isinstance(node, cst.Attribute):
                node = node.value
            elif isinstance(node, cst.Subscript):
                node = node.value
            else:
                return False

    def _sync_loop(self, c: _Candidate) -> Optional[Loop]:
        """The innermost training/eval loop around ``c`` if ``c`` runs on each of its iterations."""
        return every_iteration(c.frames, lambda lp: lp.step or lp.eval)

    def finish(self) -> None:
        if not may_touch_device(self.facts.source):
            return  # a CPU-only script: no value ever waits for a device
        groups: dict = {}  # loop node -> [(candidate, edit)]
        reported: list = []  # (candidate, message)
        read: dict = {}  # loop node -> [(frames, receiver text)] synced earlier in the iteration
        for c in self.candidates:
            lp = self._sync_loop(c)
            if lp is None:
                continue
            text = self._receiver_text(c)
            earlier = read.setdefault(lp.node, [])
            again = bool(text) and any(text <= t and c.frames[:len(f)] == f for f, t in earlier)
            earlier.append((c.frames, text))
            c.meter = self._meter(c, lp)
            if c.in_test or again or (lp.timed and not (c.meter and clocks_feed_meters(lp.node.body, self._is_clock))):
                continue  # steers control flow / re-read after a sync / the loop times its steps on purpose
            names = set()
            if isinstance(c.small, cst.Assign) and contains(c.small.value, c.node):
                names = {dotted(t.target) for t in c.small.targets}
            elif isinstance(c.small, cst.AugAssign) and contains(c.small.value, c.node):
                names = {dotted(c.small.target)}
            if names:
                if names & self.test_names.get(lp.node, set()):
                    continue  # the value is tested in the loop: it steers control flow
                if isinstance(c.small, cst.Assign) and only_logged(usage_of(lp.node), names):
                    c.in_log = True  # `v = loss.item(); print(v)`: per-step logging
            msg = self._message(c, lp)
            if msg is not None:
                reported.append((c, msg, lp))
        # one finding per expression: `(p.cpu() == y.cpu()).sum().item()` is reported once
        reported = [(c, m, lp) for c, m, lp in reported
                    if not any(o is not c and o.stmt is c.stmt and contains(o.node, c.node) for o, _, _ in reported)]
        for c, msg, lp in reported:
            edit = self._edit(c, lp) if c.kind == "item" and not c.in_log else None
            if edit is not None:
                groups.setdefault(lp.node, []).append((c, edit))
            else:
                self.report(c.node, msg)
        for loop_node, items in groups.items():
            fix = accumulate_on_device(self.facts, loop_node, [e for _, e in items])
            for c, _ in items:
                self.report(c.node, self._message(c, self.loops[loop_node]), fix)

    def _meter(self, c: _Candidate, lp: Loop) -> Optional[str]:
        """The running meter ``c`` feeds (``losses.update(loss.item(), n)``) when the loop reads
        that meter only every N steps (or not at all): the value need not reach the host each step."""
        if c.kind != "item" or c.small is None:
            return None
        meter = meter_update(c.small, c.node)
        if meter is None or not read_only_in(lp.node.body, meter, occasional_nodes(lp.node)):
            return None
        return meter

    def _is_clock(self, call: cst.Call) -> bool:
        q = self.facts.qualname(call.func)
        if q is not None:
            return q in _TIMERS
        return isinstance(call.func, cst.Name) and call.func.value in ("perf_counter", "default_timer")

    def _receiver_text(self, c: _Candidate) -> frozenset:
        """The synced values' source text (``loss`` for ``loss.item()`` / ``print(f"{loss}")``)."""
        code = self.ctx.module.code_for_node
        if c.kind in ("item", "tolist", "cpu"):
            return frozenset({code(c.node.func.value)})
        out = set()
        if c.kind == "print":
            for a in c.node.args:
                v = a.value
                if isinstance(v, (cst.Name, cst.Attribute)):
                    out.add(code(v))
                elif isinstance(v, cst.FormattedString):
                    out |= {code(p.expression) for p in v.parts if isinstance(p, cst.FormattedStringExpression)}
        return frozenset(out)

    def _message(self, c: _Candidate, lp: Loop) -> Optional[str]:
        where = "training" if lp.step else "evaluation"
        func = c.node.func
        if c.kind in ("item", "tolist", "cpu"):
            recv = func.value
            if only_reads(recv, host_loop_names(lp.node)):
                return None  # a batch value the loop never moves: it is on the host already
            if c.kind in ("cpu", "tolist") and c.node in self.collected:
                return None  # host outputs collected per step (predictions for a metric)
            if c.kind == "cpu":
                if not (c.node in self.numpy_cpu or self._tensor_evidence(c, recv)):
                    return None
            elif self._not_a_tensor(c, recv):
                return None
            text = short(self.ctx.module.code_for_node(recv))
            if c.meter is not None:
                return (f"`{text}.item()` fed to the meter `{c.meter}` waits for the device on every iteration of "
                        f"the {where} loop, though the meter is read every N steps at most; hand it the tensor "
                        f"(`{text}.detach()`) and convert when it is read")
            if c.in_log:
                return (f"`{text}.{c.kind}()` logged on every iteration of the {where} loop waits for the "
                        "device each step; log every N steps")
            return (f"`{text}.{c.kind}()` waits for the device on every iteration of the {where} loop; "
                    "keep the value on the device and read it once after the loop")
        if c.kind == "print":
            shown = [a.value for a in c.node.args if a.keyword is None]
            hosts = host_loop_names(lp.node)
            if not any(self._prints_tensor(c, a) and not only_reads(a, hosts) for a in shown):
                return None
            return (f"`print` of a tensor waits for the device on every iteration of the {where} loop; "
                    "log every N steps or after the loop")
        if c.kind == "sync":
            if lp.timed:
                return None
            return (f"`torch.cuda.synchronize()` on every iteration of the {where} loop stalls the "
                    "pipeline; remove it (or only synchronize where you time)")
        return None

    def _prints_tensor(self, c: _Candidate, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.FormattedString):
            return any(isinstance(p, cst.FormattedStringExpression) and self._prints_tensor(c, p.expression)
                       for p in expr.parts)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return self.facts.kind_of(expr, c.scope, c.cls) in (TENSOR, PARAM)
        return False

    # ---- the fix --------------------------------------------------------------------------
    def _edit(self, c: _Candidate, lp: Loop):
        """(accumulator, "sum"/"list", call) when ``c`` is only summed or appended, else None."""
        inner = [f for f in c.frames if f[0] == "loop"]
        if not inner or inner[-1][1] is not lp:
            return None  # a nested loop between
        found = accumulation(c.small, c.node, c.stmt, lp.node, lp.suite)
        return (*found, c.node) if found is not None else None
