from __future__ import annotations

from typing import Optional

import libcst as cst

from devlint import lazyre
from devlint.analysis.accumulators import arith_path, count_name, short
from devlint.analysis.loops import (bindings, bound_from, direct_statement, hoist, hoisted_name, loop_bindings,
                                    occasional_nodes, reuse_hazard, simple_statements)
from devlint.analysis.transfers import (BUILDERS, MOVE_METHODS, IterationFlow, computed_tensor, device_target,
                                        element_reads, escapes, works_on_device,
                                        invariant_build, is_move, placed_on_device, returning_payload, scalar_payload,
                                        tensor_type_aliases)
from devlint.diagnostic import Applicability, Fix
from devlint.facts import MODULE, PARAM, TENSOR
from devlint.fixes import device_draw, method_call, numpy_round_trip_fix, one_hot_fix, scalar_fill_fix
from devlint.rule import Invalid, Rule, unsafe
from devlint.syntax import string_value
from devlint.walk import nodes, statements

# NumPy calls whose data could be made on the device: random draws, these, and nothing else
HOST_FACTORIES = frozenset({"numpy.zeros", "numpy.ones", "numpy.full"})


def names_in(node: cst.CSTNode) -> set:
    return {n.value for n in nodes(node) if isinstance(n, cst.Name)}


def _read_base(expr: cst.BaseExpression) -> tuple:
    """``(name, names in its indices)`` for ``t``, ``t[b]``, ``t[:3, i]``, ``t.data``,
    ``t.detach()``, ``t[b].clone()``: the tensor a read-back copies; ``(None, ...)`` otherwise."""
    names: set = set()
    while True:
        t = type(expr)
        if t is cst.Name:
            return expr.value, names
        if t is cst.Subscript:
            for el in expr.slice:
                names |= names_in(el.slice)
            expr = expr.value
        elif t is cst.Attribute and expr.attr.value == "data":
            expr = expr.value
        elif t is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in ("detach", "clone") \
                and not expr.args:
            expr = expr.func.value
        else:
            return None, names


_READ_BACK = frozenset({"cpu", "numpy", "tolist", "item"})
# reductions of a tensor the host already holds: computed there, nothing needs to come back
_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod", "count_nonzero", "any", "all"})
_KEEPS_DATA = frozenset({"detach", "float", "double", "long", "int", "half", "contiguous", "squeeze", "squeeze_", "view",
                         "reshape", "flatten"})


def _read_back_root(facts, call: cst.Call) -> Optional[str]:
    """``y.cpu()``, ``y.detach().cpu().numpy()``, ``y[i].cpu()``, ``y.data.cpu()``, ``y.to("cpu")``:
    the name whose device data goes to the host; else None."""
    f = call.func
    if not isinstance(f, cst.Attribute):
        return None
    if f.attr.value == "to":
        if not (call.args and string_value(call.args[0].value) == "cpu"):
            return None
    elif f.attr.value not in _READ_BACK:
        return None
    e = f.value
    while True:
        q = (facts.qualname(e.func) or "") if isinstance(e, cst.Call) else ""
        if q.startswith("torch.") and q.rsplit(".", 1)[-1] in _REDUCTIONS and len(e.args) == 1:
            e = e.args[0].value  # `torch.sum(mask)`
        elif isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and (
                e.func.attr.value in _KEEPS_DATA or e.func.attr.value in _REDUCTIONS):
            e = e.func.value
        elif isinstance(e, cst.Attribute) and e.attr.value == "data":
            e = e.value
        elif isinstance(e, cst.Subscript):
            e = e.value
        else:
            break
    return e.value if isinstance(e, cst.Name) else None


_CASTS = frozenset({"float", "double", "half", "long", "int"})


def _wrapped(facts, e: cst.BaseExpression) -> cst.BaseExpression:
    """``Variable(x, volatile=True)`` (the legacy autograd wrapper) holds ``x``'s data: ``x``; so
    does a host cast on the way to the device (``x.float().cuda()``)."""
    if (isinstance(e, cst.Call) and e.args and e.args[0].keyword is None and not e.args[0].star
            and (facts.qualname(e.func) or "").endswith("autograd.Variable")):
        return e.args[0].value
    if (isinstance(e, cst.Call) and not e.args and isinstance(e.func, cst.Attribute)
            and e.func.attr.value in _CASTS and isinstance(e.func.value, cst.Name)):
        return e.func.value
    return e


def _each_moved(facts, e: cst.BaseExpression, items: set) -> Optional[cst.Call]:
    """``tuple(t.to(d) for t in batch)`` / ``[t.cuda() for t in batch]`` over a loader item:
    the move applied to each of its tensors."""
    if (isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and e.func.value in ("tuple", "list")
            and len(e.args) == 1):
        e = e.args[0].value
    if not (isinstance(e, (cst.GeneratorExp, cst.ListComp)) and isinstance(e.for_in, cst.CompFor)
            and e.for_in.inner_for_in is None and not e.for_in.ifs and isinstance(e.for_in.target, cst.Name)
            and isinstance(e.for_in.iter, cst.Name) and e.for_in.iter.value in items):
        return None
    elt = e.elt
    if (isinstance(elt, cst.Call) and is_move(facts, elt) and isinstance(elt.func.value, cst.Name)
            and elt.func.value.value == e.for_in.target.value):
        return elt
    return None


def each_iter(e: cst.BaseExpression) -> Optional[str]:
    """The name a ``tuple(... for t in batch)`` / ``[... for t in batch]`` runs over."""
    if isinstance(e, cst.Call) and e.args:
        e = e.args[0].value
    if isinstance(e, (cst.GeneratorExp, cst.ListComp)) and isinstance(e.for_in.iter, cst.Name):
        return e.for_in.iter.value
    return None


def _unpacked_items(small: cst.CSTNode, items: set) -> list:
    """``inputs, gts = data`` for a loader item ``data``: the names it unpacks into."""
    if (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Name)
            and small.value.value in items and isinstance(small.targets[0].target, (cst.Tuple, cst.List))):
        els = small.targets[0].target.elements
        if all(isinstance(el.value, cst.Name) for el in els):
            return [el.value.value for el in els]
    return []


