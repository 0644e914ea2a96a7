"""Checkpoint facts: which paths a file saves, from host or device values, and how loads are used.

Computed once per module (no torch import, purely syntactic):

* ``path_key(expr)``: a comparable key for a save/load path (a string literal's value or a
  dotted name), None when the path is not statically known.
* ``HostSaves(module)``: the keys of paths the file saves only from values that provably live
  on the host: ``x.cpu()``, ``x.detach().cpu()``, or a plain name that nothing in the file ever
  moves to a device (no ``name.cuda()`` / ``name.to(...)`` and not built by such a call).
  A path also saved from a possibly-placed value is not a host save.
* ``host_use(load_call, parents)``: the loaded value is used on the host right away
  (``torch.load(p).numpy()``, ``.tolist()``) or fed to ``load_state_dict(..., assign=True)``.
"""
from __future__ import annotations

from typing import Dict, Optional, Set

import libcst as cst

from devlint.facts import call_arg, dotted

SAVERS = {"save"}  # torch.save / torch.jit.save / torch.serialization.save (attribute name)
PLACERS = {"cuda", "to", "to_device", "to_empty"}
HOST_USES = {"numpy", "tolist", "item"}


def _string(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.SimpleString):
        try:
            return str(expr.evaluated_value)
        except Exception:  # pragma: no cover - bytes or odd prefixes
            return None
    return None


def path_key(expr: cst.BaseExpression) -> Optional[str]:
    s = _string(expr)
    if s is not None:
        return "str:" + s
    d = dotted(expr)
    if d is None:
        return None
    if d.endswith(".name"):
        d = d[: -len(".name")]
    return "name:" + d


def _is_torch_save(call: cst.Call) -> bool:
    d = dotted(call.func)
    return d in ("torch.save", "torch.jit.save", "torch.serialization.save", "jit.save")


_FACTORIES = {"zeros", "ones", "randn", "rand", "randint", "arange", "linspace", "tensor", "empty", "full",
              "from_numpy", "as_tensor", "eye"}


def _is_cpu_call(expr: cst.BaseExpression) -> bool:
    return (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "cpu" and not expr.args)


def _host_call(expr: cst.Call) -> bool:
    """A call that builds a host value: ``x.cpu()``, ``Net()``, ``torch.zeros(...)`` without ``device=``."""
    f = expr.func
    if isinstance(f, cst.Attribute) and f.attr.value == "cpu" and not expr.args:
        return True
    if any(a.keyword is not None and a.keyword.value == "device" for a in expr.args):
        return False
    d = dotted(f) or ""
    last = d.rsplit(".", 1)[-1]
    if d.startswith("torch.") and last in _FACTORIES:
        return True
    return bool(last) and last[:1].isupper() and not _contains_placer(expr)


def _host_value(expr: cst.BaseExpression, placed: Set[str], binds: Optional[Dict[str, list]] = None) -> bool:
    """True when ``expr`` provably holds host tensors: built on the host in this file, never placed."""
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "state_dict" and not expr.args:
            return _host_value(expr.func.value, placed, binds)
        return _host_call(expr)
    if isinstance(expr, (cst.Tuple, cst.List)):
        return bool(expr.elements) and all(_host_value(e.value, placed, binds) for e in expr.elements)
    if isinstance(expr, cst.Name):
        values = (binds or {}).get(expr.value)
        return (expr.value not in placed and bool(values)
                and all(isinstance(v, cst.Call) and _host_call(v) for v in values))
    return False


DATASET_BASES = ("Dataset", "ImageFolder", "DatasetFolder", "DataModule")


def is_dataset_class(cls: Optional[cst.ClassDef]) -> bool:
    """A dataset (or data module) class: what it caches with torch.save/torch.load is host data."""
    if cls is None:
        return False
    for b in cls.bases:
        d = dotted(b.value) or ""
        if d.rsplit(".", 1)[-1].endswith(DATASET_BASES):
            return True
    return False


