"""Loop facts for rules that ask "does this run on every iteration of a loop?" (DL008).

``LoopFrames`` is a visitor mixin: it keeps a stack of frames while the rule traverses
the file (``("loop", Loop)``, ``("cond", is_guard)``, ``("fn", no_grad)``, ``("nograd",)``),
the enclosing blocks, the innermost simple statement, and the names read in tests
(``if``/``while``/``assert``) inside each loop. ``every_iteration`` answers, from a
snapshot of the frames, which loop a node runs on every iteration of.
A rule mixes it in (``class R(LoopFrames, Rule)``), calls ``init_frames()`` in
``__init__`` and may override the ``on_assign`` / ``loop_is_eval`` hooks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional

import libcst as cst

_TEST_WORD = re.compile(r"(^|_)test(_|$)|^_*test|Test")


def in_test_code(functions: list, classes: list, filename: str) -> bool:
    """Code of a test: a test file, or an enclosing function / class named as a test
    (``test_x``, ``_run_x_test``, ``TestX``, ``_DistTestBase``). An explicit
    ``torch.cuda.synchronize()`` there is a correctness barrier (an asynchronous error or
    hang surfaces at the step that caused it), never a leftover."""
    from devlint.analysis.checkpoints import is_test_file

    if is_test_file(filename):
        return True
    return any(_TEST_WORD.search(n.name.value) for n in (*functions, *classes))


NO_GRAD = ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad")


@dataclass(eq=False)
class Loop:
    node: cst.CSTNode
    fn: Optional[cst.CSTNode]
    suite: cst.CSTNode  # the IndentedBlock / Module whose body holds the loop
    step: bool = False  # calls backward()/optimizer.step() in its own body
    eval: bool = False  # iterates a data loader under no_grad / inference_mode
    timed: bool = False  # reads a clock: the loop syncs on purpose to time each step


def every_iteration(frames: tuple, wanted: Callable[[Loop], bool]) -> Optional[Loop]:
    """The innermost ``wanted`` loop in ``frames`` whose every iteration runs the node
    (no non-guard condition between the loop and the node; not across a function)."""
    frames = list(frames)
    for i in range(len(frames) - 1, -1, -1):
        f = frames[i]
        if f[0] == "fn":
            return None
        if f[0] == "loop" and wanted(f[1]):
            if any(g[0] == "cond" and not g[1] for g in frames[i + 1:]):
                return None
            return f[1]
    return None


class LoopFrames:
    """Visitor mixin tracking loops, conditions, no-grad contexts and simple statements."""

    def init_frames(self) -> None:
        self.frames: list = []  # ("loop", Loop) / ("cond", guard?) / ("fn", nograd?) / ("nograd",)
        self.suites: list = []  # IndentedBlock / Module stack
        self.loops: dict = {}  # loop node -> Loop
        self.test_depth = 0
        self.test_names: dict = {}  # loop node -> names read in tests inside it
        self.smalls: list = []  # innermost simple statements
        self.with_nograd: dict = {}

    # hooks
    def on_assign(self, node: cst.Assign) -> None:
        pass

    def loop_is_eval(self, node: cst.For) -> bool:
        return False

    def fn_loops(self) -> list:
        out = []
        for f in reversed(self.frames):
            if f[0] == "fn":
                break
            if f[0] == "loop":
                out.append(f[1])
        return out

    def in_nograd(self) -> bool:
        for f in reversed(self.frames):
            if f[0] == "nograd":
                return True
            if f[0] == "fn":
                return f[1]
        return False

    def visit_Module(self, node: cst.Module) -> None:
        self.suites.append(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.suites.append(node)

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.suites.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        nograd = False
        for dec in node.decorators:
            d = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
            if self.facts.qualname(d) in NO_GRAD:
                nograd = True
        self.frames.append(("fn", nograd))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.frames.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.frames.append(("fn", False))

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self.frames.pop()

    def visit_With(self, node: cst.With) -> None:
        ng = False
        for item in node.items:
            e = item.item
            if isinstance(e, cst.Call) and self.facts.qualname(e.func) in NO_GRAD:
                ng = True
        self.with_nograd[node] = ng
        if ng:
            self.frames.append(("nograd",))

    def leave_With(self, node: cst.With) -> None:
        if self.with_nograd.pop(node, False):
            self.frames.pop()

    # loops
    def _push_loop(self, node) -> None:
        lp = self.loops.get(node)
        if lp is None:
            lp = Loop(node, None, self.suites[-1])
            self.loops[node] = lp
        self.frames.append(("loop", lp))

    def visit_For(self, node: cst.For) -> None:
        lp = Loop(node, None, self.suites[-1])
        lp.eval = self.loop_is_eval(node)
        self.loops[node] = lp

    def visit_For_body(self, node: cst.For) -> None:
        self._push_loop(node)

    def leave_For_body(self, node: cst.For) -> None:
        self.frames.pop()

    def visit_While_test(self, node: cst.While) -> None:
        self._push_loop(node)
        self.test_depth += 1

    def leave_While_test(self, node: cst.While) -> None:
        self.test_depth -= 1
        self.frames.pop()

    def visit_While_body(self, node: cst.While) -> None:
        self._push_loop(node)

    def leave_While_body(self, node: cst.While) -> None:
        self.frames.pop()

    # conditions: a sync below one does not run every iteration; a sync in a test steers flow
    def _cond(self, guard: bool = False) -> None:
        self.frames.append(("cond", guard))

    def _uncond(self) -> None:
        self.frames.pop()

    def visit_If_test(self, node: cst.If) -> None:
        self.test_depth += 1

    def leave_If_test(self, node: cst.If) -> None:
        self.test_depth -= 1

    def visit_If_body(self, node: cst.If) -> None:
        self._cond(self.facts.guard_polarity(node.test) == 1)

    def leave_If_body(self, node: cst.If) -> None:
        self._uncond()

    def visit_If_orelse(self, node: cst.If) -> None:
        self._cond()

    def leave_If_orelse(self, node: cst.If) -> None:
        self._uncond()

    def visit_IfExp_test(self, node: cst.IfExp) -> None:
        self.test_depth += 1

    def leave_IfExp_test(self, node: cst.IfExp) -> None:
        self.test_depth -= 1

    def visit_IfExp_body(self, node: cst.IfExp) -> None:
        self._cond()

    def leave_IfExp_body(self, node: cst.IfExp) -> None:
        self._uncond()

    def visit_IfExp_orelse(self, node: cst.IfExp) -> None:
        self._cond()

    def leave_IfExp_orelse(self, node: cst.IfExp) -> None:
        self._uncond()

    def visit_Assert(self, node: cst.Assert) -> None:
        self.test_depth += 1

    def leave_Assert(self, node: cst.Assert) -> None:
        self.test_depth -= 1

    def visit_For_orelse(self, node: cst.For) -> None:
        self._cond()

    def leave_For_orelse(self, node: cst.For) -> None:
        self._uncond()

    def visit_While_orelse(self, node: cst.While) -> None:
        self._cond()

    def leave_While_orelse(self, node: cst.While) -> None:
        self._uncond()

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._cond()

    def leave_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._uncond()

    def visit_Return(self, node: cst.Return) -> None:
        self._cond()

    def leave_Return(self, node: cst.Return) -> None:
        self._uncond()

    def visit_Raise(self, node: cst.Raise) -> None:
        self._cond()

    def leave_Raise(self, node: cst.Raise) -> None:
        self._uncond()

    def visit_Name(self, node: cst.Name) -> None:
        if self.test_depth:
            for lp in self.fn_loops():
                self.test_names.setdefault(lp.node, set()).add(node.value)

    # simple statements
    def visit_Assign(self, node: cst.Assign) -> None:
        self.smalls.append(node)
        self.on_assign(node)

    def leave_Assign(self, node: cst.Assign) -> None:
        self.smalls.pop()

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.smalls.append(node)

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        self.smalls.pop()

    def visit_Expr(self, node: cst.Expr) -> None:
        self.smalls.append(node)

    def leave_Expr(self, node: cst.Expr) -> None:
        self.smalls.pop()
