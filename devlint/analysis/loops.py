"""Loop facts for rules that ask "does this run on every iteration of a loop?" (DL008).

``LoopFrames`` is a visitor mixin: it keeps a stack of frames while the rule traverses
the file (``("loop", Loop)``, ``("cond", is_guard)``, ``("fn", no_grad)``, ``("nograd",)``),
the enclosing blocks, the innermost simple statement, and the names read in tests
(``if``/``while``/``assert``) inside each loop. ``every_iteration`` answers, from a
snapshot of the frames, which loop a node runs on every iteration of.
Rules that look at a whole loop body when the loop is left (DL003) use the functions
at the end: ``loop_bindings`` (what the body rebinds or mutates), ``occasional_nodes``
(what runs on some iterations only: ``if step % 100 == 0:``), ``simple_statements``
and ``hoist`` (move statements above the loop).
A rule mixes it in (``class R(LoopFrames, Rule)``), calls ``init_frames()`` in
``__init__`` and may override the ``on_assign`` / ``loop_is_eval`` hooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import libcst as cst

from devlint import lazyre
from devlint.analysis.usage import usage_of
from devlint.facts import dotted
from devlint.syntax import bound_names
from devlint.walk import children, nodes

_TEST_WORD = lazyre.compile(r"(^|_)test(_|$)|^_*test|Test")


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


# ---- a loop body as a whole (DL003: asked when the loop is left) -------------------------------

def target_names(target: cst.CSTNode) -> set:
    return set(bound_names(target))


def bindings(node: cst.CSTNode) -> tuple[list, set]:
    """(names bound under ``node``, one entry per binding; dotted names mutated in place:
    assigned through an attribute/subscript, by an in-place method ``x.add_()``, via ``.data``)."""
    bound: list = []
    mutated: set = set()

    def target(t):
        bound.extend(bound_names(t))
        if isinstance(t, (cst.Attribute, cst.Subscript)):
            d = dotted(t) if isinstance(t, cst.Attribute) else None
            root = t
            while isinstance(root, (cst.Attribute, cst.Subscript)):
                root = root.value
                if isinstance(root, cst.Name):
                    mutated.add(root.value)
            if d:
                mutated.add(d)

    for n in nodes(node):
        if isinstance(n, cst.Assign):
            for t in n.targets:
                target(t.target)
        elif isinstance(n, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.Del)):
            target(n.target)
        elif isinstance(n, cst.WithItem) and n.asname is not None:
            target(n.asname.name)
        elif isinstance(n, cst.ExceptHandler) and n.name is not None:
            target(n.name.name)
        elif isinstance(n, (cst.Global, cst.Nonlocal)):
            bound.extend(x.name.value for x in n.names)
        elif isinstance(n, (cst.Import, cst.ImportFrom)) and not isinstance(n.names, cst.ImportStar):
            for al in n.names:
                nm = al.asname.name if al.asname else al.name
                bound.append(nm.value if isinstance(nm, cst.Name) else (dotted(nm) or "").split(".")[0])
        elif isinstance(n, (cst.FunctionDef, cst.ClassDef)):
            bound.append(n.name.value)
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute):
            meth = n.func.attr.value
            if meth.endswith("_") and not meth.startswith("_") or meth == "copy_":
                d = dotted(n.func.value)
                if d:
                    mutated.add(d)
                    mutated.add(d.split(".")[0])
        elif isinstance(n, cst.Attribute) and n.attr.value == "data":
            d = dotted(n.value)
            if d:
                mutated.add(d)
    return bound, mutated


def loop_bindings(loop: cst.CSTNode) -> tuple[list, set]:
    """``bindings`` of a loop's body, plus the ``for`` target."""
    bound, mutated = bindings(loop.body)
    if isinstance(loop, cst.For):
        bound = [*bound, *target_names(loop.target)]
    return bound, mutated


