"""What a value is and where it lives: the file's value model (shared by every rule).

For an expression at a point (its enclosing function ``scope`` and class ``cls``) the model
answers

* its **kind**: ``TENSOR``, ``PARAM`` (an ``nn.Parameter``), ``MODULE``, ``DEVICE``,
  ``DTYPE``, ``CONTAINER`` (a list/tuple/dict/batch of tensors), or ``None`` (unknown);
* its **placement**: ``HOST``, ``ACCEL`` (an accelerator), ``FOLLOWS`` (the device of
  another value: ``.to(x.device)``, ``zeros_like(x)``), or ``None`` (unknown).

Evidence comes from the file alone, never from importing torch: constructors and torch
functions, ``nn.Parameter``, ``register_buffer``, annotations (``List[Tensor]`` too),
assignments and re-assignments, tuple unpacking, ``self.x`` set in one method and read in
another, aliases of legacy constructors (``T = torch.cuda.FloatTensor if c else
torch.FloatTensor``), loop targets of loaders whose items the file shows are tensors, and
usage (``x.backward()``, ``x.size(0)``, ``x.shape``, ``x @ w``, ``torch.cat([x])``,
``x[i] = ...``, ``batch[k] = batch[k].to(d)``, ``F.relu(x)``, ``x.unsqueeze(0)``). When a
name's own evidence is silent, how it is bound may answer (``_derived_kind``): a parameter
moved by a statement exactly like a sibling parameter that is a known tensor, an item of a
tuple batch of a DataLoader with the default collate (built in the file, or a parameter
annotated, read (``loader.dataset``) or passed as one), an element of a list of tensors, a
value unpacked from a function of the file that returns tensors; never a name used as a
Module or a mapping (``model(**batch)``, ``batch["ids"]``). No evidence, no answer: rules
stay silent.

The model is built in two phases before any rule gets an answer: assignment evidence
during the prescan (statements in source order, so ``y = x.float()`` sees what ``x`` is),
frozen by :meth:`ValueModel.finish`; then usage evidence, read from the whole file in one
walk the first time a question needs it (most files are never asked), and frozen too. The
answers are final: they never depend on which node a rule is visiting or in which order
rules ask (a usage after the asking node counts as much as one before it).
"""

from __future__ import annotations

import weakref
from types import MappingProxyType
from typing import Optional

import libcst as cst

from devlint.nnbases import MODULE_FAMILIES, NON_MODULE_NN, is_module_base  # noqa: F401 (re-exported)
from devlint.analysis.calls import UNKNOWN as UNKNOWN_ARG, call_graph
from devlint.syntax import call_arg, dotted, string_value
from devlint.walk import children, statements

# ---- kinds ----------------------------------------------------------------------------
TENSOR = "tensor"
PARAM = "param"  # an nn.Parameter: a tensor whose attribute cannot take a plain tensor
MODULE = "module"
DEVICE = "device"
DTYPE = "dtype"
CONTAINER = "container"  # a list/tuple/dict of tensors, or a batch whose items are tensors
UNKNOWN = None

# evidence-only kinds (never answered by kind_of)
TENSOR_DATASET = "tensor_dataset"  # a dataset whose items are tuples of tensors
TENSOR_LOADER = "tensor_loader"  # a DataLoader over one
TENSOR_CTOR = "tensor_ctor"  # an alias of a legacy constructor: T(...) builds a tensor
_ARRAY = "array"  # shaped or indexed like an array (numpy does this too)
_CONVERTED = "converted"  # receives `.to()`/`.cuda()`/`.pin_memory()`... (Modules and batches do this too)
_CALLED_ITEMS = "called_items"  # `d[k](...)` / `d[k].parameters()`: its items are Modules
_LOADER = "loader"  # a DataLoader with the default collate (`DataLoader(ds)`, `.dataset` read, annotated)
_MAPPING = "mapping"  # used as a mapping: `**x`, `x["key"]`, `x.items()` (a batch, a BatchEncoding)
_APPENDS_TENSOR = "appends_tensor"  # `xs.append(torch.ones(2))`
_APPENDS_OTHER = "appends_other"  # `xs.append(v)` of anything not known to be a tensor
_OBJECT = "object"  # an attribute or method no tensor has (`model.generate(...)`, `enc.input_ids`)
_WEAK = frozenset({_ARRAY, _CONVERTED, _CALLED_ITEMS, _LOADER, _MAPPING, _APPENDS_TENSOR, _APPENDS_OTHER, _OBJECT})

# ---- placements -----------------------------------------------------------------------
HOST = "host"
ACCEL = "accelerator"
FOLLOWS = "follows"

# torch functions that return a new tensor (factories first).
FACTORIES = frozenset(
    """zeros ones empty full arange range linspace logspace eye rand randn randint randperm
    rand_like randn_like zeros_like ones_like empty_like full_like randint_like tensor as_tensor
    from_numpy empty_strided normal bernoulli multinomial poisson""".split()
)
DEVICE_LESS_FACTORIES = frozenset(
    "zeros ones empty full arange range linspace logspace eye rand randn randint randperm tensor "
    "empty_strided normal".split()
)
TENSOR_FUNCS = FACTORIES | frozenset(
    """cat concat stack hstack vstack matmul mm bmm einsum where clamp clip exp log sqrt abs
    sigmoid tanh relu softmax log_softmax sum mean max min argmax argmin sort topk cumsum
    flatten reshape squeeze unsqueeze transpose permute cross_entropy mse_loss nll_loss
    masked_fill gather index_select tril triu outer dot addmm baddbmm pow mul add sub div""".split()
)
# Methods that turn a tensor into another tensor (or, on a Module, return self).
CONVERSIONS = frozenset(
    "to cuda cpu half float double bfloat16 type long int bool short byte char".split()
)
TENSOR_METHODS = CONVERSIONS | frozenset(
    """detach clone view reshape permute transpose t contiguous squeeze unsqueeze flatten sum mean
    abs exp log sqrt sigmoid tanh relu softmax matmul mm expand expand_as repeat narrow select
    index_select masked_fill pow mul add sub div clamp clip float numpy_ pin_memory requires_grad_
    new_zeros new_ones new_empty new_full new_tensor""".split()
)
# Usage that only makes sense on one kind of value (not `requires_grad_`: nn.Module has it too,
# `vae.requires_grad_(False)` freezes a model).
TENSOR_ONLY_USE = frozenset(
    "backward item numpy tolist size dim ndim add_ mul_ sub_ div_ copy_ zero_ "
    "fill_ normal_ uniform_ detach clone view "
    # methods neither a NumPy array, a Module nor a mapping has
    "unsqueeze unsqueeze_ squeeze_ permute contiguous masked_fill masked_fill_ expand expand_as narrow "
    "index_select numel new_zeros new_ones new_full new_empty new_tensor".split()
)
MODULE_ONLY_USE = frozenset(
    "parameters named_parameters buffers named_buffers modules named_modules children "
    "named_children eval train state_dict load_state_dict apply register_buffer "
    "register_parameter zero_grad forward add_module register_forward_hook".split()
)
_TENSOR_DATASETS = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
_DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
_LEGACY_CTORS = frozenset("Tensor FloatTensor DoubleTensor HalfTensor LongTensor IntTensor BoolTensor "
                          "ByteTensor ShortTensor CharTensor BFloat16Tensor".split())
_DTYPES = frozenset("float float16 float32 float64 half double bfloat16 int int8 int16 int32 int64 long "
                    "short uint8 bool complex64 complex128 cfloat cdouble".split())
_CONTAINER_ANN = frozenset({"List", "list", "Sequence", "Tuple", "tuple", "Iterable", "Iterator", "Dict", "dict",
                            "Mapping", "MutableSequence"})