class _Scan(cst.CSTVisitor):
    def __init__(self) -> None:
        self.placed: Set[str] = set()
        self.saves: Dict[str, list] = {}
        self.unknown_saves: list = []  # saves to a computed path
        self.binds: Dict[str, list] = {}  # name -> every value assigned to it (None: unknown)

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value in PLACERS:
            d = dotted(f.value)
            if d is not None:
                self.placed.add(d.split(".")[0])
        if _is_torch_save(node):
            obj = call_arg(node, 0, "obj")
            tgt = call_arg(node, 1, "f")
            if obj is not None and tgt is not None:
                key = path_key(tgt.value)
                if key is not None:
                    self.saves.setdefault(key, []).append(obj.value)
                else:
                    self.unknown_saves.append(obj.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.binds.setdefault(t.target.value, []).append(node.value)
            else:  # tuple unpacking etc.: the name's value is not known
                for n in _plain_names(t.target):
                    self.binds.setdefault(n, []).append(None)
        # ``net = Net().cuda()`` / ``x = batch.to(device)``: the targets are placed values
        placed = _contains_placer(node.value)
        if placed:
            for t in node.targets:
                d = dotted(t.target)
                if d is not None:
                    self.placed.add(d.split(".")[0])


def _plain_names(target: cst.BaseExpression) -> list:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _plain_names(e.value)]
    return []


class _Placer(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value in PLACERS:
            self.found = True
        for a in node.args:
            if a.keyword is not None and a.keyword.value == "device":
                self.found = True


def _contains_placer(expr: cst.BaseExpression) -> bool:
    v = _Placer()
    expr.visit(v)
    return v.found


class HostSaves:
    """Paths this module saves only from host values."""

    def __init__(self, module: cst.Module) -> None:
        scan = _Scan()
        module.visit(scan)
        # a literal path written only from host values; a computed path (a name: which file
        # it holds at load time is unknown) only when every save moves the value off the device
        # explicitly (`torch.save(x.cpu(), p)`), the author's own statement that it is a host cache
        self.keys: Set[str] = {
            k for k, objs in scan.saves.items()
            if objs and all(_host_value(o, scan.placed, scan.binds) for o in objs)
            and (k.startswith("str:") or all(_is_cpu_call(o) for o in objs))
        }

        self.saves_any = bool(scan.saves) or bool(scan.unknown_saves)

    def holds_host(self, path: cst.BaseExpression) -> bool:
        key = path_key(path)
        return key is not None and key in self.keys


def host_used_load(node: cst.CSTNode) -> Optional[cst.Call]:
    """The call whose value ``node`` consumes on the host, if any.

    ``torch.load(p).numpy()`` (node: the ``.numpy`` attribute) or
    ``m.load_state_dict(torch.load(p), assign=True)`` (node: the outer call): the loaded tensors
    are used where they were materialised, so the only map_location that cannot break them is
    ``"cpu"``.
    """
    if isinstance(node, cst.Attribute) and node.attr.value in HOST_USES and isinstance(node.value, cst.Call):
        return node.value
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "load_state_dict"):
        assign = call_arg(node, None, "assign")
        first = call_arg(node, 0, "state_dict")
        if (assign is not None and isinstance(assign.value, cst.Name) and assign.value.value == "True"
                and first is not None and isinstance(first.value, cst.Call)):
            return first.value
    return None


def is_library_module(module: cst.Module) -> bool:
    """No `if __name__ == "__main__":` block and no module-level call statement: code that is
    imported, never run. Such a module must not grow an import-time device global."""
    for s in module.body:
        if isinstance(s, cst.If) and isinstance(s.test, cst.Comparison):
            parts = [s.test.left] + [c.comparator for c in s.test.comparisons]
            if any(isinstance(p, cst.Name) and p.value == "__name__" for p in parts):
                return False
        if isinstance(s, (cst.For, cst.While, cst.With)):
            return False
        if isinstance(s, cst.SimpleStatementLine):
            for small in s.body:
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    return False
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call):
                    d = dotted(small.value.func) or ""
                    if not d.startswith(("typing.", "TypeVar", "logging.", "getLogger", "namedtuple", "collections.")):
                        return False
    return True


def is_test_file(filename: str) -> bool:
    name = filename.replace("\\", "/").rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