def not_every_iteration(test: cst.BaseExpression, loop: cst.CSTNode) -> bool:
    """An ``if`` test that holds on some iterations only: periodic (``step % 100 == 0``,
    ``not i % log_every``), one iteration (``i == 0`` for the loop variable ``i``) or chosen
    ones (``i in sample_ids``), also as one side of an ``and``."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return not_every_iteration(test.left, loop) or not_every_iteration(test.right, loop)
    for n in nodes(test):
        if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo) and not isinstance(
                n.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return True
    if isinstance(loop, cst.For) and isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
            and isinstance(test.comparisons[0].operator, cst.In) and isinstance(test.left, cst.Name) \
            and test.left.value in target_names(loop.target):
        return True  # `if i in ret_samples_ids:` picks some iterations
    if isinstance(loop, cst.For) and isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        c = test.comparisons[0]
        sides = (test.left, c.comparator)
        if isinstance(c.operator, cst.Equal) and any(isinstance(s, cst.Integer) for s in sides):
            names = target_names(loop.target)
            return any(isinstance(s, cst.Name) and s.value in names for s in sides)
    return False


def occasional_nodes(loop: cst.CSTNode) -> set:
    """The nodes of ``loop``'s body that run on some iterations only (under a
    ``not_every_iteration`` test); nested loops are left to their own analysis."""
    out: set = set()
    stack = [loop.body]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.If) and not_every_iteration(n.test, loop):
            out.update(nodes(n.body))
            if n.orelse is not None:
                stack.append(n.orelse)
            continue
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(children(n, trivia=False))
    return out


def simple_statements(body: cst.BaseSuite) -> Iterator[cst.BaseSuite]:
    """The simple statement lines under ``body`` in source order (into ``if``/``with``/
    ``try``/nested loops, not into functions or classes)."""
    if isinstance(body, cst.SimpleStatementSuite):
        yield body  # has .body of small statements, like a line
        return
    for st in body.body:
        if isinstance(st, cst.SimpleStatementLine):
            yield st
        elif isinstance(st, (cst.FunctionDef, cst.ClassDef)):
            continue
        else:
            for attr in ("body", "orelse", "finalbody"):
                sub = getattr(st, attr, None)
                if isinstance(sub, cst.If):
                    yield from simple_statements(cst.IndentedBlock(body=[sub]))
                elif sub is not None and hasattr(sub, "body"):
                    yield from simple_statements(sub.body if isinstance(sub, (cst.Else, cst.Finally)) else sub)
            for h in getattr(st, "handlers", ()):
                yield from simple_statements(h.body)


def hoist(loop, moved: list, inline: dict, new_stmt=None) -> cst.FlattenSentinel:
    """``loop`` with the ``moved`` statements of its body (or ``new_stmt``) placed above it
    and the ``inline`` nodes replaced; the loop's leading comments go first."""
    body = loop.body
    for old, repl in inline.items():
        body = body.deep_replace(old, repl)
    if moved:
        keep = [s for s in body.body if s not in moved] or [cst.SimpleStatementLine([cst.Pass()])]
        body = body.with_changes(body=keep)
        head = [s.with_changes(leading_lines=[*loop.leading_lines, *s.leading_lines]) if i == 0 else s
                for i, s in enumerate(moved)]
    else:
        head = [new_stmt.with_changes(leading_lines=loop.leading_lines)]
    return cst.FlattenSentinel([*head, loop.with_changes(body=body, leading_lines=())])


def hoisted_name(loop, node: cst.CSTNode, recv: cst.CSTNode, built: bool) -> str:
    """A name (before de-duplication) for ``node`` hoisted above ``loop``, from what it holds
    (``w.to(d)`` -> ``w_dev``) or what it feeds (``weight=`` -> ``weight``, ``boxes * <it>``
    -> ``boxes_scale``, ``t = <it> + 1`` -> ``t_offset``, ``print(<it>)`` -> ``print_arg``)."""
    if isinstance(recv, cst.Name):
        return f"{recv.value}_dev"
    if built and recv.args and isinstance(recv.args[0].value, cst.Name):
        return f"{recv.args[0].value.value}_dev"  # `torch.tensor(vals).cuda()` -> `vals_dev`
    parent = usage_of(loop).parent
    child, p = node, parent.get(node)
    if isinstance(p, cst.Arg) and p.keyword is not None:
        return p.keyword.value
    word = "values"
    if isinstance(p, cst.BinaryOperation):
        word = "scale" if isinstance(p.operator, (cst.Multiply, cst.Divide)) else "offset"
        other = dotted(p.left if p.right is child else p.right)
        if other is not None:
            return f"{other.rsplit('.', 1)[-1]}_{word}"
    while p is not None and not isinstance(p, (cst.Assign, cst.AugAssign, cst.Call, cst.SimpleStatementLine)):
        child, p = p, parent.get(p)
    t = dotted(p.targets[0].target if isinstance(p, cst.Assign) else p.target) \
        if isinstance(p, (cst.Assign, cst.AugAssign)) else None
    if isinstance(p, cst.Call) and dotted(p.func) is not None and word == "values":
        t, word = dotted(p.func), "arg"
    return f"{t.rsplit('.', 1)[-1]}_{word}" if t is not None else word


def direct_statement(loop, node: cst.CSTNode) -> Optional[cst.SimpleStatementLine]:
    """The one-statement line of ``loop``'s own body (not a nested block) holding ``node``."""
    if not isinstance(loop.body, cst.IndentedBlock):
        return None
    for st in loop.body.body:
        if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1 and any(n is node for n in nodes(st)):
            return st
    return None


def bound_from(body: cst.CSTNode, values: set) -> set:
    """Names assigned under ``body`` from one of the nodes whose ids are in ``values``."""
    out: set = set()
    for n in nodes(body):
        if isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None and id(n.value) in values:
            for t in (n.targets if isinstance(n, cst.Assign) else [n]):
                out |= target_names(t.target)
    return out


def reuse_hazard(body: cst.CSTNode, name: str, module: bool, own: list) -> Optional[str]:
    """Why hoisting a move of ``name`` out of ``body`` may change what the loop does: the
    name is passed to a call, or (a module) converted again by a call not in ``own``."""
    for n in nodes(body):
        if isinstance(n, cst.Arg) and isinstance(n.value, cst.Name) and n.value.value == name:
            return f"`{name}` is passed to a call in the loop"
        if module and isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and not any(n is o for o in own) \
                and n.func.attr.value in ("to", "cuda", "cpu", "half", "float", "double", "type") \
                and isinstance(n.func.value, cst.Name) and n.func.value.value == name:
            return f"`{name}` is converted again in the loop"
    return None