def _moves_in_place_of(facts, small: cst.CSTNode, items: set, moved_batches: Optional[dict] = None):
    """``y = y.to(device)`` / ``x, y = x.cuda(), y.cuda()`` / ``y = Variable(y).cuda()`` for loader
    items: (name, move). ``moved_batches``: loader items rebound to their tensors each moved
    (``batch = tuple(t.to(d) for t in batch)``), and the names they are then unpacked into."""
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
        return
    target, value = small.targets[0].target, small.value
    if moved_batches is not None:
        each = _each_moved(facts, value, items)
        if isinstance(target, cst.Name) and each is not None and target.value == each_iter(value):
            moved_batches[target.value] = each
            return
        if (isinstance(value, cst.Name) and value.value in moved_batches
                and isinstance(target, (cst.Tuple, cst.List))
                and all(isinstance(el.value, cst.Name) for el in target.elements)):
            for el in target.elements:
                yield el.value.value, moved_batches[value.value]  # `x, y = batch`: device copies of its tensors
            return
    pairs = []
    if isinstance(target, cst.Name):
        pairs = [(target, value)]
    elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Tuple) \
            and len(target.elements) == len(value.elements):
        pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
    for t, v in pairs:
        if not (isinstance(t, cst.Name) and isinstance(v, cst.Call) and is_move(facts, v)):
            continue
        recv = _wrapped(facts, v.func.value)
        if isinstance(recv, cst.Name) and recv.value == t.value and t.value in items:
            yield t.value, v
        elif (isinstance(recv, cst.Subscript) and isinstance(recv.value, cst.Name) and recv.value.value in items
              and len(recv.slice) == 1 and isinstance(recv.slice[0].slice, cst.Index)
              and isinstance(recv.slice[0].slice.value, (cst.SimpleString, cst.Integer))):
            yield t.value, v  # `mask = batch["attention_mask"].to(d)`: the loader's host tensor stays in `batch`


def _bound_from_move(facts, root: cst.CSTNode, name: str) -> bool:
    """A statement of ``root`` binds ``name`` to a value with a move in it (``xs = xs.to(d)``,
    ``outs = [o.cuda() for o in outs]``): what it holds may already be on the device."""
    for st in statements(root.body if isinstance(root, cst.FunctionDef) else root):
        if isinstance(st, (cst.Assign, cst.AnnAssign)) and st.value is not None and any(
                name in names_in(t.target) for t in (st.targets if isinstance(st, cst.Assign) else [st])):
            if any(isinstance(n, cst.Call) and is_move(facts, n) for n in nodes(st.value)):
                return True
    return False


