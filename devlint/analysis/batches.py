"""Data loaders and the batches a loop takes from them (DL010).

From the CST alone (no torch import):

* ``dataset_classes(module, facts)``: classes of the file that subclass a torch ``Dataset``;
* ``dataset_inputs(module, facts, classes)``: names read by a Dataset/DataLoader constructor
  (name -> the innermost constructor), i.e. values that *are* the data set;
* ``Loaders``: which names hold a DataLoader or dataset in a scope, and whether what they
  yield is known to be tensors (``TensorDataset``, ``torchvision.datasets``, a Dataset class of
  the file) or not (a DataLoader over something this file cannot see);
* ``Loaders.batch_loop(for_node)``: a loop over a loader (through ``enumerate``/``tqdm``/``iter``)
  whose batch can be moved at the top of its body: a tuple of names, or one name used as a
  list (``b[0]``), a dict (``b["x"]``) or whole (``f(b)``); or why it cannot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from devlint.analysis.dataflow import target_names
from devlint.syntax import names_read
from devlint.facts import call_arg, dotted
from devlint.walk import nodes, statements

_WRAPPERS = frozenset({"enumerate", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "iter"})


@dataclass(eq=False)
class BatchLoop:
    node: cst.For
    names: list  # batch names (tuple/list targets) or one name
    form: str  # "tuple", "name", "list", "dict"
    known: bool  # the loader yields tensors
    source: str  # the iterated expression, for messages


def dataset_classes(module: cst.Module, facts) -> set:
    out: set = set()
    for s in module.body:
        if isinstance(s, cst.ClassDef):
            for b in s.bases:
                q = facts.qualname(b.value) or ""
                if q.startswith("torch.utils.data") and q.endswith("Dataset") or (dotted(b.value) in out):
                    out.add(s.name.value)
    return out


def dataset_inputs(module: cst.Module, facts, classes: set) -> dict:
    """name -> the innermost Dataset/DataLoader constructor that reads it."""
    out: dict = {}
    for n in nodes(module, into_scopes=True):
        if isinstance(n, cst.Call):
            q = facts.qualname(n.func) or ""
            if q.startswith("torch.utils.data.") or dotted(n.func) in classes:
                for a in n.args:
                    for name in names_read(a.value):
                        out[name] = dotted(n.func) or q
    return out


def batch_form(body: cst.CSTNode, name: str) -> Optional[str]:
    """How a loop body uses its one-name batch: "dict", "list", "name" (passed whole), or None."""
    forms = set()
    for n in nodes(body):
        if isinstance(n, cst.Subscript) and isinstance(n.value, cst.Name) and n.value.value == name:
            idx = n.slice[0].slice.value if len(n.slice) == 1 and isinstance(n.slice[0].slice, cst.Index) else None
            forms.add("dict" if isinstance(idx, cst.SimpleString) else "list" if isinstance(idx, cst.Integer)
                      else "?")
        elif isinstance(n, cst.Assign) and isinstance(n.value, cst.Name) and n.value.value == name and \
                any(isinstance(t.target, (cst.Tuple, cst.List)) for t in n.targets):
            forms.add("list")
        elif isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and any(
                isinstance(a.value, cst.Name) and a.value.value == name for a in n.args):
            forms.add("name")
    return forms.pop() if len(forms) == 1 and "?" not in forms else None


class Loaders:
    """Loader names visible in one scope (its own bindings, the module's, and ``seeds``:
    parameters that receive a loader) -> whether what they yield is known to be tensors."""

    def __init__(self, facts, module: cst.Module, body: cst.CSTNode, classes: set, seeds: Optional[dict] = None):
        self.facts, self.module, self.classes = facts, module, classes
        self.names: dict = dict(seeds or {})
        for b in ([body] if body is module else [module, body]):
            for n in statements(b):
                if isinstance(n, cst.Assign):
                    known = self.origin(n.value)
                    if known is not None:
                        for t in n.targets:
                            for name in target_names(t.target):
                                self.names[name] = known

    def origin(self, value: cst.BaseExpression) -> Optional[bool]:
        """True: yields tensors; False: a DataLoader over something unknown; None: not a loader."""
        if not isinstance(value, cst.Call):
            return None
        q = self.facts.qualname(value.func) or ""
        last = q.rsplit(".", 1)[-1]
        if q.startswith("torch.utils.data") and last == "DataLoader":
            a = call_arg(value, 0, "dataset")
            if a is None:
                return False
            if isinstance(a.value, cst.Name):
                return self.names.get(a.value.value, False)
            return bool(self.origin(a.value))
        if q.startswith("torch.utils.data") and last in ("Subset", "random_split", "ConcatDataset"):
            a = call_arg(value, 0, "dataset" if last != "ConcatDataset" else "datasets")
            return self.names.get(a.value.value, False) if a is not None and isinstance(a.value, cst.Name) else False
        if q.startswith("torch.utils.data") and last == "TensorDataset":
            return True
        if q.startswith("torchvision.datasets.") or dotted(value.func) in self.classes:
            return True
        return None

    def batch_loop(self, node: cst.For) -> tuple:
        """(BatchLoop, None) for a loop whose batch can be moved; (None, why) for a loop over a
        loader whose batch cannot; (None, None) for any other loop."""
        it, target = node.iter, node.target
        while isinstance(it, cst.Call) and (dotted(it.func) in _WRAPPERS) and it.args:
            if dotted(it.func) == "enumerate":
                if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
                    return None, None
                target = target.elements[1].value
            it = it.args[0].value
        if isinstance(it, cst.Name):
            if it.value not in self.names:
                return None, None
            known, source = self.names[it.value], it.value
        else:
            known = self.origin(it)
            if known is None:
                return None, None
            source = self.module.code_for_node(it)
        if not isinstance(node.body, cst.IndentedBlock):
            return None, f"the loop over `{source}` is on one line"
        if isinstance(target, (cst.Tuple, cst.List)):
            if not all(isinstance(el.value, cst.Name) for el in target.elements):
                return None, f"a nested batch of `{source}`"
            return BatchLoop(node, [el.value.value for el in target.elements], "tuple", known, source), None
        if isinstance(target, cst.Name):
            form = batch_form(node.body, target.value)
            if form is None:
                return None, f"cannot tell the structure of the batch of `{source}`"
            return BatchLoop(node, [target.value], form, known, source), None
        return None, None
