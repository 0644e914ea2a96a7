from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from devlint.diagnostic import Applicability, Fix
from devlint.facts import MODULE, PARAM, TENSOR, call_arg, dotted, is_cuda_string, string_value
from devlint.fixes import torch_ref
from devlint.rule import Invalid, Rule
from devlint.walk import nodes

HOST_METHODS = frozenset({"cpu", "numpy", "item", "tolist"})
MOVE_METHODS = frozenset({"to", "cuda"})
BUILDERS = frozenset({"tensor", "as_tensor", "from_numpy"})
# NumPy ops with a one-to-one torch equivalent (same argument order, positional use)
NUMPY_TO_TORCH = {
    "clip": "clamp", "where": "where", "exp": "exp", "log": "log", "abs": "abs", "absolute": "abs",
    "sqrt": "sqrt", "maximum": "maximum", "minimum": "minimum", "tanh": "tanh", "sin": "sin",
    "cos": "cos", "floor": "floor", "ceil": "ceil", "sign": "sign", "square": "square",
    "negative": "neg", "log1p": "log1p", "expm1": "expm1",
}
DTYPE_METHODS = frozenset({"float", "double", "half", "bfloat16", "long", "int", "bool", "short", "byte"})
def names_in(node: cst.CSTNode) -> set:
    return {n.value for n in nodes(node) if isinstance(n, cst.Name)}


def _bind_targets(target: cst.CSTNode, out: set) -> None:
    if isinstance(target, cst.Name):
        out.add(target.value)
    elif isinstance(target, (cst.Tuple, cst.List)):
        for el in target.elements:
            _bind_targets(el.value, out)
    elif isinstance(target, cst.StarredElement):
        _bind_targets(target.value, out)


def bindings(node: cst.CSTNode) -> tuple[list, set]:
    """(names bound under ``node``, one entry per binding; dotted names mutated in place)."""
    bound: list = []
    mutated: set = set()

    def target(t):
        s: set = set()
        _bind_targets(t, s)
        bound.extend(s)
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
        elif isinstance(n, (cst.AnnAssign, cst.AugAssign)):
            target(n.target)
        elif isinstance(n, (cst.For, cst.CompFor)):
            target(n.target)
        elif isinstance(n, cst.NamedExpr):
            target(n.target)
        elif isinstance(n, cst.WithItem) and n.asname is not None:
            target(n.asname.name)
        elif isinstance(n, cst.ExceptHandler) and n.name is not None:
            target(n.name.name)
        elif isinstance(n, cst.Del):
            target(n.target)
        elif isinstance(n, (cst.Global, cst.Nonlocal)):
            bound.extend(x.name.value for x in n.names)
        elif isinstance(n, (cst.Import, cst.ImportFrom)) and not isinstance(n.names, cst.ImportStar):
            for al in n.names:
                nm = al.asname.name if al.asname else al.name
                if isinstance(nm, cst.Name):
                    bound.append(nm.value)
                else:
                    bound.append((dotted(nm) or "").split(".")[0])
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