_CAT_FUNCS = frozenset({"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack"})
# torch functions whose first argument need not be a tensor
_NOT_TENSOR_ARG = FACTORIES | _CAT_FUNCS | frozenset({"einsum", "where"})
_ARITH = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Power)
_PARAMETER = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
_LOADER_ATTRS = frozenset({"dataset", "sampler", "batch_sampler"})  # a DataLoader's own attributes
_MAPPING_USE = frozenset({"items", "keys", "values"})
# a tensor's attributes and (common) methods: anything else read off a value says it is some
# other object (only ever used to keep a name from being *derived* a tensor, see _derive)
_TENSOR_ATTRS = frozenset("shape device dtype T mT H data grad ndim is_cuda requires_grad real imag is_leaf "
                          "grad_fn layout is_sparse".split())
_TENSOR_API = frozenset(
    """sum mean std var max min argmax argmin norm abs exp log sqrt pow clamp clamp_ float long int bool
    half double bfloat16 byte char short item tolist numpy cpu cuda to size dim view view_as reshape
    reshape_as permute transpose t contiguous squeeze unsqueeze squeeze_ unsqueeze_ flatten detach detach_
    clone requires_grad_ backward zero_ fill_ copy_ add add_ mul mul_ sub sub_ div div_ masked_fill
    masked_fill_ index_select gather scatter scatter_ scatter_add_ repeat repeat_interleave expand
    expand_as eq ne gt lt ge le any all nonzero type type_as new_zeros new_ones new_full new_empty
    new_tensor numel nelement element_size split chunk unbind topk sort argsort cumsum cumprod softmax
    log_softmax sigmoid tanh relu matmul mm bmm dot round floor ceil sign masked_select narrow select
    unfold roll flip index_put_ pin_memory is_pinned share_memory_ data_ptr to_dense to_sparse unique
    bincount is_contiguous stride get_device normal_ uniform_ random_ fill_diagonal_ tril triu diag
    logical_not logical_and logical_or float_power reciprocal neg fmod remainder isnan isinf isfinite
    nan_to_num prod sub max_ min_ median mode kthvalue std_mean var_mean count_nonzero allclose equal
    half_ record_stream""".split())