def _target_names(target: cst.BaseExpression) -> set:
    """The names a ``for`` target binds: ``x``, ``x, y``, ``i, (x, y)``."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for el in target.elements for n in _target_names(el.value)}
    return set()


def _changes(stmt: cst.CSTNode, name: str) -> bool:
    """``stmt`` rebinds ``name`` or changes it in place (``y[m] = 0``, ``y.clamp_(0)``, ``y += 1``)."""
    for n in nodes(stmt):
        if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else [n.target]
            for t in targets:
                base = t
                while isinstance(base, (cst.Subscript, cst.Attribute)):
                    base = base.value
                if any(isinstance(x, cst.Name) and x.value == name for x in nodes(t)) and (
                        isinstance(base, cst.Name) and base.value == name or isinstance(t, (cst.Tuple, cst.List))):
                    return True
        elif isinstance(n, (cst.For, cst.CompFor)) and name in {x.value for x in nodes(n.target) if isinstance(x, cst.Name)}:
            return True
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value.endswith("_") \
                and not n.func.attr.value.endswith("__"):
            base = n.func.value
            while isinstance(base, (cst.Subscript, cst.Attribute)):
                base = base.value
            if isinstance(base, cst.Name) and base.value == name:
                return True
    return False


def _list_element(sub: cst.Subscript, new: str) -> cst.BaseExpression:
    """``t[q, c]`` / ``t[i][0]`` read from ``t.tolist()`` bound to ``new``: ``new[q][c]``."""
    indices = []
    while isinstance(sub, cst.Subscript):
        indices = list(sub.slice) + indices
        sub = sub.value
    out: cst.BaseExpression = cst.Name(new)
    for e in indices:
        out = cst.Subscript(out, [cst.SubscriptElement(cst.Index(e.slice.value))])
    return out


_DTYPE_WORD = lazyre.compile(r"dtype|float|half|double|int\d*\b|long|bool|bfloat|complex")


def _needed_on_host(loop, names: list) -> bool:
    """One of ``names`` is read, every iteration, by the test that decides whether ``loop``
    stops (``if tok == eos: break`` in its body, or in a ``with`` / ``try`` there, a ``while``
    test; not a test inside another branch, such as a periodic ``if step % 100 == 0:``): the
    value has to reach the host every iteration."""
    if not names:
        return False
    wanted = set(names)
    stack = list(loop.body.body) if isinstance(loop.body, cst.IndentedBlock) else []
    while stack:
        st = stack.pop()
        if isinstance(st, cst.If) and _leaves(st.body) or isinstance(st, cst.While):
            if any(isinstance(x, cst.Name) and x.value in wanted for x in nodes(st.test)):
                return True
        elif isinstance(st, (cst.With, cst.Try)) and isinstance(st.body, cst.IndentedBlock):
            stack.extend(st.body.body)
    return False


def _leaves(body: cst.BaseSuite) -> bool:
    """The block stops the loop (``break`` / ``return`` among its statements)."""
    lines = body.body if isinstance(body, cst.IndentedBlock) else [body]
    return any(isinstance(small, (cst.Break, cst.Return)) for line in lines
               if isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) for small in line.body)


class LoopTransfer(Rule):
    """
    ## What it does
    Flags host<->device traffic repeated every iteration of a `for`/`while` loop that
    could be avoided: a round trip (a device value goes to the host with `.cpu()`,
    `.numpy()`, `.item()`, `.tolist()` or `.to("cpu")` and the result, computed from it by
    arithmetic, NumPy, `math`, builtins or torch functions that the device runs as well
    (`torch.multinomial(p.cpu(), 1).to(d)`), comes back to the device in the same iteration,
    e.g. `seen += m.sum().item()` into a device tensor); a loop-invariant tensor,
    defined outside the loop and never reassigned in it, moved every iteration
    (`class_weights.to(device)`; a module's `model.to(device)` is not: it moves in place,
    so from the second iteration on it copies nothing; but a module the iteration also moves
    elsewhere, `model.to(host)` ... `model.to(device)`, is reported once, at the move back,
    as a round trip of the whole module, with no hoisting fix; one rebound in the loop,
    `t5 = t5.cpu()`, is offloading to free memory and is not reported); a host tensor built from loop-invariant
    data every iteration only to be moved (`torch.tensor([0.2, 0.8]).cuda()`,
    `torch.Tensor([[0.1, 0.1, 0.2, 0.2]]).cuda()`); and host noise or labels drawn with NumPy
    through a tensor type alias (`Tensor = torch.cuda.FloatTensor if cuda else
    torch.FloatTensor`; `Tensor(np.random.normal(0, 1, (n, d)))`); and one element of a
    loop-invariant device tensor read per iteration of `for i in range(...)`
    (`k = ks[i].item()`, `ys[q, c].item()`, `ks` computed with torch in a loop that works on
    device values); a loop-invariant device tensor (or a row of it chosen outside the loop)
    copied to the host with `.cpu()` by a statement the loop runs every iteration (`gt[b].cpu()` in
    `for v in views:`, every binding of `gt` outside the loop a device value); and a loader's
    batch item moved to the device unchanged and copied back in the same iteration (`y = y.to(d)` ... `y.cpu().numpy()`: the host tensor was there;
    also `inputs, gts = data` then `gts = Variable(gts).cuda()`, and `batch = tuple(t.to(d)
    for t in batch)` then `x, y = batch`); the same for the loop's own item whatever it walks
    (`for data, target in test_loader:` with `test_loader` a parameter): nothing moves a tensor to
    the device it is already on, so what was moved was the host copy. Also when the move sits
    under an availability or GPU-switch guard (`if args.cuda: y = y.cuda()`), goes through an
    alias (`hr = val_hr`) or a host cast (`hr.float().cuda()`); not for the rows of a tensor the
    file knows, nor a list the function rebuilt from moves.
    A round trip is reported at both ends: where the value leaves the device and where
    it comes back. Not reported: moving the
    fresh batch (`x = x.to(device)`), work under a periodic or first-iteration branch
    (`if step % 100 == 0:`, `if i == 0:`), `.item()` after the loop or for logging, and a
    host value passed through a function devlint cannot see into (it may need the host).

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
    What hoisting saves is the per-iteration copy. Building on the device
    (`device=`) saves the host allocation and the copy only for factories that compute
    their values (`zeros`, `ones`, `full`, `empty`, `arange`, `eye`, `linspace`, `rand*`:
    DL007); `torch.tensor(data, device=d)` still builds on the host and copies, so DL003
    never suggests it.

    ## Fix safety
    Hoisting a loop-invariant move above the loop is safe when the moved name is a plain
    name that is not rebound, mutated in place or passed to a call in the loop, is not an
    `nn.Parameter` (an optimizer updates those every step), the moved copy is never changed
    in place nor passed to a call that might change it (a module call might: `inplace=True`
    layers), the move is a statement of the loop body itself (not inside an `if`), and its
    device is loop-invariant; otherwise the fix is unsafe. A hoisted `y = w.to(device)`
    keeps its name; an inline move gets a new name from what it holds or feeds (`w_dev`,
    `weight`, `boxes_scale`) that shadows nothing. A constant built inside a nested block
    is reported without a fix. Replacing a NumPy round trip by the torch op on the device
    (`np.clip` -> `torch.clamp`, `np.where`, `np.exp`, `np.argmax`, `np.maximum`... see
    `devlint/analysis/numpy_ops.py`) is unsafe: the result keeps torch's dtype promotion.
    `x.item()` added into a device tensor becomes `x.detach()` (unsafe: a 0-dim tensor can
    promote dtypes differently from a Python number). NumPy noise through a type alias
    becomes `torch.randn`/`torch.rand`/`torch.randint(..., device=...)` on the alias's
    device (unsafe: another random stream). `ks[i].item()` becomes `ks_list[i]` with
    `ks_list = ks.tolist()` above the loop, `ys[q, c].item()` becomes `ys_list[q][c]`
    (unsafe: the same values only when the indices name one element).
    A one-element tensor built on the host from a number read with `.item()`
    (`torch.LongTensor([[v]]).to(d)`, `torch.tensor([[v]], device=d)`, a decoding step's next
    input) becomes `torch.full((1, 1), v, device=d)` (safe: the same dtype and values, no
    host tensor and no copy). A one-hot built in NumPy from labels read back
    (`torch.from_numpy(np.eye(c)[y.cpu().numpy()]).float().to(d)`) becomes
    `torch.nn.functional.one_hot(y, c).float()` (unsafe: `one_hot` wants int64 labels in
    range; NumPy indexing takes any integer).
    Other round trips, and the outbound half of every round trip, are reported without a fix.
    """

    code = "DL003"
    # name, summary, default and prefilter: devlint/catalogue.py

    VALID = [
        # copied back every iteration, but it changes in the loop, or lives on the host, or the row does
        "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "def f(xs):\n    acc = torch.zeros(3, device=device)\n"
        "    for x in xs:\n        acc += x\n        print(acc.cpu())\n",
        "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "def f(xs):\n    y = torch.ones(2).to(device)\n"
        "    for x in xs:\n        y = y * x\n        print(y.cpu())\n",
        "import torch\ndef f(xs):\n    h = torch.ones(2)\n    for x in xs:\n        print(h.cpu(), x)\n",
        # ... copied under a condition: on some iterations only
        "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "def f(xs):\n    t = torch.ones(2).to(device)\n    for x in xs:\n        if x > 3:\n            print(t.cpu())\n",
        # a leaf the optimizer updates in place every step
        "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "def fit(n):\n    w = torch.zeros(3, device=device, requires_grad=True)\n    opt = torch.optim.SGD([w], lr=0.1)\n"
        "    for _ in range(n):\n        (w - 1).pow(2).sum().backward()\n        opt.step()\n        print(w.detach().cpu())\n",
        "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "def f():\n    t = torch.ones(5, 2).to(device)\n"
        "    for i in range(5):\n        print(t[i].cpu())\n",
        "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "def f(xs):\n    t = torch.ones(5, 2).to(device)\n"
        "    for x in xs:\n        t.mul_(x)\n        print(t.cpu())\n",
        # the labels are changed on the device before they are read back: no host copy holds that
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\ndevice = torch.device('cpu')\n"
        "loader = DataLoader(TensorDataset(torch.ones(4, 2), torch.zeros(4)), batch_size=2)\n"
        "for x, y in loader:\n    y = y.to(device)\n    y[y == 255] = 0\n    print(y.cpu().numpy())\n",
        # the moved batch's labels are changed on the device before they are read back
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\ndevice = torch.device('cpu')\n"
        "loader = DataLoader(TensorDataset(torch.ones(4, 2), torch.zeros(4)), batch_size=2)\n"
        "for batch in loader:\n    batch = [t.to(device) for t in batch]\n    x, y = batch\n    y = y - 1\n"
        "    print(y.cpu().numpy())\n",
        # only some tensors moved (a comprehension with a condition): no claim on what `y` is
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\ndevice = torch.device('cpu')\n"
        "loader = DataLoader(TensorDataset(torch.ones(4, 2), torch.zeros(4)), batch_size=2)\n"
        "for batch in loader:\n    batch = [t.to(device) for t in batch if t.dim() > 1]\n    x = batch\n"
        "    print(x[0].cpu())\n",
        # read back on chosen iterations only (`i in sample_ids`)
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\ndevice = torch.device('cpu')\n"
        "loader = DataLoader(TensorDataset(torch.ones(4, 2)), batch_size=2)\nshown = {0}\n"
        "for i, (x,) in enumerate(loader):\n    x = x.to(device)\n    if i in shown:\n        print(x.cpu())\n",
        # elements of a NumPy array: `.item()` of an array element copies nothing from a device
        "import numpy as np\nimport torch\ndevice = torch.device('cpu')\nx = torch.ones(2).to(device)\n"
        "boxes = np.zeros((3, 2))\nfor i in range(3):\n    y = x * boxes[i][0].item()\n",
        # elements of a tensor built from host data: no copy per element
        "import torch\ndevice = torch.device('cpu')\nks = torch.tensor([1, 2, 3])\n"
        "out = torch.zeros(3, 4, device=device)\nfor i in range(3):\n    out[i, : ks[i].item()] = 1\n",
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
        # work under a periodic or first-iteration branch does not run every iteration
        "import torch\ndevice = torch.device('cpu')\nw = torch.ones(2)\nfor step in range(300):\n"
        "    if step % 100 == 0:\n        print(w.to(device).sum())\n    if step == 0:\n        print(w.to(device))\n",
        "import torch\ndevice = torch.device('cpu')\nlog_every = 10\nfor i, x in enumerate([torch.ones(2)]):\n"
        "    h = x.to(device) * 2\n    if i % log_every == 0:\n        v = h.sum().item()\n"
        "        hist = torch.tensor([v], device=device)\n",
        # the host value goes through a function devlint cannot see into (an RPC, a C extension)
        "import torch\nt1 = torch.ones(2, device='cuda:0')\nt2 = torch.rand(2)\nfor _ in range(3):\n"
        "    t3 = t2 + 1\n    t4 = t3.cuda(0) + t1\n"
        "    t5 = run_remote(torch.add, t4.cpu(), t1)\n    t6 = t5.cuda(0) + t4\n",
        # a tensor parked on the host to save device memory, no host computation; a cast in place
        "import torch\ndevice = torch.device('cpu')\nw = torch.ones(2).to(device)\nfor i in range(3):\n"
        "    w = w.to('cpu')\n    z = torch.index_select(w.to(device), 0, torch.tensor([0]))\n    w = w.to(device)\n"
        "    y = w.to(device=w.device, dtype=torch.float64)\n",
        # `.item()` summed into a Python number: not sent back to the device (DL008's business)
        "import torch\ndevice = torch.device('cpu')\nseen = 0\nfor x in [torch.ones(3)]:\n"
        "    m = x.to(device) > 0\n    seen += m.sum().item()\n",
        # a tensor type alias that allocates on the device; host data that has to travel
        "import numpy as np\nimport torch\ncuda = torch.cuda.is_available()\n"
        "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\nfor batch in [[1.0, 2.0]]:\n    valid = Tensor(4, 1).fill_(1.0)\n    x = Tensor(np.array(batch))\n",
        # a Module moves in place: from the second iteration on `model.to(device)` copies nothing
        # (an H100 counted the same copies with the move inside the loop as hoisted out of it)
        "import torch\nfrom torch import nn\ndevice = torch.device('cpu')\nmodel = nn.Linear(2, 2)\n"
        "for i in range(3):\n    model.to(device)\n    y = model(torch.ones(2))\n",
        # ... also beside a cast to the dtype it already has
        "import torch\nfrom torch import nn\ndef run(n, x, device):\n    model = nn.Linear(4, 2)\n"
        "    for _ in range(n):\n        model.to(device)\n        model.to(torch.float32)\n"
        "        print(model(x.to(device)))\n",
        # offloading models between steps to free GPU memory: moved in place, no value comes back
        "import torch\nfrom models import denoise, load_ae, load_t5\n"
        "def main(prompts, device, offload):\n    t5, ae = load_t5(device), load_ae(device)\n"
        "    for p in prompts:\n        if offload:\n            t5, ae = t5.to(device), ae.to(device)\n"
        "        x = t5(p)\n        if offload:\n            t5, ae = t5.cpu(), ae.cpu()\n"
        "            torch.cuda.empty_cache()\n        x = denoise(x)\n        if offload:\n"
        "            ae.decoder.to(x.device)\n        print(ae.decode(x))\n",
        # ... but not the rows of a tensor the function moved to the device, nor items of a list
        # it rebuilt from moves: they may be there already, and the copy back is the only one
        "import torch\ndef f(x, device):\n    x = x.to(device)\n    for row in x:\n"
        "        row = row.to(device)\n        print(row.cpu())\n",
        "import torch\ndef g(outs):\n    outs = [o.cuda() for o in outs]\n    for o in outs:\n"
        "        o = o.cuda()\n        print(o.cpu())\n",
    ]
    INVALID = [
        # a loop-invariant device tensor (one row of it, chosen outside the loop) copied back every iteration
        Invalid("import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                "def plot(views):\n    gt = torch.randn(4, 3).to(device)\n"
                "    for b in range(4):\n        for v in views:\n            print(gt[b].cpu().numpy(), v)\n"),
        # a module moved away and back every iteration: the move back is a round trip, not an invariant
        # move (no hoisting fix: the module leaves the device again in the next iteration)
        Invalid("import torch\nfrom torch import nn\ndef run(swa, opt, x, device, host, n):\n"
                "    model = nn.Linear(4, 2).to(device)\n"
                "    for _ in range(n):\n        model(x).sum().backward()\n        opt.step()\n        model.to(host)\n"
                "        swa.load_state_dict(model.state_dict())\n        model.to(device)\n"),
        # one element of a device tensor read per iteration
        Invalid(
            "import torch\ndevice = torch.device('cpu')\nks = torch.ones(3, device=device).int()\n"
            "out = torch.zeros(3, 4, device=device)\nfor i in range(3):\n    out[i, : ks[i].item()] = 1\n",
            "import torch\ndevice = torch.device('cpu')\nks = torch.ones(3, device=device).int()\n"
            "out = torch.zeros(3, 4, device=device)\nks_list = ks.tolist()\nfor i in range(3):\n    out[i, : ks_list[i]] = 1\n",
            unsafe=True,
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
        # under an `if`: no fix (`torch.tensor(data, device=d)` builds on the host and copies too)
        Invalid("import torch\ndevice = torch.device('cpu')\nfor i in range(3):\n    if i:\n"
                "        print(torch.tensor([1.0, 2.0]).to(device))\n"),
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
        # `.item()` added back into a device tensor every step
        Invalid(
            "import torch\ndevice = torch.device('cpu')\nseen = torch.zeros((), device=device)\n"
            "for x in [torch.ones(3)]:\n    m = x.to(device) > 0\n    seen += m.sum().item()\n",
            "import torch\ndevice = torch.device('cpu')\nseen = torch.zeros((), device=device)\n"
            "for x in [torch.ones(3)]:\n    m = x.to(device) > 0\n    seen += m.sum().detach()\n",
            unsafe=True,
        ),
        Invalid("import torch\ndevice = torch.device('cpu')\nacc = torch.zeros(2).to(device)\nfor i in range(3):\n"
                "    h = torch.randn(2).to(device)\n    v = h.abs().max().item()\n    acc += h / v\n"),
        # host noise rebuilt every iteration through a tensor type alias
        Invalid(
            "import numpy as np\nimport torch\ncuda = torch.cuda.is_available()\n"
            "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\nfor i in range(3):\n"
            "    z = Tensor(np.random.normal(0, 1, (4, 2)))\n",
            "import numpy as np\nimport torch\ncuda = torch.cuda.is_available()\n"
            "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\nfor i in range(3):\n"
            "    z = torch.randn((4, 2), device=\"cuda\" if cuda else \"cpu\")\n",
            unsafe=True,
        ),
        # a constant rebuilt per item: hoisted under a name saying what it holds
        Invalid(
            "import torch\nfor i in range(3):\n    boxes = torch.ones(1, 4).cuda() * torch.Tensor([[0.1, 0.1, 0.2, 0.2]]).cuda()\n",
            "import torch\nboxes_scale = torch.Tensor([[0.1, 0.1, 0.2, 0.2]]).cuda()\nfor i in range(3):\n"
            "    boxes = torch.ones(1, 4).cuda() * boxes_scale\n",
        ),
        # the loop's own items, moved to the device in place, then copied back: whatever the
        # iterable is, nothing moves a tensor to the device it is already on
        Invalid(
            "import torch\ndef test(model, test_loader, metric):\n    for data, target in test_loader:\n"
            "        data = data.cuda(non_blocking=True)\n        target = target.cuda(non_blocking=True)\n"
            "        out = model(data)\n        metric(out.cpu().numpy(), target.cpu().numpy())\n",
        ),
        # ... also moved only when CUDA is there (then it is copied back), through an alias and a cast
        Invalid(
            "import torch\ndef val(net, val_bar, out):\n    for val_lr, val_hr in val_bar:\n        lr, hr = val_lr, val_hr\n"
            "        hr = val_hr\n        if torch.cuda.is_available():\n            lr = lr.cuda()\n"
            "            hr = hr.float().cuda()\n        sr = net(lr)\n        out.append((hr.data.cpu(), sr.data.cpu()))\n",
        ),
        # a loader's labels moved to the device unchanged, then copied back for the metrics
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\ndevice = torch.device('cpu')\n"
            "loader = DataLoader(TensorDataset(torch.ones(4, 2), torch.zeros(4)), batch_size=2)\n"
            "for x, y in loader:\n    x = x.to(device)\n    y = y.to(device)\n    print(x.sum(), y.cpu().numpy())\n",
        ),
        # a batch unpacked from the loader's item, moved through the legacy `Variable`, read back
        Invalid(
            "import torch\nfrom torch.autograd import Variable\nfrom torch.utils.data import DataLoader, TensorDataset\n"
            "loader = DataLoader(TensorDataset(torch.ones(4, 2), torch.zeros(4)), batch_size=2)\n"
            "for i, data in enumerate(loader):\n    inputs, gts = data\n    inputs = Variable(inputs).cuda()\n"
            "    gts = Variable(gts).cuda()\n    print(inputs.sum(), gts.data.cpu().numpy())\n",
        ),
        # every tensor of the batch moved, then unpacked: the labels are copied back for the metrics
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\ndevice = torch.device('cpu')\n"
            "loader = DataLoader(TensorDataset(torch.ones(4, 2), torch.zeros(4)), batch_size=2)\n"
            "labels = []\nfor step, batch in enumerate(loader):\n    batch = tuple(t.to(device) for t in batch)\n"
            "    x, y = batch\n    print(x.sum())\n    labels.append(y.detach().cpu().numpy())\n",
        ),
        # ... also through a progress bar bound to a name first
        Invalid(
            "import torch\nfrom tqdm import tqdm\nfrom torch.utils.data import DataLoader, TensorDataset\n"
            "def evaluate(ds, device):\n    bar = tqdm(DataLoader(ds, batch_size=2))\n    for step, batch in enumerate(bar):\n"
            "        batch = tuple(t.to(device) for t in batch)\n        x, y = batch\n"
            "        print(x.sum(), y.cpu().numpy())\n",
        ),
        # a dict batch's mask moved under a new name, then summed back every step
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\ndef train(model, ds, device):\n"
            "    for batch in DataLoader(ds, batch_size=4):\n        mask = batch['mask'].to(device)\n"
            "        model(mask).sum().backward()\n        print(torch.sum(mask).item())\n",
        ),
        # a torch function run on the host copy, its result sent back: the device has the op
        Invalid(
            "import torch\ndevice = torch.device('cpu')\nx = torch.randn(4, 5).to(device)\nfor t in range(3):\n"
            "    logits = torch.tanh(x.to(device))\n    probs = torch.softmax(logits, 1).cpu()\n"
            "    it = torch.multinomial(probs, 1).to(logits.device)\n    x = x + it\n",
        ),
        # elements of a 2-D device tensor read one by one in a nested loop
        Invalid(
            "import torch\ndevice = torch.device('cpu')\nlogits = torch.randn(3, 4).to(device)\n"
            "ys, ix = torch.sort(logits, 1, True)\nmask = torch.zeros(3, 4, device=device)\nfor c in range(4):\n"
            "    for q in range(3):\n        if ys[q, c].item() > 0:\n            mask[q, c] = 1\n",
            "import torch\ndevice = torch.device('cpu')\nlogits = torch.randn(3, 4).to(device)\n"
            "ys, ix = torch.sort(logits, 1, True)\nmask = torch.zeros(3, 4, device=device)\nfor c in range(4):\n"
            "    ys_list = ys.tolist()\n    for q in range(3):\n        if ys_list[q][c] > 0:\n            mask[q, c] = 1\n",
            unsafe=True,
        ),
        # NumPy round trips where torch has the op
        Invalid(
            "import numpy as np\nimport torch\ndevice = torch.device('cpu')\nfor i in range(3):\n"
            "    out = torch.randn(2, 3).to(device)\n    pred = torch.tensor(np.argmax(out.cpu().numpy(), 1), device=device)\n"
            "    e = torch.from_numpy(np.exp(out.detach().cpu().numpy())).to(device)\n",
            "import numpy as np\nimport torch\ndevice = torch.device('cpu')\nfor i in range(3):\n"
            "    out = torch.randn(2, 3).to(device)\n    pred = torch.argmax(out, 1)\n"
            "    e = torch.exp(out.detach())\n",
            unsafe=True,
        ),
    ]

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._reported: set = set()
        self._new_names: set = set()
        # ids of the loops holding a call that can move data to a device or read it back
        # (`.to`, `.cuda`, `torch.tensor(...)`, `.item()`, a tensor type alias): only those
        # are analysed (most loops hold none)
        self._moving_loops: set = set()
        self._reading_loops: set = set()  # ids of the loops holding a `.cpu()` (and no move)
        self._type_aliases: Optional[dict] = None
        self._inferred: set = set()  # moves whose receiver is a tensor by what the moved copy is used for

    def _aliases(self) -> dict:
        if self._type_aliases is None:
            self._type_aliases = tensor_type_aliases(self.facts, self.ctx.module) \
                if b"torch.cuda." in self.facts.source else {}
        return self._type_aliases

    def visit_Call(self, node: cst.Call) -> None:
        if not self.t.loops:
            return
        f = node.func
        if isinstance(f, cst.Attribute):
            moving = f.attr.value in MOVE_METHODS or f.attr.value in BUILDERS or f.attr.value == "item"
        else:  # `tensor(...)` imported from torch, under any name; `Tensor(...)` a type alias
            moving = isinstance(f, cst.Name) and (
                (self.facts.qualname(f) or "").rsplit(".", 1)[-1] in BUILDERS or f.value in self._aliases())
        if moving:
            self._moving_loops.update(map(id, self.t.loops))
        elif isinstance(f, cst.Attribute) and f.attr.value == "cpu":
            self._reading_loops.update(map(id, self.t.loops))  # (only the invariant read-back is asked of these)

    def leave_For(self, node: cst.For) -> None:
        self._loop(node)

    def leave_While(self, node: cst.While) -> None:
        self._loop(node)

    def _loop(self, loop) -> None:
        if id(loop) not in self._moving_loops:
            if id(loop) in self._reading_loops:
                bound_list, mutated = loop_bindings(loop)
                self._invariant_reads(loop, set(bound_list), mutated, occasional_nodes(loop))
            return
        skip = occasional_nodes(loop)  # `if step % 100 == 0:` runs on some iterations only
        bound_list, mutated = loop_bindings(loop)
        self._invariant_reads(loop, set(bound_list), mutated, skip)
        self._round_trips(loop, skip)
        if isinstance(loop, cst.For):
            self._copied_back(loop, skip)
        self._invariant_moves(loop, set(bound_list), bound_list, mutated, skip)
        self._element_reads(loop, set(bound_list), mutated, skip)
        self._alias_draws(loop, skip)

    # ---- invariant moves and invariant host builds -------------------------------------
    def _invariant_moves(self, loop, bound, bound_list, mutated, skip) -> None:
        scope, cls = self.t.scope, self.t.cls
        groups: dict = {}
        # `model.to(swa_device)` ... `model.to(device)` in one body: the placement changes within
        # every iteration (moved out and back), so neither move is loop-invariant
        targets: dict = {}
        for n in nodes(loop.body):
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name) \
                    and n.func.attr.value in ("to", "cuda", "cpu") and n not in skip:
                where = ",".join(self.ctx.module.code_for_node(a.value) for a in n.args if a.keyword is None)
                if not _DTYPE_WORD.search(where):  # `w.to(torch.float16)` changes no placement
                    targets.setdefault(n.func.value.value, set()).add(n.func.attr.value + ":" + where)
        shuttled = {name for name, ts in targets.items() if len(ts) > 1}
        back: dict = {}  # shuttled module -> its last move to the device in the body
        for n in nodes(loop.body):
            if n in skip or not is_move(self.facts, n):
                continue
            recv = n.func.value
            if isinstance(recv, cst.Name) and recv.value in shuttled:
                back[recv.value] = n  # (an inner loop may have reported it already)
                continue
            if n in self._reported:
                continue
            dev = device_target(self.facts, n)
            if names_in(dev) & bound or (n.args and any(names_in(a.value) & bound for a in n.args)):
                continue
            kind = None
            built = False
            if isinstance(recv, cst.Name):
                if recv.value in bound or recv.value in mutated:
                    continue
                kind = self.facts.kind_of(recv, scope, cls)
                if kind is None and self._moved_into_tensor(loop, n, scope, cls):
                    kind = TENSOR  # `w = class_weights.to(device)`, `w` a loss's weights: a tensor
                    self._inferred.add(n)
                if kind not in (TENSOR, PARAM):
                    # a Module's `.to()` moves it in place: from the second iteration on it is
                    # already there and the call copies nothing (measured on an H100: the same
                    # memcpy count with the move in the loop or hoisted out of it)
                    continue
            elif isinstance(recv, cst.Call) and invariant_build(self.facts, recv, bound):
                built = True
            else:
                continue
            groups.setdefault(self.ctx.module.code_for_node(n), []).append((n, recv, kind, built))
        for items in groups.values():
            self._report_invariant(loop, items, bound_list)
        for name, n in back.items():
            # (a module rebound in the loop, `t5 = t5.cpu()` to free GPU memory, is offloading by design)
            if name not in bound and name not in mutated and n not in self._reported \
                    and self.facts.kind_of(cst.Name(name), scope, cls) == MODULE:
                # moved away and back every iteration: the move back is the avoidable copy (no
                # hoisting fix: the module leaves the device again in the next iteration)
                self._reported.add(n)
                self.report(n, f"`{self.ctx.module.code_for_node(n)}` moves `{name}` back to the device every "
                               "iteration after the loop moved it elsewhere: a round trip of the whole module "
                               "(copy what the other side needs, such as its state_dict, instead)")

    def _report_invariant(self, loop, items, bound_list) -> None:
        node, recv, kind, built = items[0]
        body = loop.body
        text = self.ctx.module.code_for_node(node)
        if built:
            what = f"`{text}` builds a host tensor from loop-invariant data and moves it every iteration"
        elif kind == MODULE:
            what = f"`{text}` moves a module that does not change in the loop every iteration"
        else:
            what = f"`{text}` moves a loop-invariant tensor to the device every iteration"
        for n, *_ in items:
            self._reported.add(n)
        stmts = [direct_statement(loop, n) for n, *_ in items]
        reasons = ["an nn.Parameter changes every optimizer step" if kind == PARAM else None,
                   f"`{self.ctx.module.code_for_node(recv)}` may be an nn.Parameter, which changes every optimizer step"
                   if node in self._inferred else None]
        if isinstance(recv, cst.Name):
            reasons.append(reuse_hazard(body, recv.value, kind == MODULE, [i[0] for i in items]))
        st = stmts[0] if len(items) == 1 else None
        small = st.body[0] if st is not None else None
        _, mutated = bindings(body)
        fix = None
        if kind == MODULE:
            if st is not None and isinstance(small, cst.Expr) and small.value is node:
                fix = self._fix(loop, [st], {}, "hoist the move above the loop", reasons)
        elif (st is not None and isinstance(small, cst.Assign) and small.value is node
              and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
            y = small.targets[0].target.value
            if bound_list.count(y) != 1 or self._binding_count(y) != 1:
                reasons.append(f"`{y}` is bound elsewhere too")
            if y in mutated:
                reasons.append(f"`{y}` is changed in place in the loop")
            reasons.append(self._escapes(body, lambda v: isinstance(v, cst.Name) and v.value == y))
            fix = self._fix(loop, [st], {}, "hoist the move above the loop", reasons)
        elif all(s is not None for s in stmts):
            new = self._new_name(hoisted_name(loop, node, recv, built))
            moved = {id(n) for n, *_ in items}
            reasons.append(self._escapes(body, lambda v: id(v) in moved))
            aliases = bound_from(body, moved)  # `y = <move>`: an alias of the hoisted tensor must not change
            if aliases & mutated:
                reasons.append(f"`{sorted(aliases & mutated)[0]}` is changed in place in the loop")
            reasons.append(self._escapes(body, lambda v: isinstance(v, cst.Name) and v.value in aliases))
            assign = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(new))], node)])
            fix = self._fix(loop, [], {n: cst.Name(new) for n, *_ in items},
                            f"move once above the loop as `{new}`", reasons, assign)
        # inside an `if`/`with`/`try` block: reported without a fix (hoisting would build it even
        # on iterations that never take the branch; `torch.tensor(data, device=d)` would still
        # build on the host and copy, so it saves nothing)
        for n, *_ in items:
            self.report(n, what, fix)

    def _moved_into_tensor(self, loop, move: cst.Call, scope, cls) -> bool:
        """``y = x.to(device)``, a statement of the loop's own body, with ``y`` used as a tensor."""
        st = direct_statement(loop, move)
        small = st.body[0] if st is not None else None
        return (isinstance(small, cst.Assign) and small.value is move and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)
                and self.facts.kind_of(small.targets[0].target, scope, cls) == TENSOR)

    def _new_name(self, base: str) -> str:
        used = self.facts.bound_names | set(self.facts.aliases) | self._new_names
        name, i = base, 2
        while name in used:
            name, i = f"{base}{i}", i + 1
        self._new_names.add(name)
        return name

    def _escapes(self, body, match) -> Optional[str]:
        return escapes(self.facts, self.ctx.module.code_for_node, body, match)

    def _binding_count(self, name: str) -> int:
        scope = self.t.scope
        return bindings(scope.body if scope is not None else self.ctx.module)[0].count(name)

    def _fix(self, loop, moved, inline, msg, reasons, new_stmt=None) -> Fix:
        reasons = [r for r in reasons if r]
        if reasons:
            msg += f" (unsafe: {reasons[0]})"
        applic = Applicability.UNSAFE if reasons else Applicability.SAFE
        return Fix(applic, msg, {loop: hoist(loop, moved, inline, new_stmt)})

    # ---- a loop-invariant device tensor copied to the host every iteration -------------------
    def _invariant_reads(self, loop, bound, mutated, skip) -> None:
        """``keypoints[b].cpu()`` in a loop that neither rebinds nor changes ``keypoints`` (nor ``b``),
        where every binding of ``keypoints`` outside the loop puts a device value in it: the same
        data crosses to the host every iteration; one copy before the loop does."""
        scope = self.t.scope
        root = scope.body if scope is not None else self.ctx.module
        # (only the simple statements the loop runs every iteration: not under an `if`, a `try`,
        # a `with` or an inner loop, which may run it on some iterations only)
        lines = [st for st in loop.body.body if type(st) is cst.SimpleStatementLine] \
            if isinstance(loop.body, cst.IndentedBlock) else []
        for n in (x for st in lines for x in nodes(st)):
            if type(n) is not cst.Call or n.args or n in skip or n in self._reported:
                continue
            f = n.func
            if type(f) is not cst.Attribute or f.attr.value != "cpu":
                continue
            base, index_names = _read_base(f.value)
            if base is None or base in bound or base in mutated or index_names & bound:
                continue
            if not placed_on_device(self.facts, root, base, loop) or self._trained(root, base, scope):
                continue
            self._reported.add(n)
            text = self.ctx.module.code_for_node(f.value)
            self.report(n, f"`{text}.cpu()` copies the loop-invariant device tensor `{base}` to the host every "
                           f"iteration (it does not change in the loop): copy it once before the loop")

    def _trained(self, root, name: str, scope) -> bool:
        """``name`` may be a leaf an optimizer updates in place (``opt.step()`` changes it without
        any binding): a parameter, a tensor built with ``requires_grad=True`` or given
        ``.requires_grad_()``, or one handed to a ``torch.optim`` optimizer."""
        if self.facts.kind_of(cst.Name(name), scope, self.t.cls) == PARAM:
            return True
        for n in nodes(root, into_scopes=True):
            if type(n) is cst.Arg and n.keyword is not None and n.keyword.value == "requires_grad":
                return True  # (anywhere in the scope: conservative)
            if type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value == "requires_grad_":
                return True
            if type(n) is cst.Call and (self.facts.qualname(n.func) or "").startswith("torch.optim.") \
                    and name in names_in(n):
                return True
        return False

    # ---- one element of a loop-invariant device tensor read per iteration ---------------------
    def _element_reads(self, loop, bound, mutated, skip) -> None:
        scope, cls = self.t.scope, self.t.cls
        root = scope.body if scope is not None else self.ctx.module
        reads = [r for r in element_reads(self.facts, loop, bound, mutated) if r[0] not in self._reported
                 and r[0] not in skip and self.facts.kind_of(cst.Name(r[1]), scope, cls) in (TENSOR, None)]
        if not reads or not works_on_device(self.facts, root, loop):
            return
        by_name: dict = {}
        for call, t, i in reads:
            by_name.setdefault(t, []).append((call, i))
        for t, items in by_name.items():
            if not computed_tensor(self.facts, root, t, loop, scope, cls):
                continue  # built from host data, or read back already: no transfer per element
            new = self._new_name(f"{t}_list")
            inline = {call: _list_element(call.func.value, new) for call, i in items}
            assign = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(new))],
                                                         method_call(cst.Name(t), "tolist"))])
            first = self.ctx.module.code_for_node(items[0][0].func.value)
            reasons = [f"`{first}` must be one element of `{t}` (as many indices as it has dimensions)",
                       self._escapes(loop.body, lambda v: isinstance(v, cst.Name) and v.value == t)]
            fix = self._fix(loop, [], inline, f"read `{t}` once with `{new} = {t}.tolist()` above the loop", reasons,
                            assign)
            for call, i in items:
                self._reported.add(call)
                self.report(call, f"`{self.ctx.module.code_for_node(call.func.value)}.item()` copies one element of the "
                                  f"device tensor `{t}` to the host "
                                  f"every iteration (a synchronising copy each); read it once with `{t}.tolist()` "
                                  "before the loop", fix)

    # ---- a batch item moved to the device and read back unchanged --------------------------
    def _copied_back(self, loop: cst.For, skip) -> None:
        """``for x, y in loader: y = y.to(d) ... y.cpu().numpy()``: the host tensor the loader gave
        was dropped by the move and is copied back, unchanged, every iteration."""
        if not isinstance(loop.body, cst.IndentedBlock):
            return
        items = set(self.facts.loader_items(loop, self.t.scope, self.t.cls))
        loader = bool(items)
        if not loader:
            # no evidence of a DataLoader: the loop's own items, moved to the device in place,
            # were host data all the same (nothing moves a tensor to the device it is already on),
            # unless the loop walks a tensor the file knows (its rows may already be on the device)
            scope, cls = self.t.scope, self.t.cls
            it = loop.iter
            if (self.facts.kind_of(it, scope, cls) in (TENSOR, PARAM)
                    or self.facts.placement_of(it, scope, cls)[0] is not None
                    or (isinstance(it, cst.Name) and _bound_from_move(
                        self.facts, scope if scope is not None else self.ctx.module, it.value))):
                return
            items = _target_names(loop.target)
            if not items:
                return
        moved: dict = {}  # name -> its move
        moved_batches: dict = {}  # loader item -> the move applied to each of its tensors
        for st in loop.body.body:
            if moved:
                for n in nodes(st):
                    if n in skip or n in self._reported or not isinstance(n, cst.Call):
                        continue
                    root = _read_back_root(self.facts, n)
                    if root is not None and root in moved:
                        self._reported.add(n)
                        recv = _wrapped(self.facts, moved[root].func.value)
                        keep = (f"read the loader's host tensor `{self.ctx.module.code_for_node(recv)}` instead"
                                if isinstance(recv, cst.Subscript) else
                                f"keep the host tensor (`{root}_host = {root}` before the move) and read that"
                                if isinstance(recv, cst.Name) and recv.value == root else
                                "keep the loader's host batch and read that")
                        where = "a host tensor from the loader" if loader else "this iteration's host item"
                        self.report(n, f"`{root}` was {where}, moved to the device unchanged "
                                       f"this iteration; `{short(self.ctx.module.code_for_node(n), 40)}` copies it "
                                       f"back every iteration (a synchronising copy): {keep}")
                for name in list(moved):
                    if _changes(st, name):
                        del moved[name]
            for name in list(moved_batches):
                if _changes(st, name):
                    del moved_batches[name]
            lines = [st] if isinstance(st, cst.SimpleStatementLine) else []
            if (isinstance(st, cst.If) and st.orelse is None and isinstance(st.body, cst.IndentedBlock)
                    and self.facts.guard_polarity(st.test) == 1):
                # `if torch.cuda.is_available(): x = x.cuda()`: with CUDA, the move happens
                lines = [b for b in st.body.body if isinstance(b, cst.SimpleStatementLine)]
            for line in lines:
                for small in line.body:
                    items |= set(_unpacked_items(small, items))  # `inputs, gts = data`
                    if (isinstance(small, cst.Assign) and len(small.targets) == 1
                            and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, cst.Name)
                            and small.value.value in items):
                        items.add(small.targets[0].target.value)  # `hr = val_hr`: the same host tensor
                    for name, move in _moves_in_place_of(self.facts, small, items, moved_batches):
                        moved[name] = move

    # ---- round trips ------------------------------------------------------------------------
    def _round_trips(self, loop, skip) -> None:
        scope, cls = self.t.scope, self.t.cls
        flow = IterationFlow(self.facts, lambda f: self.facts.kind_of(f, scope, cls) == MODULE, loop.body)
        root = scope.body if scope is not None else self.ctx.module
        for st in simple_statements(loop.body):
            if st in skip:
                continue
            for small in st.body:
                for n in nodes(small):  # data coming back to the device
                    if isinstance(small, cst.Expr) and small.value is n:
                        continue  # `ae.decoder.to(x.device)` as a statement: a module moved in place
                    if n not in self._reported and flow.returning_host(n):
                        self._reported.add(n)
                        fix = numpy_round_trip_fix(self.facts, n, flow.on_device) \
                            or one_hot_fix(self.facts, n, flow.on_device)
                        one = scalar_payload(self.facts, n, flow.scalars) if fix is None else None
                        if one is not None:
                            fix = scalar_fill_fix(self.facts, n, one)
                        self.report(n, "device value goes to the host and comes back to the device every "
                                       "iteration; keep the computation on the device", fix)
                        self._outbound(n, flow, loop)
                if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name) and any(
                        n in flow.scalars or n == "item" for n in names_in(small.value)) and (
                        small.target.value in flow.device
                        or placed_on_device(self.facts, root, small.target.value, loop)):
                    self._item_back(loop, small, flow)
                flow.step(small)

    def _outbound(self, back: cst.Call, flow: IterationFlow, loop) -> None:
        """The device->host reads whose values ``back`` sends to the device again: the first
        half of the round trip, reported where the copy starts (no fix of its own: the rewrite,
        when there is one, is the return half's). Not a read whose value the loop needs on the
        host anyway: a greedy decoder's ``tok = logits.argmax().item()`` that decides its
        ``break`` or is printed (only the way back is the waste there)."""
        payload = returning_payload(self.facts, back)
        if payload is None:
            return
        sent = short(self.ctx.module.code_for_node(back))
        for out in flow.sources_in(payload):
            if out in self._reported or any(out is r for r in nodes(back)):
                continue
            if _needed_on_host(loop, [k for k, v in flow.scalars.items() if v is out]
                               + [k for k, v in flow.origins.items() if out in v]):
                continue
            self._reported.add(out)
            self.report(out, f"`{short(self.ctx.module.code_for_node(out))}` copies a device value to the host "
                             f"every iteration, and `{sent}` sends what is computed from it back; keep the "
                             "computation on the device")

    def _item_back(self, loop, small: cst.AugAssign, flow: IterationFlow) -> None:
        """``seen += m.sum().item()`` into a device tensor: read to the host and sent back."""
        for n in nodes(small.value):
            item = None
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "item" \
                    and flow.source(n) and arith_path(small.value, n):
                item = n
            elif isinstance(n, cst.Name) and n.value in flow.scalars and count_name(loop.body, n.value) == 2 \
                    and arith_path(small.value, n):
                item = flow.scalars[n.value]  # `v = x.item()` read once, only to go back
            if item is None or item in self._reported:
                continue
            self._reported.add(item)
            fix = None
            if item is n:
                fix = unsafe("keep the value on the device (`.detach()`; a 0-dim tensor may promote dtypes "
                             "differently from a Python number)",
                             {item: item.with_changes(func=item.func.with_changes(attr=cst.Name("detach")))})
            self.report(item, f"`{self.ctx.module.code_for_node(item.func.value)}.item()` is read to the host and "
                              f"added back into the device tensor `{small.target.value}` every iteration; keep it "
                              "on the device", fix)

    # ---- host noise through a tensor type alias ------------------------------------------------
    def _alias_draws(self, loop, skip) -> None:
        aliases = self._aliases()
        if not aliases:
            return
        for n in nodes(loop.body):
            if not (isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value in aliases
                    and n.args and isinstance(n.args[0].value, cst.Call)) or n in skip or n in self._reported:
                continue
            q = self.facts.qualname(n.args[0].value.func) or ""
            if not (q.startswith("numpy.random.") or q in HOST_FACTORIES) or len(n.args) != 1:
                continue  # `Tensor(np.array(batch))`: host data that has to travel
            self._reported.add(n)
            kind, test, fn = aliases[n.func.value]
            fix = device_draw(self.facts, n, q, kind, test) if fn is None or fn is self.t.scope else None
            text = self.ctx.module.code_for_node(n.args[0].value.func)
            self.report(n, f"`{n.func.value}({text}(...))` draws host data every iteration and copies it to "
                           "the device; draw it on the device", fix)