class LoopTransfer(Rule):
    """
    ## What it does
    Flags host<->device traffic repeated every iteration of a `for`/`while` loop that
    could be avoided:
    a round trip (a device value goes to the host with `.cpu()`, `.numpy()`, `.item()`,
    `.tolist()` or `.to("cpu")` and the result, or something computed from it, comes back
    to the device in the same iteration); a loop-invariant tensor or module, defined
    outside the loop and never reassigned in it, moved to the device every iteration
    (`class_weights.to(device)`, `model.to(device)`); and a host tensor built from
    loop-invariant data every iteration only to be moved (`torch.tensor([0.2, 0.8]).cuda()`).
    Moving the fresh batch (`x = x.to(device)`), `.item()` after the loop and transfers
    whose result never returns to the device (logging) are not reported.

    ## Why is this bad?
    Every host<->device copy crosses PCIe and a device->host copy also synchronises the
    GPU, stalling the pipeline. Inside a training loop the cost is paid thousands of
    times, for data that either never changes or never needed to leave the GPU.

    ## Example
    ```python
    weights = torch.tensor([0.2, 0.8])
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        out = model(x)
        loss = F.cross_entropy(out, y, weight=weights.to(device))
        probs = torch.from_numpy(np.clip(out.detach().cpu().numpy(), 0, 1)).to(device)
    ```

    ## Use instead
    ```python
    weights = torch.tensor([0.2, 0.8])
    weights_dev = weights.to(device)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        out = model(x)
        loss = F.cross_entropy(out, y, weight=weights_dev)
        probs = torch.clamp(out.detach(), 0, 1)
    ```

    ## Fix safety
    Hoisting a loop-invariant move above the loop is safe when the moved name is a plain
    name that is not rebound, mutated in place or passed to a call in the loop, is not an
    `nn.Parameter` (an optimizer updates those every step), the moved copy is never changed
    in place nor passed to a call that might change it (a module call might: `inplace=True`
    layers), the move is a statement of the
    loop body itself (not inside an `if`), and its device is loop-invariant; otherwise the
    fix is unsafe. A hoisted `y = w.to(device)` keeps its name; an inline move gets a new
    name that shadows nothing. A host tensor built from constants inside a nested block is
    built on the device instead (`torch.tensor(v, device=device)`, safe). Replacing a NumPy
    round trip by the torch op on the device (`np.clip` -> `torch.clamp`, `np.where` ->
    `torch.where`, `np.exp`, `np.maximum`...) is unsafe: the result stays on the input's
    device and keeps the tensor's dtype promotion rules; other round trips are reported
    without a fix.
    """

    code = "DL003"
    # name, summary, default and prefilter: devlint/catalogue.py

    VALID = [
        # the fresh batch must be moved every iteration
        "import torch\ndevice = torch.device('cpu')\nfor x in [torch.ones(2)]:\n    x = x.to(device)\n",
        # .item() for logging only never returns to the device
        "import torch\ndevice = torch.device('cpu')\nw = torch.ones(2).to(device)\n"
        "for i in range(3):\n    loss = (w * i).sum()\n    print(loss.item())\n",
        # rebound in the loop: not invariant
        "import torch\ndevice = torch.device('cpu')\nh = torch.zeros(2)\n"
        "for i in range(3):\n    h = h.to(device)\n    h = h + 1\n",
        # no evidence that `batch` is a tensor or module
        "def f(batch, device, n):\n    for i in range(n):\n        batch.to(device)\n",
        # a dtype conversion is not a transfer
        "import torch\nw = torch.ones(2)\nfor i in range(3):\n    y = w.to(torch.float64)\n",
        # the round trip's host value is fresh host data, not a device value
        "import torch\ndevice = torch.device('cpu')\nfor y in [torch.ones(2)]:\n"
        "    t = torch.tensor(y.numpy()).to(device)\n",
        # loop-variant data built per iteration
        "import torch\ndevice = torch.device('cpu')\nfor i in range(3):\n"
        "    t = torch.tensor([i, i]).to(device)\n",
        # a dtype conversion of loop-variant data
        "import torch\nfor i in range(3):\n    t = torch.tensor([i]).float().cuda()\n",
    ]
    INVALID = [
        Invalid(
            "import torch\nfrom torch import nn\ndevice = torch.device('cpu')\nmodel = nn.Linear(2, 2)\n"
            "for i in range(3):\n    model.to(device)\n    y = model(torch.ones(2))\n",
            "import torch\nfrom torch import nn\ndevice = torch.device('cpu')\nmodel = nn.Linear(2, 2)\n"
            "model.to(device)\nfor i in range(3):\n    y = model(torch.ones(2))\n",
        ),
        Invalid(
            "import torch\ndevice = torch.device('cpu')\nw = torch.ones(2)\n"
            "for i in range(3):\n    loss = (w.to(device) * i).sum()\n",
            "import torch\ndevice = torch.device('cpu')\nw = torch.ones(2)\n"
            "w_dev = w.to(device)\nfor i in range(3):\n    loss = (w_dev * i).sum()\n",
        ),
        Invalid(
            "import torch\ndevice = torch.device('cpu')\nfor i in range(3):\n"
            "    # class weights\n    cw = torch.tensor([0.2, 0.8]).to(device)\n    print(cw * i)\n",
            "import torch\ndevice = torch.device('cpu')\n# class weights\ncw = torch.tensor([0.2, 0.8]).to(device)\n"
            "for i in range(3):\n    print(cw * i)\n",
        ),
        Invalid(  # the built tensor is changed in place: hoisting would carry state across iterations
            "import torch\ndevice = torch.device('cpu')\nfor i in range(3):\n"
            "    acc = torch.tensor([0.0]).to(device)\n    acc.add_(i)\n    print(acc)\n",
            "import torch\ndevice = torch.device('cpu')\nacc = torch.tensor([0.0]).to(device)\n"
            "for i in range(3):\n    acc.add_(i)\n    print(acc)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nrank = 0\nfor i in range(3):\n    b = torch.tensor([rank]).float().cuda(rank)\n    print(b + i)\n",
            "import torch\nrank = 0\nb = torch.tensor([rank]).float().cuda(rank)\nfor i in range(3):\n"
            "    print(b + i)\n",
        ),
        Invalid(
            "import torch\ndevice = torch.device('cpu')\nfor i in range(3):\n    if i:\n"
            "        print(torch.tensor([1.0, 2.0]).to(device))\n",
            "import torch\ndevice = torch.device('cpu')\nfor i in range(3):\n    if i:\n"
            "        print(torch.tensor([1.0, 2.0], device=device))\n",
        ),
        Invalid(
            "import numpy as np\nimport torch\ndevice = torch.device('cpu')\n"
            "for i in range(3):\n    h = torch.randn(2).to(device) * i\n"
            "    h = torch.from_numpy(np.clip(h.detach().cpu().numpy(), 0, 1)).to(device)\n",
            "import numpy as np\nimport torch\ndevice = torch.device('cpu')\n"
            "for i in range(3):\n    h = torch.randn(2).to(device) * i\n"
            "    h = torch.clamp(h.detach(), 0, 1)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\ndevice = torch.device('cpu')\n"
            "for i in range(3):\n    h = torch.randn(2).to(device) * i\n    v = h.sum().item()\n"
            "    t = torch.tensor(v + 1, device=device)\n",
        ),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._reported: set = set()
        self._new_names: set = set()
        # ids of the loops holding a call that can move data to a device (`.to`, `.cuda`,
        # `torch.tensor(..., device=)`): only those are analysed (most loops hold none)
        self._moving_loops: set = set()

    # ---- helpers ----------------------------------------------------------------------
    def _device_arg(self, call: cst.Call, keyword_only: bool = False) -> Optional[cst.BaseExpression]:
        """The device a `.to(...)` / `.cuda()` / builder moves to, when it is not the CPU."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "cuda" and not keyword_only:
            return cst.Name("cuda")  # marker: the default CUDA device
        a = call_arg(call, None if keyword_only else 0, "device")
        if a is None:
            return None
        v = a.value
        if isinstance(v, cst.SimpleString):
            return v if is_cuda_string(v) else None
        if isinstance(v, cst.Call) and self.facts.is_torch(v.func, "torch.device"):
            return v if v.args and string_value(v.args[0].value) != "cpu" else None
        d = dotted(v)
        if d is None:
            return None
        last = d.rsplit(".", 1)[-1].lower()
        if d in {dv.name for dv in self.facts.device_vars} or "device" in last or last in ("dev", "gpu"):
            return v
        return None

    def _is_move(self, node: cst.CSTNode) -> bool:
        return (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in MOVE_METHODS and self._device_arg(node) is not None)

    def _is_host(self, node: cst.CSTNode) -> Optional[cst.BaseExpression]:
        """The receiver of a device->host conversion (`t.cpu()`, `t.to("cpu")` ...), else None."""
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
            return None
        meth = node.func.attr.value
        if meth in HOST_METHODS:
            return node.func.value
        if meth == "to":
            a = call_arg(node, 0, "device")
            if a is not None and string_value(a.value) == "cpu":
                return node.func.value
        return None

    def _new_name(self, base: str) -> str:
        used = self.facts.bound_names | set(self.facts.aliases)
        name = f"{base}_dev"
        i = 2
        while name in used or name in self._new_names:
            name = f"{base}_dev{i}"
            i += 1
        self._new_names.add(name)
        return name

    # ---- loops ----------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        if not self.t.loops:
            return
        f = node.func
        if isinstance(f, cst.Attribute):
            moving = f.attr.value in MOVE_METHODS or f.attr.value in BUILDERS
        else:  # `tensor(...)` imported from torch, under any name
            moving = isinstance(f, cst.Name) and (self.facts.qualname(f) or "").rsplit(".", 1)[-1] in BUILDERS
        if moving:
            self._moving_loops.update(map(id, self.t.loops))

    def leave_For(self, node: cst.For) -> None:
        self._loop(node)

    def leave_While(self, node: cst.While) -> None:
        self._loop(node)

    def _loop(self, loop) -> None:
        if id(loop) not in self._moving_loops:
            return
        body = loop.body
        bound_list, mutated = bindings(body)
        if isinstance(loop, cst.For):
            s: set = set()
            _bind_targets(loop.target, s)
            bound_list = [*bound_list, *s]
        bound = set(bound_list)
        direct = list(body.body) if isinstance(body, cst.IndentedBlock) else []
        self._round_trips(loop, body, bound)
        self._invariant_moves(loop, body, bound, bound_list, mutated, direct)

    # ---- invariant moves and invariant host builds -------------------------------------
    def _invariant_moves(self, loop, body, bound, bound_list, mutated, direct) -> None:
        scope, cls = self.t.scope, self.t.cls
        groups: dict = {}
        for n in nodes(body):
            if n in self._reported or not self._is_move(n):
                continue
            recv = n.func.value
            dev = self._device_arg(n)
            if names_in(dev) & bound or (n.args and any(names_in(a.value) & bound for a in n.args)):
                continue
            kind = None
            built = False
            if isinstance(recv, cst.Name):
                if recv.value in bound or recv.value in mutated:
                    continue
                kind = self.facts.kind_of(recv, scope, cls)
                if kind not in (TENSOR, PARAM, MODULE):
                    continue
            elif isinstance(recv, cst.Call) and self._invariant_build(recv, bound):
                built = True
            else:
                continue
            key = self.ctx.module.code_for_node(n)
            groups.setdefault(key, []).append((n, recv, kind, built))
        for key, items in groups.items():
            self._report_invariant(loop, body, items, bound_list, direct)

    def _invariant_build(self, call: cst.Call, bound: set) -> bool:
        # peel dtype conversions: `torch.tensor([rank]).float().cuda()`
        while (isinstance(call.func, cst.Attribute) and call.func.attr.value in DTYPE_METHODS
               and not call.args and isinstance(call.func.value, cst.Call)):
            call = call.func.value
        q = self.facts.qualname(call.func)
        if q is None or q.count(".") != 1 or q.rsplit(".", 1)[-1] not in BUILDERS:
            return False
        if not call.args or call_arg(call, None, "device") is not None:
            return False
        for a in call.args:
            for sub in nodes(a.value):
                if isinstance(sub, cst.Call) and not self.facts.qualname(sub.func):
                    return False  # may have side effects or vary
            if names_in(a.value) & bound:
                return False
        return True

    def _stmt_of(self, node, direct) -> Optional[cst.SimpleStatementLine]:
        for st in direct:
            if isinstance(st, cst.SimpleStatementLine) and len(st.body) == 1:
                for sub in nodes(st):
                    if sub is node:
                        return st
        return None

    def _report_invariant(self, loop, body, items, bound_list, direct) -> None:
        node, recv, kind, built = items[0]
        text = self.ctx.module.code_for_node(node)
        if built:
            what = f"`{text}` builds a host tensor from loop-invariant data and moves it every iteration"
        elif kind == MODULE:
            what = f"`{text}` moves a module that does not change in the loop every iteration"
        else:
            what = f"`{text}` moves a loop-invariant tensor to the device every iteration"
        for n, *_ in items:
            self._reported.add(n)
        stmts = [self._stmt_of(n, direct) for n, *_ in items]
        unsafe_reasons = []
        if kind == PARAM:
            unsafe_reasons.append("an nn.Parameter changes every optimizer step")
        if isinstance(recv, cst.Name):
            for n in nodes(body):
                if isinstance(n, cst.Arg) and isinstance(n.value, cst.Name) and n.value.value == recv.value:
                    unsafe_reasons.append(f"`{recv.value}` is passed to a call in the loop")
                    break
                if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n not in [i[0] for i in items]:
                    if n.func.attr.value in ("to", "cuda", "cpu", "half", "float", "double", "type") \
                            and isinstance(n.func.value, cst.Name) and n.func.value.value == recv.value \
                            and kind == MODULE:
                        unsafe_reasons.append(f"`{recv.value}` is converted again in the loop")
                        break
        fix = None
        st = stmts[0] if len(items) == 1 else None
        small = st.body[0] if st is not None else None
        if kind == MODULE:
            if st is not None and isinstance(small, cst.Expr) and small.value is node:
                fix = self._hoist(loop, body, [st], {}, "hoist the move above the loop", unsafe_reasons)
        elif (st is not None and isinstance(small, cst.Assign) and small.value is node
              and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
            y = small.targets[0].target.value
            reasons = list(unsafe_reasons)
            if bound_list.count(y) != 1 or self._binding_count(y) != 1:
                reasons.append(f"`{y}` is bound elsewhere too")
            _, mutated = bindings(body)
            if y in mutated:
                reasons.append(f"`{y}` is changed in place in the loop")
            esc = self._escapes(body, lambda v: isinstance(v, cst.Name) and v.value == y)
            if esc:
                reasons.append(esc)
            fix = self._hoist(loop, body, [st], {}, "hoist the move above the loop", reasons)
        elif all(s is not None for s in stmts):
            base = recv.value if isinstance(recv, cst.Name) else "const"
            if built and isinstance(recv.args[0].value, cst.Name):
                base = recv.args[0].value.value
            new = self._new_name(base)
            moved = {id(n) for n, *_ in items}
            esc = self._escapes(body, lambda v: id(v) in moved)
            if esc:
                unsafe_reasons.append(esc)
            # `y = <move>` binds an alias of the hoisted tensor: it must not change either
            aliases: set = set()
            for n in nodes(body):
                if isinstance(n, (cst.Assign, cst.AnnAssign)) and n.value is not None and id(n.value) in moved:
                    for t in (n.targets if isinstance(n, cst.Assign) else [n]):
                        _bind_targets(t.target, aliases)
            _, mutated = bindings(body)
            if aliases & mutated:
                unsafe_reasons.append(f"`{sorted(aliases & mutated)[0]}` is changed in place in the loop")
            esc = self._escapes(body, lambda v: isinstance(v, cst.Name) and v.value in aliases)
            if esc:
                unsafe_reasons.append(esc)
            assign = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(new))], node)])
            fix = self._hoist(loop, body, [], {n: cst.Name(new) for n, *_ in items},
                              f"move once above the loop as `{new}`", unsafe_reasons, assign)
        elif (built and node.func.attr.value == "to" and len(node.args) == 1
              and self.facts.qualname(recv.func) is not None):
            # inside a nested block: build directly on the device
            dev = self._device_arg(node)
            args = list(recv.args)
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(cst.Arg(dev, keyword=cst.Name("device"),
                                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
            fix = Fix(Applicability.SAFE, "build the tensor on the device",
                      {n: recv.with_changes(args=args) for n, *_ in items})
        for n, *_ in items:
            self.report(n, what, fix)

    _PURE_BUILTINS = frozenset({"print", "len", "float", "int", "str", "repr", "bool", "isinstance", "round", "format"})

    def _may_mutate(self, call: cst.Call) -> bool:
        """Whether a call might change a tensor passed to it in place (modules: `ReLU(inplace=True)`)."""
        if isinstance(call.func, cst.Name) and call.func.value in self._PURE_BUILTINS \
                and call.func.value not in self.facts.bound_names:
            return False
        q = self.facts.qualname(call.func)
        if q is None or not q.startswith("torch.") or q.startswith(("torch.distributed", "torch.nn.init")):
            return True
        last = q.rsplit(".", 1)[-1]
        return last.endswith("_") or last[:1].isupper()

    def _escapes(self, body, match) -> Optional[str]:
        """A reason the value at ``match`` (a node test) may be changed in place in the loop."""
        for n in nodes(body):
            if isinstance(n, cst.Call):
                for a in n.args:
                    if match(a.value) and self._may_mutate(n):
                        return f"`{self.ctx.module.code_for_node(n.func)}` may change it in place"
        return None

    def _binding_count(self, name: str) -> int:
        scope = self.t.scope
        root = scope.body if scope is not None else self.ctx.module
        bound, _ = bindings(root)
        return bound.count(name)

    def _hoist(self, loop, body, moved, inline, msg, unsafe_reasons, new_stmt=None) -> Fix:
        """Move ``moved`` statements (or ``new_stmt``) above ``loop``; replace ``inline`` nodes."""
        new_body = body
        if inline:
            for old, repl in inline.items():
                new_body = new_body.deep_replace(old, repl)
        if moved:
            keep = [s for s in new_body.body if s not in moved]
            if not keep:
                keep = [cst.SimpleStatementLine([cst.Pass()])]
            new_body = new_body.with_changes(body=keep)
        new_loop = loop.with_changes(body=new_body, leading_lines=())
        head = []
        if moved:
            head = [s.with_changes(leading_lines=loop.leading_lines if i == 0 else s.leading_lines)
                    if not s.leading_lines else
                    s.with_changes(leading_lines=[*loop.leading_lines, *s.leading_lines])
                    for i, s in enumerate(moved)]
        else:
            head = [new_stmt.with_changes(leading_lines=loop.leading_lines)]
        applic = Applicability.UNSAFE if unsafe_reasons else Applicability.SAFE
        if unsafe_reasons:
            msg += f" (unsafe: {unsafe_reasons[0]})"
        return Fix(applic, msg, {loop: cst.FlattenSentinel([*head, new_loop])})

    # ---- round trips ------------------------------------------------------------------------
    def _round_trips(self, loop, body, bound) -> None:
        scope, cls = self.t.scope, self.t.cls
        device: set = set()
        host: set = set()

        def refs(expr, names):
            return bool(names_in(expr) & names)

        def host_conv(expr) -> bool:
            for n in nodes(expr):
                r = self._is_host(n)
                if r is not None and self._on_device(r, device):
                    return True
            return False

        def dev_expr(expr) -> bool:
            for n in nodes(expr):
                if self._is_move(n):
                    return True
                if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and \
                        self.facts.kind_of(n.func, scope, cls) == MODULE:
                    return True
            return refs(expr, device)

        for st in self._simple_statements(body):
            for small in st.body:
                # data coming back to the device
                for n in nodes(small):
                    if n in self._reported:
                        continue
                    payload = self._returning_payload(n)
                    if payload is None:
                        continue
                    if host_conv(payload) or refs(payload, host):
                        self._reported.add(n)
                        self._report_round_trip(n, payload, device)
                value = getattr(small, "value", None)
                targets: set = set()
                if isinstance(small, cst.Assign):
                    for t in small.targets:
                        _bind_targets(t.target, targets)
                elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                    _bind_targets(small.target, targets)
                if value is None or not targets:
                    continue
                if host_conv(value) or (refs(value, host) and not dev_expr(value)):
                    host |= targets
                    device -= targets
                elif dev_expr(value):
                    device |= targets
                    host -= targets
                else:
                    host -= targets
                    device -= targets

    def _simple_statements(self, body) -> Iterator[cst.SimpleStatementLine]:
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
                        yield from self._simple_statements(cst.IndentedBlock(body=[sub]))
                    elif sub is not None and hasattr(sub, "body"):
                        inner = sub.body if isinstance(sub, (cst.Else, cst.Finally)) else sub
                        yield from self._simple_statements(inner)
                for h in getattr(st, "handlers", ()):
                    yield from self._simple_statements(h.body)

    def _on_device(self, expr, device: set) -> bool:
        """Evidence that ``expr`` lives on the device in this iteration."""
        return bool(names_in(expr) & device) or any(self._is_move(n) for n in nodes(expr))

    def _returning_payload(self, node) -> Optional[cst.BaseExpression]:
        """For a call that sends host data to the device, the host data; else None."""
        if not isinstance(node, cst.Call):
            return None
        q = self.facts.qualname(node.func)
        if q is not None and q.count(".") == 1 and q.rsplit(".", 1)[-1] in ("tensor", "as_tensor"):
            if node.args and self._device_arg(node, keyword_only=True) is not None:
                return node.args[0].value
            return None
        if self._is_move(node):
            return node.func.value
        return None

    def _report_round_trip(self, node: cst.Call, payload, device: set) -> None:
        msg = ("device value goes to the host and comes back to the device every iteration; "
               "keep the computation on the device")
        self.report(node, msg, self._numpy_fix(node, device))

    def _numpy_fix(self, node: cst.Call, device: set) -> Optional[Fix]:
        # torch.from_numpy(np.F(<t>.cpu().numpy(), ...)).to(d)  /  torch.tensor(np.F(...), device=d)
        inner = None
        if self._is_move(node) and isinstance(node.func.value, cst.Call):
            b = node.func.value
            q = self.facts.qualname(b.func)
            if q in ("torch.from_numpy", "torch.tensor", "torch.as_tensor") and len(b.args) == 1:
                inner = b.args[0].value
        elif isinstance(node, cst.Call) and node.args:
            inner = node.args[0].value
        if not isinstance(inner, cst.Call) or any(a.keyword or a.star for a in inner.args):
            return None
        q = self.facts.qualname(inner.func)
        if q is None or not q.startswith("numpy.") or q.count(".") != 1:
            return None
        op = NUMPY_TO_TORCH.get(q.split(".")[1])
        if op is None:
            return None
        found = []

        class Swap(cst.CSTTransformer):
            def leave_Call(s, orig, upd):
                dev = self._strip_host(orig, device)
                if dev is not None:
                    found.append(dev)
                    return dev
                return upd

        new_args = [a.visit(Swap()) for a in inner.args]
        if not found:
            return None
        if op in ("maximum", "minimum") and len(new_args) == 2:
            other = new_args[1].value
            if isinstance(other, (cst.Integer, cst.Float)) or (
                    isinstance(other, cst.UnaryOperation) and isinstance(other.expression, (cst.Integer, cst.Float))):
                kw = "min" if op == "maximum" else "max"
                new_args = [new_args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                            cst.Arg(other, keyword=cst.Name(kw),
                                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))]
                op = "clamp"
            elif not any(other is f for f in found):
                return None
        t, needs = torch_ref(self.facts)
        new = cst.Call(func=cst.parse_expression(f"{t}.{op}"), args=new_args)
        for sub in nodes(new):  # any host value left: not a one-to-one rewrite
            if self._is_host(sub) is not None:
                return None
        return Fix(Applicability.UNSAFE, f"use `{t}.{op}` on the device instead of `{q}` on the host",
                   {node: new}, needs_torch_import=needs)

    def _strip_host(self, call: cst.Call, device: set) -> Optional[cst.BaseExpression]:
        """``t.detach().cpu().numpy()`` -> ``t.detach()``: the device tensor before it left."""
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "numpy"):
            return None
        cur = call.func.value
        while (isinstance(cur, cst.Call) and isinstance(cur.func, cst.Attribute)
               and (cur.func.attr.value == "cpu" or (cur.func.attr.value == "to"
                                                     and self._is_host(cur) is not None))):
            cur = cur.func.value
        if not self._on_device(cur, device):
            return None
        return cur