# calls that split one tensor into a tuple of tensors (`torch.split(x, n)`, `x.chunk(2)`)
_SPLITS = frozenset({"split", "chunk", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit"})


def annotation_kind(names, ann: Optional[cst.Annotation]) -> Optional[str]:
    """The kind an annotation declares (``Tensor``, ``nn.Parameter``, ``nn.Module``,
    ``List[Tensor]``/``Tuple[Tensor, ...]`` as a CONTAINER)."""
    if ann is None:
        return None
    return _annotation_node_kind(names, ann.annotation)


def _annotation_node_kind(names, node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        v = string_value(node) or ""
        last = v.rsplit(".", 1)[-1]
        return TENSOR if last == "Tensor" else (MODULE if last == "Module" else None)
    if isinstance(node, cst.Subscript):
        d = dotted(node.value)
        if d is None or d.rsplit(".", 1)[-1] not in _CONTAINER_ANN or not node.slice:
            return None
        last = d.rsplit(".", 1)[-1]
        items = node.slice[1:] if last in ("Dict", "dict", "Mapping") else node.slice
        ks = set()
        for el in items:
            sl = el.slice
            if isinstance(sl, cst.Index):
                if isinstance(sl.value, cst.Ellipsis):
                    continue
                ks.add(_annotation_node_kind(names, sl.value))
            else:
                return None
        return CONTAINER if ks and ks <= {TENSOR, PARAM} else None
    q = names.qualname(node)
    if q in ("torch.Tensor", "torch.FloatTensor", "torch.LongTensor"):
        return TENSOR
    if q in _PARAMETER:
        return PARAM
    if q in ("torch.nn.Module", "torch.nn.modules.module.Module"):
        return MODULE
    return None


def _is_string_index(sub: cst.Subscript) -> bool:
    return (len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index)
            and string_value(sub.slice[0].slice.value) is not None)


class ValueModel:
    """The value facts of one file. ``names`` is the file's :class:`~devlint.facts.FileFacts`
    (import aliases, Module classes, bound names), read duck-typed."""

    def __init__(self, names) -> None:
        # a weak back-reference: the facts own this model, and a cycle would keep every
        # file's tree alive until the cycle collector walks it
        self._names = weakref.ref(names)
        self.evidence: dict = {}  # (scope, dotted) -> kinds, from assignments (prescan)
        # (scope or class, dotted) -> kinds, from how values are used (see _use_kinds): read
        # region by region (a region: the module's own code, or one function's body without
        # the functions nested in it), each the first time a question needs it
        self._found: dict = {}
        self._walked: set = set()  # regions read (None: the module's own code)
        self._ready: set = set()  # keys whose regions have all been read
        self._fn_cls: dict = {}  # FunctionDef -> the class its nodes count as (prescan)
        self._class_fns: dict = {}  # ClassDef -> FunctionDefs whose nodes count as in it
        self._class_scope: dict = {}  # ClassDef -> the scope its body is in
        self._unrecorded: list = []  # FunctionDefs met by a walk but not by the prescan
        self._module: Optional[cst.Module] = None
        self.values: dict = {}  # (scope, dotted) -> expressions assigned to it
        # what a name's binding says when neither assignments nor usage name its kind (read by
        # _derived_kind once the model is final): parameters, loop targets, tuple unpacking of
        # a call, and bare conversions (`x.to(d)` as a statement)
        self._params: dict = {}  # scope -> [parameter names] in order
        self._binds: dict = {}  # (scope, name) -> how many bindings the prescan met
        self._loop_items: dict = {}  # (scope, name) -> [(iterable, unpacked)]
        self._unpacked: dict = {}  # (scope, name) -> [(Call, index, cls)]
        self._moves: dict = {}  # scope -> [(name, Call)]: `name.to(...)` as a statement
        self._functions: dict = {}  # (cls, name) -> FunctionDef (None when defined twice)
        self._derived: dict = {}  # (scope, name) -> derived kind (answers asked at top level)
        self._deriving: set = set()
        self._returns_memo: dict = {}
        self._loader_asking: set = set()
        self.final = False

    @property
    def names(self):
        return self._names()

    # ---- building (prescan) -----------------------------------------------------------
    def add(self, scope, key: str, kind: Optional[str]) -> None:
        assert not self.final, "the value model is final once rules run"
        if kind is not None:
            self.evidence.setdefault((scope, key), set()).add(kind)

    def record_def(self, node, scope, cls) -> None:
        """A function or class definition the prescan met, in ``scope`` (function or None) and
        ``cls`` (the class that ``self.x`` in it belongs to)."""
        if isinstance(node, cst.FunctionDef):
            self._fn_cls[node] = cls
            if cls is not None:
                self._class_fns.setdefault(cls, []).append(node)
            if scope is None:  # a module-level function, or a method of a module-level class
                key = (cls, node.name.value)
                self._functions[key] = None if key in self._functions else node
        else:
            self._class_scope[node] = scope

    def record_param(self, scope, param: cst.Param) -> None:
        name = param.name.value
        self.add(scope, name, annotation_kind(self.names, param.annotation))
        if param.annotation is not None and self.names.qualname(param.annotation.annotation) in _DATALOADERS:
            self.add(scope, name, _LOADER)
        self._params.setdefault(scope, []).append(name)
        self._bound(scope, name)

    def _bound(self, scope, name: str) -> None:
        self._binds[(scope, name)] = self._binds.get((scope, name), 0) + 1

    def record_move(self, call: cst.Call, scope) -> None:
        """``name.to(...)`` / ``name.cuda()`` ... as a statement (its result thrown away)."""
        func = call.func
        if type(func) is cst.Attribute and func.attr.value in CONVERSIONS and type(func.value) is cst.Name:
            self._moves.setdefault(scope, []).append((func.value.value, call))

    def record_buffer(self, cls, name: str) -> None:
        self.add(cls, f"self.{name}", TENSOR)

    def record_assign(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression], scope, cls,
                      annotation: Optional[cst.Annotation] = None) -> None:
        """``target = value`` (or ``target: annotation = value``); tuple targets unpack."""
        if isinstance(target, (cst.Tuple, cst.List)):
            if value is None:
                return
            els = [e.value for e in target.elements]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(els) and not any(
                    isinstance(e, cst.StarredElement) for e in value.elements):
                for t, v in zip(els, value.elements):
                    self.record_assign(t, v.value, scope, cls)
                return  # (each target counted its binding)
            elif self.kind_of(value, scope, cls) == CONTAINER:
                for t in els:  # `x, y = batch` over a batch of tensors
                    d = dotted(t)
                    if d is not None:
                        self.add(self._key_scope(d, scope, cls), d, TENSOR)
            elif isinstance(value, cst.Call) and not any(isinstance(e, cst.StarredElement) for e in target.elements):
                for i, t in enumerate(els):  # `x, y = split(data)`: what `split` returns decides
                    if isinstance(t, cst.Name):
                        self._unpacked.setdefault((scope, t.value), []).append((value, i, cls))
            for t in els:
                if isinstance(t, cst.Name):
                    self._bound(scope, t.value)
            return
        d = dotted(target)
        if d is None:
            return
        if isinstance(target, cst.Name) and not _self_conversion(d, value):
            self._bound(scope, d)  # (`x = x.to(d)` keeps what `x` is: not another binding)
        key_scope = self._key_scope(d, scope, cls)
        if annotation is not None:
            self.add(key_scope, d, annotation_kind(self.names, annotation))
        if value is None:
            return
        self.values.setdefault((key_scope, d), []).append(value)
        self.add(key_scope, d, self.value_kind(value, scope, cls))

    def bound_values(self, name: str, scope) -> Optional[list]:
        """Every value ``name = value`` binds in ``scope``, when those are all its bindings; a
        move of the name itself (``crit = crit.cuda(gpu)``) keeps what it is and is left out."""
        vals = [v for v in self.values.get((scope, name), ()) if not _self_conversion(name, v)]
        return vals if vals and self._binds.get((scope, name)) == len(vals) else None

    def attribute_values(self, attr: str, cls) -> list:
        """Every value ``self.x = value`` binds in the class ``cls`` (``attr``: ``"self.x"``),
        but moves and casts of the attribute itself (``self.x = self.x.cuda()``)."""
        return [v for v in self.values.get((cls, attr), ()) if not (
            isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value in TENSOR_METHODS
            and dotted(v.func.value) == attr)]

    def binds(self, name: str, scope) -> bool:
        """``scope`` binds ``name`` itself (an assignment, a parameter, a loop target ...)."""
        return (scope, name) in self._binds

    def sole_value(self, name: str, scope) -> Optional[cst.BaseExpression]:
        """The value of ``name = value`` when that is the name's only binding in ``scope``."""
        vals = self.values.get((scope, name))
        return vals[0] if vals is not None and len(vals) == 1 and self._binds.get((scope, name)) == 1 else None

    @staticmethod
    def _key_scope(d: str, scope, cls):
        return cls if (d.startswith("self.") and cls is not None) else scope

    def value_kind(self, value: cst.BaseExpression, scope, cls) -> Optional[str]:
        if isinstance(value, (cst.List, cst.Tuple)) and value.elements:
            ks = {self.kind_of(e.value, scope, cls) for e in value.elements}
            return CONTAINER if ks <= {TENSOR, PARAM} else None
        if isinstance(value, cst.Dict) and value.elements:
            ks = {self.kind_of(e.value, scope, cls) for e in value.elements if isinstance(e, cst.DictElement)}
            return CONTAINER if ks <= {TENSOR, PARAM} else None
        if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            return CONTAINER if self.kind_of(value.elt, scope, cls) in (TENSOR, PARAM) else None
        if isinstance(value, cst.IfExp):
            kb, ko = self.value_kind(value.body, scope, cls), self.value_kind(value.orelse, scope, cls)
            return kb if kb == ko else None
        if isinstance(value, cst.Attribute) and value.attr.value == "device" and self.names.qualname(value) is None:
            return DEVICE
        q = self.names.qualname(value)
        if q is not None and q.startswith("torch.") and q.rsplit(".", 1)[-1] in _LEGACY_CTORS:
            return TENSOR_CTOR
        if isinstance(value, cst.Call):
            loader = self.tensor_loader_kind(value, scope)
            if loader is not None:
                return loader
            if self._default_loader(value):
                return _LOADER
            if self.names.qualname(value.func) in ("torch.device", "torch.accelerator.current_accelerator"):
                return DEVICE
            if isinstance(value.func, cst.Name) and value.func.value in self.names.tensor_datasets:
                return TENSOR_DATASET
        return self.kind_of(value, scope, cls)

    def tensor_loader_kind(self, value: cst.Call, scope) -> Optional[str]:
        """``TensorDataset(...)`` and a ``DataLoader`` over one: their items are tensors."""
        q = self.names.qualname(value.func)
        if q in _TENSOR_DATASETS:
            return TENSOR_DATASET
        if q in _DATALOADERS:
            a = call_arg(value, 0, "dataset")
            if a is None or call_arg(value, 6, "collate_fn") is not None:
                return None  # a custom collate_fn may build anything
            if isinstance(a.value, cst.Call) and (
                    self.names.qualname(a.value.func) in _TENSOR_DATASETS
                    or (isinstance(a.value.func, cst.Name) and a.value.func.value in self.names.tensor_datasets)):
                return TENSOR_LOADER
            d = dotted(a.value)
            if d is not None and TENSOR_DATASET in self.kinds(d, scope):
                return TENSOR_LOADER
        return None

    def _default_loader(self, value: cst.BaseExpression) -> bool:
        """``DataLoader(ds, ...)`` with the default collate: a tuple item of a batch is a tensor
        (a list of strings or a dict has no ``.to``)."""
        return (isinstance(value, cst.Call) and self.names.qualname(value.func) in _DATALOADERS
                and call_arg(value, 0, "dataset") is not None and call_arg(value, 6, "collate_fn") is None
                and not any(a.star for a in value.args))

    def record_for(self, target: cst.BaseExpression, it: cst.BaseExpression, scope) -> None:
        """``for t in tensors``, ``for x, y in loader``, ``for i, (x, y) in enumerate(loader)``."""
        self._record_loop_items(target, it, scope)
        d = dotted(it)
        if d is not None and CONTAINER in self.kinds(d, scope) and isinstance(target, cst.Name):
            self.add(scope, target.value, TENSOR)
        if (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate"
                and "enumerate" not in self.names.bound_names and it.args
                and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2):
            target, it = target.elements[1].value, it.args[0].value
        if isinstance(it, cst.Call):
            if self.tensor_loader_kind(it, scope) != TENSOR_LOADER:
                return
        elif dotted(it) is None or TENSOR_LOADER not in self.kinds(dotted(it), scope):
            return
        if isinstance(target, cst.Name):
            self.add(scope, target.value, CONTAINER)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                if isinstance(el.value, cst.Name):
                    self.add(scope, el.value.value, TENSOR)

    def _record_loop_items(self, target: cst.BaseExpression, it: cst.BaseExpression, scope) -> None:
        if (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate"
                and "enumerate" not in self.names.bound_names and it.args
                and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2):
            if isinstance(target.elements[0].value, cst.Name):
                self._bound(scope, target.elements[0].value.value)
            target, it = target.elements[1].value, it.args[0].value
        if isinstance(target, cst.Name):
            self._loop_items.setdefault((scope, target.value), []).append((it, False))
            self._bound(scope, target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                if isinstance(el.value, cst.Name):
                    if not isinstance(el, cst.StarredElement):
                        self._loop_items.setdefault((scope, el.value.value), []).append((it, True))
                    self._bound(scope, el.value.value)

    def tensor_dataset_class(self, cls: cst.ClassDef) -> bool:
        """A class of the file whose ``__getitem__`` returns only tensors (or tuples of them)."""
        for stmt in cls.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__getitem__":
                found = False
                for n in _returns(stmt.body):
                    if n.value is None:
                        return False
                    v = n.value
                    els = [e.value for e in v.elements] if isinstance(v, (cst.Tuple, cst.List)) else [v]
                    if not els or any(self.kind_of(e, stmt, cls) not in (TENSOR, PARAM) for e in els):
                        return False
                    found = True
                return found
        return False

    # ---- usage (after the prescan, before any rule) --------------------------------------
    def finish(self, module: cst.Module) -> None:
        """End of the prescan: freeze the assignment evidence. The usage evidence is read
        region by region, the first time a question needs a region (most files never ask,
        and reading a whole file costs a sizeable part of a parse); an answer always sees
        every use that can bear on it, whatever node a rule is visiting when it asks."""
        if self.final:
            return
        self.evidence = MappingProxyType({k: frozenset(v) for k, v in self.evidence.items()})
        self.values = MappingProxyType({k: tuple(v) for k, v in self.values.items()})
        self._module = module
        self.final = True

    @property
    def usage(self):
        """(scope or class, dotted) -> kinds from how values are used, for the whole file."""
        if not self.final:
            return MappingProxyType({})  # the prescan never reads usage
        self._read_all()
        return MappingProxyType({k: frozenset(v) for k, v in self._found.items()})

    def _use_kinds(self, key, d: str) -> frozenset:
        """Usage kinds of ``d`` in ``key`` (a scope: function or None; or a class, for
        ``self.x``). Every region that can hold such a use is read first, so the answer is
        the same whenever it is asked."""
        if not self.final:
            return frozenset()  # the prescan never reads usage
        if key not in self._ready:
            if key is None or key in self._fn_cls:
                self._read_region(key)
            elif key in self._class_scope:
                self._read_region(self._class_scope[key])
                for fn in self._class_fns.get(key, ()):
                    self._read_region(fn)
            else:  # a scope the prescan did not see: read everything
                self._read_all()
            self._ready.add(key)
        return frozenset(self._found.get((key, d), ()))

    def _read_region(self, region) -> None:
        if region in self._walked:
            return
        self._walked.add(region)
        if region is None:
            self._walk(self._module, None, None)
        else:
            for c in children(region.body, trivia=False):
                self._walk(c, region, self._fn_cls.get(region))

    def _read_all(self) -> None:
        for region in (None, *self._fn_cls):
            self._read_region(region)
        # functions the prescan did not record (a safety net: it records every definition);
        # reading them may meet more, which the loop then reads too
        for fn in self._unrecorded:
            self._read_region(fn)

    def _use(self, scope, cls, node: cst.CSTNode, kind: str) -> None:
        d = dotted(node)
        if d is None:
            return
        key = cls if (d.startswith("self.") and cls is not None) else scope
        self._found.setdefault((key, d), set()).add(kind)

    def _walk(self, root: cst.CSTNode, scope, cls) -> None:
        stack = [(root, scope, cls)]
        use = self._use
        aliases = self.names.aliases
        callees: set = set()  # ids of the Attribute callees of calls met (`x.m` in `x.m(...)`)
        while stack:
            n, scope, cls = stack.pop()
            t = type(n)
            if t is cst.FunctionDef:  # a region of its own (see _read_region)
                if n not in self._fn_cls:
                    self._unrecorded.append(n)
                continue
            if t is cst.ClassDef:
                for c in children(n.body, trivia=False):
                    stack.append((c, scope, n))
                continue
            if t is cst.Call:
                func = n.func
                if type(func) is cst.Attribute:
                    recv = func.value
                    meth = func.attr.value
                    callees.add(id(func))
                    if meth not in _TENSOR_API and meth not in TENSOR_METHODS and type(recv) is cst.Name:
                        use(scope, cls, recv, _OBJECT)
                    if meth in TENSOR_ONLY_USE:
                        use(scope, cls, recv, TENSOR)
                    elif meth in MODULE_ONLY_USE:
                        use(scope, cls, recv, MODULE)
                        if type(recv) is cst.Subscript:
                            use(scope, cls, recv.value, _CALLED_ITEMS)
                    elif meth in CONVERSIONS or meth == "pin_memory":
                        use(scope, cls, recv, _CONVERTED)
                    elif meth in _MAPPING_USE and not n.args:
                        use(scope, cls, recv, _MAPPING)
                    elif meth in ("append", "insert", "extend"):
                        use(scope, cls, recv, _APPENDS_TENSOR if meth != "extend" and self._built_tensor(
                            n.args[-1].value if n.args else None, scope, cls) else _APPENDS_OTHER)
                    q = self.names.qualname(func)
                    if q is not None and q.startswith("torch.") and q.count(".") == 1:
                        self._torch_args(n, q.rsplit(".", 1)[-1], scope, cls)
                    elif q is not None and q.startswith("torch.nn."):
                        self._loss_weights(n, q, scope, cls)
                        if q.startswith("torch.nn.functional."):
                            self._functional_args(n, scope, cls)
                elif type(func) is cst.Name:
                    if func.value not in aliases:
                        use(scope, cls, func, MODULE)
                    else:
                        q = aliases[func.value]
                        if q.startswith("torch.") and q.count(".") == 1:
                            self._torch_args(n, q.rsplit(".", 1)[-1], scope, cls)
                        elif q.startswith("torch.nn.functional."):
                            self._functional_args(n, scope, cls)
                elif type(func) is cst.Subscript:
                    use(scope, cls, func.value, _CALLED_ITEMS)
                for a in n.args:
                    if a.star == "**":
                        use(scope, cls, a.value, _MAPPING)  # `model(**inputs)`: a mapping
            elif t is cst.Attribute:
                if n.attr.value in ("shape", "ndim", "is_cuda"):
                    use(scope, cls, n.value, _ARRAY)
                elif n.attr.value in _LOADER_ATTRS:
                    use(scope, cls, n.value, _LOADER)
                elif (id(n) not in callees and n.attr.value not in _TENSOR_ATTRS and type(n.value) is cst.Name
                      and n.value.value != "self"):
                    use(scope, cls, n.value, _OBJECT)  # `enc.input_ids`, `model.config`
            elif t is cst.Subscript:
                if self._array_index(n, scope, cls):
                    use(scope, cls, n.value, _ARRAY)
                elif _is_string_index(n):
                    use(scope, cls, n.value, _MAPPING)
            elif t is cst.BinaryOperation:
                self._arith(n, scope, cls)
            elif t is cst.Assign:
                self._assign_use(n, scope, cls)
            stack.extend((c, scope, cls) for c in children(n, trivia=False))

    def _loss_weights(self, call: cst.Call, q: str, scope, cls) -> None:
        """``F.cross_entropy(out, y, weight=w)`` / ``nn.BCEWithLogitsLoss(pos_weight=w)``: a
        loss's class weights are a tensor."""
        last = q.rsplit(".", 1)[-1]
        if not (q.startswith("torch.nn.functional.") or (last.endswith("Loss") and last[:1].isupper())):
            return
        for a in call.args:
            if a.keyword is not None and a.keyword.value in ("weight", "pos_weight"):
                self._use(scope, cls, a.value, TENSOR)

    def _torch_args(self, call: cst.Call, fn: str, scope, cls) -> None:
        if not call.args or call.args[0].keyword is not None or call.args[0].star:
            return
        first = call.args[0].value
        if fn in _CAT_FUNCS and isinstance(first, (cst.List, cst.Tuple)):
            for el in first.elements:
                self._use(scope, cls, el.value, TENSOR)  # torch.cat([x, y]) takes tensors only
        elif fn in TENSOR_FUNCS and fn not in _NOT_TENSOR_ARG:
            self._use(scope, cls, first, _ARRAY)

    def _built_tensor(self, v: Optional[cst.BaseExpression], scope, cls) -> bool:
        """``v`` is a tensor by what builds it or by its assignments (no usage: read while
        usage is being read)."""
        if isinstance(v, cst.Call):
            q = self.names.qualname(v.func)
            return q is not None and (q.startswith("torch.nn.functional.") or (
                q.count(".") == 1 and q.startswith("torch.") and q.rsplit(".", 1)[-1] in TENSOR_FUNCS))
        d = dotted(v) if v is not None else None
        return d is not None and self._evidence_kind(d, scope, cls) == TENSOR

    def _functional_args(self, call: cst.Call, scope, cls) -> None:
        """``F.relu(x)``, ``F.cross_entropy(out, y)``: a functional op takes a tensor first."""
        if call.args and call.args[0].keyword is None and not call.args[0].star:
            self._use(scope, cls, call.args[0].value, TENSOR)

    def _array_index(self, sub: cst.Subscript, scope, cls) -> bool:
        """``x[:, 0]``, ``x[..., 1]``, ``x[idx]`` with a tensor ``idx``: array indexing."""
        if len(sub.slice) > 1:
            return any(isinstance(e.slice, cst.Slice) or (isinstance(e.slice, cst.Index) and (
                isinstance(e.slice.value, cst.Ellipsis) or e.slice.value.__class__ is cst.Name
                and e.slice.value.value == "None")) for e in sub.slice)
        sl = sub.slice[0].slice
        if isinstance(sl, cst.Index):
            v = sl.value
            if isinstance(v, cst.Ellipsis):
                return True
            d = dotted(v)
            if d is not None and self.kinds(d, scope) & {TENSOR}:
                return True
        return False

    def _arith(self, op: cst.BinaryOperation, scope, cls) -> None:
        if isinstance(op.operator, cst.MatrixMultiply):
            self._use(scope, cls, op.left, _ARRAY)
            self._use(scope, cls, op.right, _ARRAY)
        elif isinstance(op.operator, _ARITH):
            for a, b in ((op.left, op.right), (op.right, op.left)):
                db = dotted(b)
                if db is not None and self._evidence_kind(db, scope, cls) in (TENSOR, PARAM):
                    self._use(scope, cls, a, _ARRAY)

    def _evidence_kind(self, d: str, scope, cls) -> Optional[str]:
        ks = set(self.evidence.get((cls, d), ())) if d.startswith("self.") and cls is not None else self.kinds(d, scope)
        if ks and ks <= {TENSOR, PARAM}:
            return TENSOR
        return None

    def _assign_use(self, node: cst.Assign, scope, cls) -> None:
        """``x[k] = x[k].to(d)``: the mapping's items are tensors (unless they are called as Modules);
        ``x[i] = v``: array-like item assignment."""
        v = node.value
        for t in node.targets:
            tgt = t.target
            if not isinstance(tgt, cst.Subscript):
                continue
            if (isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value in CONVERSIONS
                    and isinstance(v.func.value, cst.Subscript) and _is_string_index(tgt)
                    and v.func.value.deep_equals(tgt)):
                self._use(scope, cls, tgt.value, CONTAINER)
            elif self._array_index(tgt, scope, cls):
                self._use(scope, cls, tgt.value, _ARRAY)

    # ---- questions (rules) ------------------------------------------------------------
    def kinds(self, key: str, scope) -> set:
        """Evidence kinds for a dotted name seen from ``scope`` (function first, then global)."""
        out = set(self.evidence.get((scope, key), ()))
        if scope is not None and not out and key.split(".")[0] not in self.names.assigned_in.get(scope, ()):
            out = set(self.evidence.get((None, key), ()))
        return out

    def _name_kinds(self, d: str, scope, cls) -> tuple:
        if d.startswith("self.") and cls is not None:
            ks = set(self.evidence.get((cls, d), ()))
            use = set(self._use_kinds(cls, d))
        else:
            ks = self.kinds(d, scope)
            use = set(self._use_kinds(scope, d))
        return ks, use

    def kind_of(self, expr: cst.CSTNode, scope, cls=None, derive: bool = True) -> Optional[str]:
        """TENSOR / PARAM / MODULE / DEVICE / DTYPE / CONTAINER when the file gives evidence,
        else None (never guess). ``derive=False``: the name's own evidence only (no evidence
        taken from how it is bound, see ``_derived_kind``)."""
        if isinstance(expr, cst.Name) and derive:
            k = self.kind_of(expr, scope, cls, derive=False)
            return k if k is not None else self._derived_kind(expr.value, scope, cls)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            q = self.names.qualname(expr)
            if q is not None:
                last = q.rsplit(".", 1)[-1]
                if q.count(".") == 1 and q.startswith("torch.") and last in _DTYPES:
                    return DTYPE
            if isinstance(expr, cst.Attribute) and expr.attr.value == "device" and q is None:
                return DEVICE
            d = dotted(expr)
            if d is None:
                return None
            ks, use = self._name_kinds(d, scope, cls)
            if TENSOR_CTOR in ks:
                return None  # a constructor, not a value (calling it builds a tensor)
            weak = use & _WEAK
            use -= _WEAK
            if CONTAINER in use and _CALLED_ITEMS not in weak and not ks - {CONTAINER}:
                return CONTAINER
            use.discard(CONTAINER)
            if not ks and use == {TENSOR}:
                return TENSOR
            if not ks and not use and {_ARRAY, _CONVERTED} <= weak:
                return TENSOR  # indexed/shaped like an array and converted with `.to()`: numpy has no `.to`
            ks |= use
            if ks and ks <= {TENSOR, PARAM}:
                return PARAM if PARAM in ks else TENSOR
            if len(ks) == 1 and next(iter(ks)) in (MODULE, DEVICE, CONTAINER):
                return next(iter(ks))
            return None
        if isinstance(expr, cst.Call):
            q = self.names.qualname(expr.func)
            if q is not None:
                last = q.rsplit(".", 1)[-1]
                if q in _PARAMETER:
                    return PARAM
                if q.startswith("torch.nn.functional."):
                    return TENSOR
                if q.startswith("torch.nn.") and last[:1].isupper() and last not in NON_MODULE_NN:
                    return MODULE
                if q.startswith("torchvision.models.") and last[:1].islower():
                    return MODULE
                if q.count(".") == 1 and q.startswith("torch.") and last in TENSOR_FUNCS:
                    return TENSOR
                if q in ("torch.device", "torch.accelerator.current_accelerator"):
                    return DEVICE
                if q == "torch.compile":
                    return self.kind_of(expr.args[0].value, scope, cls) if expr.args else None
                return None
            if isinstance(expr.func, cst.Name):
                if expr.func.value in self.names.module_classes:
                    return MODULE
                # assignment evidence only (usage never makes a constructor): no usage read
                if self.kinds(expr.func.value, scope) == {TENSOR_CTOR}:
                    return TENSOR  # T(...) with T = torch.cuda.FloatTensor if c else torch.FloatTensor
            if isinstance(expr.func, cst.Attribute):
                meth = expr.func.attr.value
                if meth in TENSOR_METHODS:
                    k = self.kind_of(expr.func.value, scope, cls)
                    if k == PARAM:
                        return TENSOR  # conversions of a Parameter are plain tensors
                    if k == TENSOR or (k == MODULE and meth in CONVERSIONS):
                        return k
            return None
        if isinstance(expr, cst.BinaryOperation):
            kl = self.kind_of(expr.left, scope, cls)
            kr = self.kind_of(expr.right, scope, cls)
            if TENSOR in (kl, kr) or PARAM in (kl, kr):
                return TENSOR
            return None
        if isinstance(expr, cst.Subscript):
            k = self.kind_of(expr.value, scope, cls)
            if k in (TENSOR, PARAM, CONTAINER):
                return TENSOR
            d = dotted(expr.value)
            if d is not None and CONTAINER in self.kinds(d, scope):
                return TENSOR
            return None
        return None

    # ---- evidence from how a name is bound (asked only when its own evidence is silent) ----
    def _derived_kind(self, name: str, scope, cls) -> Optional[str]:
        """TENSOR for a name that no assignment or use names, where what binds it shows a
        tensor: a parameter moved like a sibling parameter that is a known tensor
        (``x1.to(d)`` / ``vx1.to(d)``); an item of a tuple batch from a DataLoader with the
        default collate (a loader built in the file, a parameter annotated as one, read as one
        (``loader.dataset``) or passed one by every call in the file); an element of a list
        of tensors; a value unpacked from a function of the file that returns tensors
        (``x, y = split(data)``). A name used as a Module or a mapping (``model(**batch)``,
        ``batch["ids"]``) is never derived: a ``BatchEncoding`` moves in place."""
        if not self.final:
            return None  # the prescan never reads usage
        if scope is not None and name not in self.names.assigned_in.get(scope, ()):
            scope, cls = None, None  # a global read in a function
        key = (scope, name)
        if key in self._derived:
            return self._derived[key]
        if key in self._deriving:
            return None  # a cycle: no evidence
        top = not self._deriving
        self._deriving.add(key)
        try:
            out = self._derive(name, scope, cls)
        finally:
            self._deriving.discard(key)
        if top:  # an answer reached inside another question may have met a cycle: not kept
            self._derived[key] = out
        return out

    def _derive(self, name: str, scope, cls) -> Optional[str]:
        if self.kinds(name, scope) - {_LOADER}:
            return None  # assignments name another kind, or mix kinds
        use = set(self._use_kinds(scope, name))
        if use - {TENSOR, _ARRAY, _CONVERTED}:
            return None  # used as a Module, a mapping, a loader, a container ...
        binds = self._binds.get((scope, name), 0)
        if binds == 1 and self._sibling_of_tensor(name, scope, cls):
            return TENSOR
        sources = [self._loop_item_kind(it, unpacked, scope, cls)
                   for it, unpacked in self._loop_items.get((scope, name), ())]
        sources += [self._unpacked_kind(call, i, scope, c) for call, i, c in self._unpacked.get((scope, name), ())]
        if not sources or len(sources) != binds:
            return None  # another binding (`x = f(x)`) may hold anything
        if all(k == TENSOR for k in sources):
            return TENSOR
        if all(k in (TENSOR, _ARRAY) for k in sources) and _CONVERTED in use:
            return TENSOR  # shaped like an array and converted with `.to()`: numpy has no `.to`
        return None

    def _sibling_of_tensor(self, name: str, scope, cls) -> bool:
        """``name`` is a parameter moved by a statement (``x.to(d)``) exactly like another
        parameter of the same function that is a known tensor."""
        params = self._params.get(scope, ())
        if name not in params or not isinstance(scope, cst.FunctionDef):
            return False
        if self._fn_cls.get(scope) is not None and params and params[0] == name and not any(
                isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in scope.decorators):
            return False  # `self.to(d)`: the instance (an nn.Module moves in place)
        moves = self._moves.get(scope, ())
        mine = [c for n, c in moves if n == name]
        for c in mine:
            for other, oc in moves:
                if (other == name or other not in params or self._binds.get((scope, other), 0) != 1
                        or oc.func.attr.value != c.func.attr.value or not _same_args(oc, c)):
                    continue
                if self.kind_of(cst.Name(other), scope, cls, derive=False) in (TENSOR, PARAM):
                    return not self._passed_non_tensor(name, scope)
        return False

    def _passed_non_tensor(self, name: str, scope: cst.FunctionDef) -> bool:
        """A call of ``scope`` in the file passes something known not to be a tensor for
        ``name`` (``prepare(nn.Linear(2, 2), x, d)``)."""
        g = call_graph(self.names)
        f = g.func_of_node.get(scope)
        if f is None:
            return False
        for call, caller in f.sites:
            a = f.bound_arg(call, name)
            if a is None or a is UNKNOWN_ARG:
                continue
            ccls = self._fn_cls.get(caller) if caller is not None else None
            if self.kind_of(a, caller, ccls, derive=False) not in (None, TENSOR, PARAM):
                return True
        return False

    def _loop_item_kind(self, it: cst.BaseExpression, unpacked: bool, scope, cls) -> Optional[str]:
        it = self._unwrap_progress(it)
        if not unpacked:  # `for t in tensors`
            if isinstance(it, (cst.List, cst.Tuple)):
                ks = {self.kind_of(e.value, scope, cls) for e in it.elements if isinstance(e, cst.Element)}
                return TENSOR if ks and ks <= {TENSOR, PARAM} else None
            if isinstance(it, cst.Call) and self._splits(it, scope, cls):
                return TENSOR
            d = dotted(it)
            if d is None:
                return None
            key = self._key_scope(d, scope, cls)
            vals = self.values.get((key, d), ())
            if self.kind_of(it, scope, cls) != CONTAINER:
                # `ts = []` then `ts.append(torch.ones(2))`: a list built of tensors only
                use = self._use_kinds(key, d)
                if (vals and all(isinstance(v, cst.List) and not v.elements for v in vals)
                        and _APPENDS_TENSOR in use and _APPENDS_OTHER not in use
                        and not self.kinds(d, scope)):
                    return TENSOR
                return None
            if any(isinstance(v, (cst.Dict, cst.DictComp)) for v in vals):
                return None  # iterating a dict gives its keys
            return TENSOR
        # `for x, y in loader`: an item of a tuple batch of the default collate is a tensor, a
        # list or a dict, and of those only a tensor has `.to()` (_ARRAY: a tensor once converted)
        if isinstance(it, cst.Call):
            if self.tensor_loader_kind(it, scope) == TENSOR_LOADER:
                return TENSOR
            return _ARRAY if self._default_loader(it) else None
        if not isinstance(it, cst.Name):
            return None
        return _ARRAY if self._is_loader(it.value, scope, cls) else None

    def _is_loader(self, name: str, scope, cls) -> bool:
        ks = self.kinds(name, scope)
        if ks & {_LOADER, TENSOR_LOADER}:
            return not ks - {_LOADER, TENSOR_LOADER}
        if ks or self._binds.get((scope, name), 0) > 1:
            return False
        if _LOADER in self._use_kinds(scope, name):
            return True  # `len(loader.dataset)`, `loader.sampler.set_epoch(e)`
        params = self._params.get(scope, ())
        if name not in params or not isinstance(scope, cst.FunctionDef):
            return False
        if self._functions.get((None, scope.name.value)) is scope and \
                f"{scope.name.value}.{name}" in self.names.project.loader_params:
            return True  # every call in the project's other files passes a DataLoader (devlint.project)
        if (scope, name) in self._loader_asking:
            return False  # a recursive call passes it on: no evidence
        self._loader_asking.add((scope, name))
        try:
            return self._callers_pass_loader(name, scope)
        finally:
            self._loader_asking.discard((scope, name))

    def _callers_pass_loader(self, name: str, scope) -> bool:
        """Every call of the function ``scope`` in the file passes a loader for ``name``."""
        g = call_graph(self.names)
        f = g.func_of_node.get(scope)
        sites = g.callers_of(scope) if f is not None else None
        if not sites:
            return False
        for call, caller in sites:
            a = f.bound_arg(call, name)
            if a is None or a is UNKNOWN_ARG:
                return False
            if isinstance(a, cst.Call):
                if not (self._default_loader(a) or self.tensor_loader_kind(a, caller) == TENSOR_LOADER):
                    return False
                continue
            if not isinstance(a, cst.Name):
                return False
            ccls = self._fn_cls.get(caller) if caller is not None else None
            if not self._is_loader(a.value, self._scope_of(a.value, caller), ccls):
                return False
        return True

    def _scope_of(self, name: str, scope):
        if scope is not None and name not in self.names.assigned_in.get(scope, ()):
            return None
        return scope

    def loader_items(self, loop: cst.For, scope, cls) -> set:
        """The names ``for x, y in loader`` / ``for i, (x, y) in enumerate(tqdm(loader))`` binds
        to a batch's items, when the iterable is a DataLoader (default collate, evidence of use,
        or what callers pass): host data, fresh every iteration."""
        target, it = loop.target, self._unwrap_progress(loop.iter)  # `tqdm(enumerate(loader))`
        if (isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "enumerate"
                and "enumerate" not in self.names.bound_names and it.args
                and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2):
            target, it = target.elements[1].value, it.args[0].value
        it = self._unwrap_progress(it)
        if isinstance(it, cst.Name) and isinstance(scope, cst.FunctionDef):
            bar = _single_local(scope, it.value)  # `epoch_iterator = tqdm(test_loader)`
            if isinstance(bar, cst.Call) and self._unwrap_progress(bar) is not bar:
                it = self._unwrap_progress(bar)
        if isinstance(it, cst.Call):
            loader = self._default_loader(it) or self.tensor_loader_kind(it, scope) == TENSOR_LOADER
        else:
            loader = isinstance(it, cst.Name) and self._is_loader(it.value, scope, cls)
        if not loader:
            return set()
        if isinstance(target, cst.Name):
            return {target.value}
        if isinstance(target, (cst.Tuple, cst.List)):
            return {e.value.value for e in target.elements if isinstance(e.value, cst.Name)}
        return set()

    def _unwrap_progress(self, it: cst.BaseExpression) -> cst.BaseExpression:
        """``tqdm(loader)``: a progress bar yields what it wraps."""
        if isinstance(it, cst.Call) and it.args and it.args[0].keyword is None and not it.args[0].star:
            q = self.names.qualname(it.func) or ""
            if q.split(".")[0] == "tqdm" and q.rsplit(".", 1)[-1] == "tqdm":
                return it.args[0].value
        return it

    def _splits(self, call: cst.Call, scope, cls) -> bool:
        """``torch.split(x, n)``, ``x.chunk(2)``, ``x.unbind(0)``: a tuple of tensors."""
        q = self.names.qualname(call.func)
        if q is not None:
            return q.count(".") == 1 and q.startswith("torch.") and q.rsplit(".", 1)[-1] in _SPLITS
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _SPLITS:
            return self.kind_of(call.func.value, scope, cls) in (TENSOR, PARAM)
        return False

    def _unpacked_kind(self, call: cst.Call, index: int, scope, cls) -> Optional[str]:
        """The kind of item ``index`` of what ``call`` returns (``x, y = split(data)``)."""
        if self._splits(call, scope, cls):
            return TENSOR
        fn = None
        project = self.names.project.tensor_functions
        if isinstance(call.func, cst.Name) and call.func.value not in self.names.aliases:
            fn = self._functions.get((None, call.func.value))
            fcls = None
        elif isinstance(call.func, cst.Name):
            # `from utils import split_batch`: a project function returning array-likes (devlint.project)
            return _ARRAY if call.func.value in project else None
        elif (isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
              and call.func.value.value == "self" and cls is not None):
            fn = self._functions.get((cls, call.func.attr.value))
            fcls = cls
        elif (isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
              and call.func.value.value in self.names.aliases):
            return _ARRAY if call.func.attr.value in project else None  # `utils.split_batch(b)`
        if fn is None:
            return None
        kinds = self._returns_kinds(fn, fcls)
        return kinds[index] if kinds is not None and index < len(kinds) else None

    def _returns_kinds(self, fn: cst.FunctionDef, cls) -> Optional[tuple]:
        """Per position, TENSOR (every return puts a tensor there) or _ARRAY (a tensor or an
        array slice ``data[:, :3]``), when every return of ``fn`` is a tuple of them."""
        if fn in self._returns_memo:
            return self._returns_memo[fn]
        self._returns_memo[fn] = None  # recursion: no evidence
        out: Optional[list] = None
        for r in _returns(fn.body):
            v = r.value
            if not isinstance(v, (cst.Tuple, cst.List)) or any(isinstance(e, cst.StarredElement) for e in v.elements):
                out = None
                break
            ks = []
            for e in v.elements:
                k = self.kind_of(e.value, fn, cls)
                if k in (TENSOR, PARAM):
                    ks.append(TENSOR)
                elif isinstance(e.value, cst.Subscript) and self._array_index(e.value, fn, cls):
                    ks.append(_ARRAY)
                else:
                    ks.append(None)
            if out is None:
                out = ks
            elif len(out) != len(ks):
                out = None
                break
            else:
                out = [a if a == b else (_ARRAY if {a, b} <= {TENSOR, _ARRAY} else None) for a, b in zip(out, ks)]
        res = tuple(out) if out else None
        self._returns_memo[fn] = res
        return res

    def placement_of(self, expr: cst.CSTNode, scope, cls=None, _depth: int = 0) -> tuple:
        """``(placement, source)``: HOST / ACCEL / FOLLOWS (``source`` is the value whose device
        it follows) / None, for tensors the file builds or moves."""
        if _depth > 8:
            return None, None
        if isinstance(expr, cst.Call):
            q = self.names.qualname(expr.func)
            if q is not None and q.count(".") == 1 and q.startswith("torch."):
                fn = q.rsplit(".", 1)[-1]
                if fn.endswith("_like") and expr.args:
                    dev = call_arg(expr, None, "device")
                    return (self._device_placement(dev.value) if dev is not None
                            else (FOLLOWS, expr.args[0].value))
                if fn in FACTORIES or fn in TENSOR_FUNCS:
                    dev = call_arg(expr, None, "device")
                    if dev is not None:
                        return self._device_placement(dev.value)
                    if fn in FACTORIES:
                        return HOST, None
                    return None, None
            if isinstance(expr.func, cst.Attribute):
                meth, recv = expr.func.attr.value, expr.func.value
                if meth == "cuda":
                    return ACCEL, None
                if meth == "cpu":
                    return HOST, None
                if meth == "to":
                    dev = call_arg(expr, None, "device") or call_arg(expr, 0, None)
                    if dev is None:
                        return self.placement_of(recv, scope, cls, _depth + 1)
                    p = self._device_placement(dev.value)
                    if p[0] is None and self.kind_of(dev.value, scope, cls) in (TENSOR, PARAM):
                        return FOLLOWS, dev.value
                    if p[0] is None and self.kind_of(dev.value, scope, cls) == DTYPE:
                        return self.placement_of(recv, scope, cls, _depth + 1)
                    return p
                if meth in TENSOR_METHODS:
                    return self.placement_of(recv, scope, cls, _depth + 1)
            return None, None
        d = dotted(expr)
        if d is not None:
            key = cls if (d.startswith("self.") and cls is not None) else scope
            vals = self.values.get((key, d), ())
            if not vals and key is not None and d.split(".")[0] not in self.names.assigned_in.get(key, ()):
                vals = self.values.get((None, d), ())
            if len(vals) == 1:
                return self.placement_of(vals[0], key if key is not cls else scope, cls, _depth + 1)
        return None, None

    def on_argument_device(self, expr: cst.CSTNode, fn: cst.FunctionDef) -> bool:
        """``expr`` is built on, or moved to, a device the caller of ``fn`` hands it: a
        parameter (``device=device``), an attribute ``fn`` sets from one (``self.device =
        device``, ``self.device = device if device else torch.device("cpu")``), the ``.device``
        of an argument (``x.device``, ``next(model.parameters()).device``, directly or through a
        local bound to it), or a stack of attributes ``fn`` placed so (``torch.stack([self.lo,
        self.hi])``): it lives where the caller says the model runs, not on the CPU by default."""
        dev = self.explicit_device(expr)
        if dev is None:
            return self._stacks_placed(expr, fn)
        params = {p.name.value for p in (*fn.params.params, *fn.params.kwonly_params)}
        first = fn.params.params[0].name.value if fn.params.params else None
        if isinstance(dev, cst.Name) and dev.value not in params:
            bound = _single_local(fn, dev.value)  # `device = next(m.parameters()).device`
            if bound is not None:
                dev = bound
        if isinstance(dev, cst.Call) and self.names.qualname(dev.func) == "torch.device" and dev.args:
            dev = dev.args[0].value
        if isinstance(dev, cst.Attribute) and dev.attr.value == "device":
            root = _root_name(dev.value)
            if root is not None and root in params and root != first:
                return True  # `x.device` of an argument tensor or module
        if isinstance(dev, cst.Name):
            return dev.value in params
        d = dotted(dev)
        if d is None or d.count(".") != 1 or first is None or d.split(".")[0] != first:
            return False
        for st in statements(fn.body):
            if isinstance(st, cst.Assign) and len(st.targets) == 1 and dotted(st.targets[0].target) == d:
                return self._given(st.value, params)
        return False

    def _given(self, v: cst.BaseExpression, params: set) -> bool:
        """``device``, ``torch.device(device)``, ``device if device else "cpu"``, ``device or "cpu"``:
        a value the caller hands in (with a default when it hands none)."""
        if isinstance(v, cst.Call) and self.names.qualname(v.func) == "torch.device" and v.args:
            v = v.args[0].value
        if isinstance(v, cst.IfExp):
            return self._given(v.body, params) or self._given(v.orelse, params)
        if isinstance(v, cst.BooleanOperation) and isinstance(v.operator, cst.Or):
            return self._given(v.left, params)
        return isinstance(v, cst.Name) and v.value in params

    def _stacks_placed(self, expr: cst.CSTNode, fn: cst.FunctionDef) -> bool:
        """``torch.stack([self.lo, self.hi])`` / ``torch.cat((...))`` of attributes ``fn`` built on a
        device its caller hands it."""
        if not (isinstance(expr, cst.Call) and expr.args and expr.args[0].keyword is None
                and isinstance(expr.args[0].value, (cst.List, cst.Tuple))
                and self.names.qualname(expr.func) in ("torch.stack", "torch.cat", "torch.concat")):
            return False
        elements = expr.args[0].value.elements
        if not elements:
            return False
        for e in elements:
            d = dotted(e.value) if not isinstance(e, cst.StarredElement) else None
            if d is None or d.count(".") != 1:
                return False
            values = [st.value for st in statements(fn.body)
                      if isinstance(st, cst.Assign) and len(st.targets) == 1 and dotted(st.targets[0].target) == d]
            if len(values) != 1 or values[0] is expr or not self.on_argument_device(values[0], fn):
                return False
        return True

    def explicit_device(self, expr: cst.CSTNode) -> Optional[cst.BaseExpression]:
        """The device expression a tensor expression is built on or last moved to, read off
        the expression itself: ``torch.zeros(n, device=d)``, ``t.float().to(d)``,
        ``torch.sqrt(torch.tensor([k])).to(d) * 2`` (``None`` when it names none)."""
        if isinstance(expr, cst.BinaryOperation):
            return self.explicit_device(expr.left) or self.explicit_device(expr.right)
        if isinstance(expr, cst.Subscript):
            return self.explicit_device(expr.value)
        if not isinstance(expr, cst.Call):
            return None
        dev = call_arg(expr, None, "device")
        if dev is not None:
            return dev.value
        if isinstance(expr.func, cst.Attribute):
            meth, recv = expr.func.attr.value, expr.func.value
            if meth == "to":
                a = call_arg(expr, 0, None)
                q = self.names.qualname(a.value) if a is not None else None
                if a is None or (q is not None and q.startswith("torch.") and q != "torch.device"
                                 and not isinstance(a.value, cst.Call)):
                    return self.explicit_device(recv)  # `.to(torch.float16)`: a dtype
                return a.value
            if meth in TENSOR_METHODS:
                return self.explicit_device(recv)
            return None
        q = self.names.qualname(expr.func)
        if q is not None and q.startswith("torch.") and expr.args:
            for a in expr.args:  # `torch.sqrt(torch.tensor([k]).to(d))`
                if a.keyword is None:
                    return self.explicit_device(a.value)
        return None

    def _device_placement(self, dev: cst.BaseExpression) -> tuple:
        s = string_value(dev)
        if s is not None:
            if s == "cpu":
                return HOST, None
            return (ACCEL, None) if s.split(":")[0] in ("cuda", "mps", "xpu", "hpu") else (None, None)
        if isinstance(dev, cst.Attribute) and dev.attr.value == "device":
            return FOLLOWS, dev.value
        if isinstance(dev, cst.Call) and self.names.qualname(dev.func) == "torch.device" and dev.args:
            return self._device_placement(dev.args[0].value)
        return None, None


def _self_conversion(name: str, value: Optional[cst.BaseExpression]) -> bool:
    """``name.to(d)``, ``name.float()``, ``name.pin_memory()``: a conversion of ``name`` itself."""
    return (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in TENSOR_METHODS and isinstance(value.func.value, cst.Name)
            and value.func.value.value == name)


def _same_args(a: cst.Call, b: cst.Call) -> bool:
    return len(a.args) == len(b.args) and all(
        x.keyword is None and y.keyword is None or (x.keyword is not None and y.keyword is not None
                                                    and x.keyword.value == y.keyword.value)
        for x, y in zip(a.args, b.args)) and all(x.value.deep_equals(y.value) for x, y in zip(a.args, b.args))


def _returns(body: cst.BaseSuite):
    """Return statements of a function body, not entering nested functions or classes."""
    stack = [body]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Return):
            yield n
            continue
        if isinstance(n, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(children(n, trivia=False))


_DEFAULT_DEVICE_SETTERS = frozenset({"torch.set_default_device", "torch.set_default_tensor_type"})


def sets_default_device(facts) -> bool:
    """The file points torch's default device away from the CPU (``torch.set_default_device(device)``,
    ``torch.set_default_tensor_type(torch.cuda.HalfTensor)``): a factory without ``device=``
    then allocates on that device, so it is neither a host allocation nor a copy. Computed once."""
    v = getattr(facts, "_sets_default_device", None)
    if v is None:
        v = False
        if b"set_default_device" in facts.source or b"set_default_tensor_type" in facts.source:
            from devlint.walk import nodes
            for n in nodes(facts.module, into_scopes=True):
                if type(n) is cst.Call and facts.qualname(n.func) in _DEFAULT_DEVICE_SETTERS and n.args:
                    arg = n.args[0].value
                    sv = string_value(arg)
                    text = sv if sv is not None else (dotted(arg) or facts.qualname(arg) or "")
                    if facts.qualname(n.func) == "torch.set_default_tensor_type":
                        if "cuda" in text.lower():
                            v = True
                    elif sv is None or sv.lower() != "cpu":
                        v = True
        facts._sets_default_device = v
    return v


def _root_name(node: cst.CSTNode) -> Optional[str]:
    """``model`` for ``next(model.parameters())`` / ``model.fc.weight`` / ``x[0]``."""
    while True:
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Name) and node.func.value in ("next", "iter") and node.args:
                node = node.args[0].value
            else:
                node = node.func
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            return node.value if isinstance(node, cst.Name) else None


def _single_local(fn: cst.FunctionDef, name: str) -> Optional[cst.BaseExpression]:
    """The value of the one statement of ``fn`` that binds local ``name``, when nothing else
    (an augmented assignment, a loop or ``with`` target, an unpacking) binds it."""
    found = []
    for st in statements(fn.body):
        t = type(st)
        if t is cst.Assign:
            for tg in st.targets:
                if type(tg.target) is cst.Name:
                    if tg.target.value == name:
                        found.append(st.value)
                elif _binds(tg.target, name):
                    return None
        elif t in (cst.AugAssign, cst.AnnAssign) and _binds(st.target, name):
            return None
        elif t is cst.For and _binds(st.target, name):
            return None
        elif t is cst.With and any(i.asname is not None and _binds(i.asname.name, name) for i in st.items):
            return None
    return found[0] if len(found) == 1 else None


def _binds(target: cst.CSTNode, name: str) -> bool:
    if type(target) is cst.Name:
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(e.value, name) for e in target.elements)
    if type(target) is cst.StarredElement:
        return _binds(target.value, name)
    return False
