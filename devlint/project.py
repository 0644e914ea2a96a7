"""Project-wide facts: what the rest of the project says about one file.

devlint lints one file at a time, but the reason a line is fine often sits in another file
of the same project: the training scripts that import a helper module all exit when CUDA is
absent; the function a script calls first (``utils.init_distributed_mode(args)``) exits
without a GPU; the checkpoint a script loads was written from host tensors by another script.

Before a file is linted, its **project facts** are computed from cheap summaries of the
project modules around it: the modules it imports (resolved the way Python would for a
script: its own directory, then the project root, relative imports from its package) and the
scripts beside it (its directory and the one above) that import it, directly or through
other project modules. A summary is read with CPython's ``ast`` (a fraction of a LibCST
parse), once per module and content: memoised per process, and kept on disk by content hash
under the lint cache when there is one.

The facts travel in :class:`devlint.settings.Settings` (so they are part of every lint
cache key: editing an imported module changes the key of the files that depend on it) and
reach the rules through the file's evidence model (:mod:`devlint.analysis.guards`,
:mod:`devlint.analysis.checkpoints`); no rule opens a file. Only the questions below are
asked across files; a new one is a field of :class:`ProjectFacts`, a line of
:class:`Summary`, and a read in the analysis model (docs/DEVELOPING.md).
"""

from __future__ import annotations

import ast
import bisect
import functools
import gc
import hashlib
import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field, fields
from typing import Optional

from devlint import lazyre
from devlint.nnbases import is_module_base

SUMMARY_VERSION = 42
# how a dataset class's name ends (``Dataset``, ``InMemoryDataset``, ``ImageFolder``, ``LightningDataModule``)
DATASET_NAMES = ("Dataset", "ImageFolder", "DatasetFolder", "DataModule")


@dataclass(frozen=True)
class ProjectFacts:
    """What the rest of the project says about one file (hashable; part of the cache key)."""

    # every project script that imports this module (one or more) exits, raises or asserts
    # when CUDA is absent, or initialises NCCL: the module runs only on GPUs
    cuda_only: bool = False
    # names of project functions this file imports that exit/raise/assert without CUDA: a
    # call of one makes the rest of its block CUDA-only
    cuda_entry: frozenset = frozenset()
    # checkpoint file names the project saves only from host data
    host_files: frozenset = frozenset()
    # checkpoint file names the project saves (also) from data that may be on a device
    gpu_files: frozenset = frozenset()
    # every checkpoint this file's program (it, its imports, the scripts beside it) saves
    # holds host data, and there is at least one: a file it loads that no save of the project
    # names is one of those (its name came from outside, a command line) or a like one
    host_program: bool = False
    # names of project functions this file imports that return a tuple of array-like values
    # (tensor slices, torch results): `x, y = split_batch(b)` unpacks tensors or arrays
    tensor_functions: frozenset = frozenset()

    # base classes this file imports from the project that descend from nn.Module, as the file
    # spells them (``BaseModel``, ``base.BaseModel``): (name, moves its own attributes (an
    # ``_apply``/``to``/``cuda`` override on the way), attribute names it owns (registers or
    # assigns), every class on the way is the project's or exactly ``nn.Module``)
    module_bases: frozenset = frozenset()
    # the scripts that import this module (and what they import) initialise a process group,
    # always with NCCL: where this module runs distributed, it runs on GPUs
    nccl_only: bool = False
    # CUDA device defaults of this file's functions that a call in another project file leaves in
    # place: ``"Sampler.device"`` (a class's ``__init__``), ``"make_grid.device"``
    defaults_reached: frozenset = frozenset()
    # nn.Module classes this file builds (its own or the project's, as it spells them) that hold no
    # parameter, buffer or stateful submodule: `.cuda()` on one moves nothing
    stateless_modules: frozenset = frozenset()
    # compiled CUDA extensions the project builds, as this file names them: modules a setup.py
    # builds with CUDAExtension (``swin_window_process``), or what a project module binds to
    # ``torch.utils.cpp_extension.load(..., sources=[...".cu"])`` (``from .backend import _backend``)
    extensions: frozenset = frozenset()
    # project functions and classes this file imports (``to_var``, ``Trainer``; a whole module's
    # by their own names) that put values on a device: move their arguments, return placed
    # tensors, place the model they build. A file calling one deals with devices (DL010)
    placing: frozenset = frozenset()
    # parameters of this file's functions that every call in the rest of the project fills with a
    # DataLoader (``"validate.val_loader"``): what a loop over one yields is a host batch
    loader_params: frozenset = frozenset()
    # bases of this file's classes (as spelled) that are project classes built to train on GPUs:
    # one of their methods wraps the model in ``DistributedDataParallel(..., device_ids=[...])``
    # unconditionally, so no instance runs without CUDA
    gpu_bases: frozenset = frozenset()
    # a module this file imports at its top (no condition, no ``try``), directly or through other
    # project modules imported the same way, imports a package with no CPU path or a compiled
    # CUDA extension at its own top: the program cannot even start without CUDA
    cuda_imports: bool = False
    # names of project functions this file imports that answer "is a process group up"
    # (``is_dist_avail_and_initialized``): where the program's groups are NCCL only, true means GPUs
    dist_checks: frozenset = frozenset()
    # attributes of this file's classes (``"Detect.stride"``) that an ``_apply`` override of a
    # project module importing the class moves itself (``self.detect.stride = fn(self.detect.stride)``):
    # ``model.to(device)`` carries them along although they are plain attributes
    applied: frozenset = frozenset()
    # checkpoint files that project modules name in constants this file imports, as
    # ``"res152_path=resnet152-b121ed2d.pth"`` (the name as the file spells it)
    checkpoint_paths: frozenset = frozenset()
    # project functions and classes this file imports and calls whose code saves checkpoints
    # (``EarlyStopping``, ``save_checkpoint``), as the file spells them: a call of one that is
    # handed the path a later load reads is a save of the same run
    savers: frozenset = frozenset()
    # asked only of a script that names no device and defines classes: another project module
    # imports it (its classes may be built and moved there)
    imported: bool = False
    # this file's top-level functions and classes whose every use in the project (a call, or the
    # name handed on) sits where CUDA is required anyway: in a script that requires CUDA first
    # thing, in a program built on a CUDA-only package, or in another such function; at least one
    # use, none in a notebook or a package's exports (``"prepare_batch"``, ``"MatchingNetwork"``)
    cuda_callers: frozenset = frozenset()
    # switches of project modules this file imports (by name or with ``*``) that their module
    # sets once to a literal, as ``"USE_CUDA=1"`` (the name as this file spells it): read
    # unbound here, such a switch is no one's choice, so ``if USE_CUDA: x.cuda()`` always runs
    switches: frozenset = frozenset()
    # project functions this file imports that start a process group with a backend their caller
    # hands them, as ``"setup:2:backend"`` (the name as the file spells it, the positional index
    # or -1, the parameter): ``setup(rank, world_size, "nccl")`` starts an NCCL group
    backend_helpers: frozenset = frozenset()
    # functions this file calls by name, of the project modules it imports or its own, that
    # return a model wrapped in ``DataParallel`` only when their caller asked for GPUs
    # (``Summary.gpu_wrappers``): ``model = create_model(opt)`` then ``model.module.f(...)`` reads
    # an attribute only the wrapper has, so that code runs only on the GPU path
    gpu_wrappers: frozenset = frozenset()
    # checkpoint file names this file spells (``"Ybar_t.pkl"``, templates as ``"step_o_t_*.pkl"``)
    # whose every copy in the project tree is a torch file holding CPU storages only: a data
    # file shipped with the code, which loads anywhere
    host_blobs: frozenset = frozenset()
    # project functions this file imports (as it spells them) that always launch a GPU kernel of
    # their module (``Summary.kernel_functions``): a function of this file always calling one
    # hands it GPU tensors, so it runs only on a GPU
    kernel_functions: frozenset = frozenset()
    # bases of this file's classes (as spelled) that are project classes descending from a dataset
    # (``class Patch3DMatch(Base3DMatch)`` where ``Base3DMatch(Dataset)`` is another module's):
    # what such a class loads and caches is data, as a dataset's is
    dataset_bases: frozenset = frozenset()
    # decorators (as this file spells them: its own, or imported from the project) whose wrapper
    # runs the decorated function only where CUDA is usable (``Summary.gpu_decorators``)
    gpu_decorators: frozenset = frozenset()

    def __bool__(self) -> bool:
        return (self.cuda_only or bool(self.cuda_entry) or bool(self.host_files) or bool(self.gpu_files)
                or self.host_program
                or bool(self.module_bases) or self.nccl_only
                or bool(self.tensor_functions) or bool(self.defaults_reached) or bool(self.stateless_modules)
                or bool(self.extensions) or bool(self.placing) or bool(self.loader_params) or bool(self.gpu_bases)
                or self.cuda_imports or bool(self.dist_checks) or bool(self.applied) or bool(self.savers)
                or bool(self.checkpoint_paths) or self.imported or bool(self.cuda_callers) or bool(self.switches)
                or bool(self.backend_helpers) or bool(self.gpu_wrappers) or bool(self.host_blobs)
                or bool(self.kernel_functions) or bool(self.dataset_bases) or bool(self.gpu_decorators))

    def key(self) -> str:
        return repr((self.cuda_only, sorted(self.cuda_entry), sorted(self.host_files), sorted(self.gpu_files),
                     self.host_program,
                     sorted(self.module_bases), self.nccl_only, sorted(self.tensor_functions),
                     sorted(self.defaults_reached), sorted(self.stateless_modules), sorted(self.extensions),
                     sorted(self.placing), sorted(self.loader_params),
                     sorted(self.gpu_bases), self.cuda_imports, sorted(self.dist_checks), sorted(self.applied),
                     sorted(self.savers), sorted(self.checkpoint_paths), self.imported, sorted(self.cuda_callers),
                     sorted(self.switches), sorted(self.backend_helpers), sorted(self.gpu_wrappers),
                     sorted(self.host_blobs), sorted(self.kernel_functions), sorted(self.dataset_bases),
                     sorted(self.gpu_decorators)))

    def module_base(self, name: Optional[str]):
        """``(moves, owned, plain)`` for a project base class spelled ``name``, else None."""
        for n, moves, owned, plain in self.module_bases:
            if n == name:
                return moves, owned, plain
        return None


NONE = ProjectFacts()


def _facts_to_json(facts: ProjectFacts) -> dict:
    """Every field of ``facts`` as JSON (the lint cache keeps them beside the stamps they were
    read from): a field left out here would make a warm run see less than a cold one."""
    out: dict = {}
    for f in fields(ProjectFacts):
        v = getattr(facts, f.name)
        if f.name == "module_bases":
            out[f.name] = sorted([n, m, sorted(o), p] for n, m, o, p in v)
        elif isinstance(v, frozenset):
            out[f.name] = sorted(v)
        else:
            out[f.name] = v
    return out


def _facts_from_json(fx: dict) -> ProjectFacts:
    """The inverse of :func:`_facts_to_json` (KeyError for an entry written by another version)."""
    kw: dict = {}
    for f in fields(ProjectFacts):
        v = fx[f.name]
        if f.name == "module_bases":
            kw[f.name] = frozenset((n, m, frozenset(o), p) for n, m, o, p in v)
        elif isinstance(f.default, frozenset):
            kw[f.name] = frozenset(v)
        else:
            kw[f.name] = bool(v)
    return ProjectFacts(**kw)


@dataclass
class Summary:
    """The few facts of one module other files may ask about."""

    imports: list = field(default_factory=list)  # [module, level, [[name, alias or None]]] per import
    script: bool = False  # runs code when executed (`__main__` block, top-level calls or loops)
    requires_cuda: bool = False  # running it as a script exits/raises/asserts without CUDA
    cuda_functions: list = field(default_factory=list)  # top-level functions that require CUDA
    # [file name or None, host data?, a model's state?, moved to the host by the saving code?] per torch.save
    saves: list = field(default_factory=list)
    places: bool = False  # places any value on a device
    backends: list = field(default_factory=list)  # per init_process_group call: its backend, or None
    tensor_returns: list = field(default_factory=list)  # top-level functions returning tuples of array-likes
    # top-level functions answering "is a process group up" (``return dist.is_initialized()``,
    # ``if not dist.is_initialized(): return False`` ... ``return True``)
    dist_checks: list = field(default_factory=list)
    # top-level functions and classes whose code calls torch.save (``EarlyStopping``, ``save_model``)
    savers: list = field(default_factory=list)
    # [name, checkpoint file name] per module-level constant naming a checkpoint file
    # (``res152_path = os.path.join(root, "resnet152-b121ed2d.pth")``)
    checkpoint_paths: list = field(default_factory=list)
    # [function, positional index, parameter] per top-level function that starts a process group
    # with the backend its caller hands it (``def setup(rank, ws, backend="gloo"):
    # dist.init_process_group(backend, ...)``): a call handing it ``"nccl"`` starts an NCCL group
    backend_params: list = field(default_factory=list)
    # top-level functions that return a model wrapped in ``DataParallel`` /
    # ``DistributedDataParallel`` only when the caller asked for GPUs (``if len(opt.gpu_ids):
    # model = DataParallel(model, device_ids=opt.gpu_ids)`` ... ``return model``): what reads the
    # result's ``.module`` runs only on that GPU path
    gpu_wrappers: list = field(default_factory=list)
    # top-level functions that always launch a GPU kernel of the module (a ``@triton.jit`` kernel
    # as ``kernel[grid](...)``, a ``@helion.kernel``), or always call one that does
    kernel_functions: list = field(default_factory=list)
    # top-level decorators whose wrapper calls the decorated function only where CUDA is usable
    # (``def run_if_cuda(func): def wrapped(*a): if torch.cuda.is_available(): return func(*a)``)
    gpu_decorators: list = field(default_factory=list)


# ---------------------------------------------------------------------------------
# one module
# ---------------------------------------------------------------------------------

_EXITS = {"exit", "quit", "_exit", "abort"}


def _dotted(node: ast.AST) -> Optional[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _availability(test: ast.AST) -> int:
    """+1 when ``test`` true means CUDA is usable, -1 when its negation does, else 0."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return -_availability(test.operand)
    if isinstance(test, ast.BoolOp):
        pols = [_availability(v) for v in test.values]
        if isinstance(test.op, ast.And):
            return 1 if 1 in pols else 0
        return -1 if -1 in pols else 0
    if isinstance(test, ast.Call):
        d = _dotted(test.func) or ""
        return 1 if d.endswith(("cuda.is_available", "cuda.device_count")) else 0
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Call):
        d = _dotted(test.left.func) or ""
        right = test.comparators[0]
        if d.endswith("cuda.device_count") and isinstance(right, ast.Constant) and right.value == 0:
            if isinstance(test.ops[0], (ast.Eq, ast.LtE)):
                return -1
            if isinstance(test.ops[0], (ast.Gt, ast.NotEq)):
                return 1
    return 0


def _stops(body: list, in_function: bool) -> bool:
    """The block ends the program (raise, sys.exit) or, in a function, returns."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Raise) or (in_function and isinstance(last, ast.Return)):
        return True
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        d = _dotted(last.value.func) or ""
        return d.rsplit(".", 1)[-1] in _EXITS
    return False


# packages with no CPU path: a module importing one at its top runs only with a GPU
CUDA_ONLY_PACKAGES = ("tensorrt", "tensorrt_llm", "torch_tensorrt", "pycuda", "cupy", "apex", "flash_attn", "triton",
                      "cuda", "cutlass", "transformer_engine", "mamba_ssm", "causal_conv1d", "sageattention",
                      "flashinfer", "tinycudann", "unsloth")
# ... of which importing any but ``triton`` (installed with torch on Linux) needs CUDA
_CUDA_ONLY_ROOTS = frozenset(CUDA_ONLY_PACKAGES) - {"triton"}
_TOP_CUDA_ONLY_IMPORT = lazyre.compile(rb"^(?:import|from)[ \t]+(?:" + "|".join(CUDA_ONLY_PACKAGES).encode() + rb")\b",
                                   re.M)

# `CUDAExtension("pkg.name", ...)` / `CUDAExtension(name="name", ...)` in a setup.py
_CUDA_EXTENSION = lazyre.compile(rb"""CUDAExtension\(\s*(?:name\s*=\s*)?["']([\w.]+)["']""")
# `CppExtension('lltm', ['lltm.cpp'])` whose C++ refuses anything but CUDA tensors
# (`TORCH_CHECK(x.device().is_cuda(), ...)`, a `CHECK_CUDA` macro spelled so) and has no CPU branch
_CPP_EXTENSION = lazyre.compile(
    rb"""CppExtension\(\s*(?:name\s*=\s*)?["']([\w.]+)["']\s*,\s*(?:sources\s*=\s*)?\[([^\]]*)\]""")
_QUOTED_SOURCE = lazyre.compile(rb"""["']([^"'\n]+\.(?:cpp|cc|cxx|cu))["']""")
_CUDA_INPUT_CHECK = lazyre.compile(rb"(?:TORCH_CHECK|TORCH_INTERNAL_ASSERT|AT_ASSERTM?|AT_CHECK)[ \t]*\([^;\n]*is_cuda\(\)")
_CPU_BRANCH = lazyre.compile(rb"is_cpu\(\)|kCPU|\w_cpu\b|\bcpu_\w|(?:if|\?)[ \t]*\(?[ \t]*!?[ \t]*[\w.>()-]*is_cuda\(\)")
_CPP_DEFINE = lazyre.compile(rb"^[ \t]*#[ \t]*define[ \t]+(\w+)\([^)]*\)([^\n]*)$", re.M)


def _checks_cuda_inputs(cpp: bytes) -> bool:
    """C++ code that checks a tensor is a CUDA one: the check itself outside a ``#define``, or a
    call of a macro that makes it (``CHECK_CUDA(x)``, ``CHECK_INPUT(x)`` built on it)."""
    defines = {m.group(1): m.group(2) for m in _CPP_DEFINE.finditer(cpp)}
    body = _CPP_DEFINE.sub(b"", cpp)
    if _CUDA_INPUT_CHECK.search(body):
        return True
    checking = {n for n, d in defines.items() if _CUDA_INPUT_CHECK.search(d)}
    for _ in range(3):  # `#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)`
        checking |= {n for n, d in defines.items() if any(re.search(rb"\b" + c + rb"\(", d) for c in checking)}
    return any(re.search(rb"\b" + c + rb"\(", body) for c in checking)


# `ffi = create_extension('_ext.nms', ..., with_cuda=with_cuda)` (torch.utils.ffi, PyTorch <= 0.4):
# CUDA-only when the build has no C source without CUDA (`sources = []`) or raises without CUDA
_FFI_EXTENSION = lazyre.compile(rb"""create_extension\(\s*(?:name\s*=\s*)?["']([\w.]+)["']""")
_FFI_NO_CPU_SOURCE = lazyre.compile(rb"^sources[ \t]*=[ \t]*\[[ \t]*\][ \t]*$", re.M)
_FFI_RAISES_WITHOUT_CUDA = lazyre.compile(rb"^else[ \t]*:[ \t]*\n[ \t]+raise\b", re.M)
# packages no project's setup.py builds: the standard library's and torch's own
_NEVER_BUILT = frozenset(sys.stdlib_module_names) | {"torch", "__future__"}


@functools.lru_cache(maxsize=None)
def _installed_python(name: str) -> bool:
    """Python finds a top-level ``name`` installed as Python source (its spec's origin a ``.py``
    file), without importing it: a package, not a compiled extension."""
    import importlib.util
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return False
    return spec is not None and isinstance(spec.origin, str) and spec.origin.endswith(".py")
_IMPORT_AS = lazyre.compile(rb"^[ \t]*import[ \t]+([\w.]+)(?:[ \t]+as[ \t]+(\w+))?[ \t]*$", re.M)
_FROM_IMPORT = lazyre.compile(rb"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)", re.M)
# `_backend = load(name="_raymarching", sources=[...".cu"])` at a module's top
_LOAD_BOUND = lazyre.compile(rb"^(\w+)[ \t]*=[ \t]*(?:[\w.]*\.)?load\(", re.M)

# a project of more files than this is asked about callers near a definition only
_WHOLE_PROJECT_FILES = 1000

# a parameter defaulting to a CUDA device: worth asking where its function is called
_CUDA_DEFAULT = lazyre.compile(rb"""\bdef\s+\w+\s*\((?:[^()]|\([^()]*\))*?\bdevice\w*\s*(?::[^=,()]*)?=\s*"""
                           rb"""(?:torch\.device\(\s*)?["']cuda""")


def _call_starts(data: bytes, name: bytes) -> list:
    """Where the arguments of each ``name(`` call in ``data`` begin (after the ``(``)."""
    out = []
    i = data.find(name)
    while i >= 0:
        j = i + len(name)
        before = data[i - 1:i]
        if not (before.isalnum() or before == b"_"):
            while data[j:j + 1] in (b" ", b"\t"):
                j += 1
            if data[j:j + 1] == b"(":
                out.append(j + 1)
        i = data.find(name, i + 1)
    return out


def _call_text(data: bytes, start: int, limit: int = 4000) -> bytes:
    """The argument text of the call whose ``(`` ends at ``start`` (up to its closing paren)."""
    depth = 1
    end = min(len(data), start + limit)
    for i in range(start, end):
        c = data[i]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            depth -= 1
            if depth == 0:
                return data[start:i]
    return data[start:end]


def _cuda_default(d: ast.AST) -> bool:
    if isinstance(d, ast.Call) and (_dotted(d.func) or "").endswith("device") and d.args:
        d = d.args[0]
    return isinstance(d, ast.Constant) and isinstance(d.value, str) and d.value.startswith("cuda")


_DEF_HEAD = lazyre.compile(rb"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(", re.M)
_CLASS_LINE = lazyre.compile(rb"^([ \t]*)(class|def|async[ \t]+def)[ \t]+(\w+)")


def _signatures_with_cuda_defaults(source: bytes):
    """(class name or None, ``ast.FunctionDef`` of the signature only, the names of its
    parameters whose default is the CUDA device) for each module-level function or method
    whose signature has a CUDA device default, or whose body fills a ``None`` default with one
    first thing (``if not device: device = "cuda"``): read off the text, each signature parsed
    alone (not the whole module)."""
    fallbacks: dict = {}  # def head offset -> parameters its body falls back to CUDA for
    heads = list(_DEF_HEAD.finditer(source)) if (_CUDA_FALLBACK.search(source) or _CUDA_IFEXP.search(source)) else []
    found = [(fb, fb.group(2) or fb.group(3), fb.group(4)) for fb in _CUDA_FALLBACK.finditer(source)] if heads else []
    found += [(fb, fb.group(2), fb.group(2)) for fb in _CUDA_IFEXP.finditer(source)] if heads else []
    for fb, param, assigned in found:
        if assigned != param:
            continue
        indent = len(fb.group(1).expandtabs())
        head = next((h for h in reversed(heads) if h.start() < fb.start()
                     and len(h.group(1).expandtabs()) < indent), None)
        if head is not None:
            fallbacks.setdefault(head.start(), set()).add(param.decode())
    for m in _DEF_HEAD.finditer(source):
        args = _call_text(source, m.end())
        falls = fallbacks.get(m.start(), set())
        if not falls and _CUDA_DEFAULT.search(b"def f(" + args + b")") is None:
            continue
        try:
            fn = ast.parse(b"def " + m.group(2) + b"(" + args + b"): pass").body[0]
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        owner = _def_owner(source, m)
        if owner in (None, ""):
            continue  # nested in a function or in something else: not reachable by name
        a = fn.args
        params = a.posonlyargs + a.args
        defaults = dict(zip(params[len(params) - len(a.defaults):], a.defaults))
        defaults.update((k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
        cuda = {p.arg for p, d in defaults.items() if _cuda_default(d) or (
            p.arg in falls and isinstance(d, ast.Constant) and d.value is None)}
        if cuda:
            yield (owner if owner is not True else None), fn, cuda


def _def_owner(source: bytes, m):
    """True for a module-level def, its class's name for a method, else "" (nested)."""
    indent = len(m.group(1).expandtabs())
    if not indent:
        return True
    # the nearest line above starting less indented: a class owns the method, a def nests it
    for line in reversed(source[:m.start()].splitlines()):
        stripped = line.strip()
        if not stripped or stripped.startswith((b"#", b"@")):
            continue
        lead = len(line) - len(line.lstrip())
        if lead < indent:
            head = _CLASS_LINE.match(line)
            return head.group(3).decode() if head and head.group(2) == b"class" and lead == 0 else ""
    return ""


# `if not device:` / `if device is None:` followed by `device = "cuda"` (or torch.device("cuda")):
# the default a caller who omits the argument gets
# what _CUDA_DEFAULT and _CUDA_FALLBACK both spell, found fast (its first character is a literal)
_ASSIGNED_CUDA = lazyre.compile(rb"""=[ \t]*(?:torch\.device\([ \t]*)?["']cuda""")
_CUDA_FALLBACK = lazyre.compile(rb"""\n([ \t]+)if[ \t]+(?:not[ \t]+(\w*device\w*)|(\w*device\w*)[ \t]+is[ \t]+None)[ \t]*:"""
                            rb"""[ \t]*\r?\n[ \t]+(\w+)[ \t]*=[ \t]*(?:torch\.device\([ \t]*)?["']cuda""")


# `self.device = device if device is not None else torch.device("cuda", 0)`
_CUDA_IFEXP = lazyre.compile(rb"\n([ \t]+)[\w.]+[ \t]*=[ \t]*(\w*device\w*)[ \t]+if[ \t]+\2[ \t]+is[ \t]+not[ \t]+None"
                         rb"[ \t]+else[ \t]+(?:torch\.device\([ \t]*)?[\"']cuda")


def _literal_backend(value: Optional[ast.AST]) -> Optional[str]:
    """A backend literal, or ``"gloo" if os.name == "nt" else "nccl"`` (``sys.platform``,
    ``platform.system()``): NCCL everywhere but Windows, where it does not exist."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return "nccl" if value.value.lower().startswith("nccl") else value.value.lower()
    if isinstance(value, ast.IfExp):
        pair = {_literal_backend(value.body), _literal_backend(value.orelse)}
        tests = {_dotted(n) for n in ast.walk(value.test) if isinstance(n, (ast.Attribute, ast.Name))}
        if pair == {"gloo", "nccl"} and tests & {"os.name", "sys.platform", "platform.system"}:
            return "nccl"
    return None


def _is_init(value: Optional[ast.AST]) -> bool:
    return isinstance(value, ast.Call) and (_dotted(value.func) or "").endswith("init_process_group")


def _nccl_init(call: ast.Call, local: Optional[dict] = None) -> bool:
    """``init_process_group`` with NCCL: a literal, or a local name bound to one just before."""
    if not _is_init(call):
        return False
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "backend"), None)
    if isinstance(arg, ast.Name) and local:
        return local.get(arg.id) == "nccl"
    return _literal_backend(arg) == "nccl"


def _straight_calls(stmts: list):
    """The calls a block makes as whole statements, with those of the ``try`` bodies in it."""
    for s in stmts:
        if isinstance(s, ast.Try):
            yield from _straight_calls(s.body)
        value = s.value if isinstance(s, (ast.Expr, ast.Assign)) else None
        if isinstance(value, ast.Call):
            yield value


def _pins_gpu(stmts: list) -> bool:
    """The block calls ``torch.cuda.set_device``: with a process group started there, each
    rank owns a GPU, whatever the backend."""
    return any((_dotted(c.func) or "").endswith("cuda.set_device") for c in _straight_calls(stmts))


def _backends(tree: ast.AST, pins: bool = True, flat: Optional[list] = None) -> list:
    """The backend of each ``init_process_group`` call: a literal, or a name the module binds
    to one literal only (``args.dist_backend = "nccl"``, ``--dist-backend`` defaulting to it)."""
    bound: dict = {}
    calls = []
    flat = list(ast.walk(tree)) if flat is None else flat  # every node, walked once
    for n in flat:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
            for t in n.targets:
                d = _dotted(t)
                if d:
                    bound.setdefault(d.rsplit(".", 1)[-1], set()).add(n.value.value.lower())
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.IfExp) and _literal_backend(n.value):
            for t in n.targets:
                d = _dotted(t)
                if d:
                    bound.setdefault(d.rsplit(".", 1)[-1], set()).add(_literal_backend(n.value))
        elif isinstance(n, ast.arguments):  # `def init_dist(launcher, backend="nccl")`
            args = n.posonlyargs + n.args
            pairs = list(zip(args[len(args) - len(n.defaults):], n.defaults)) + [
                (a, d) for a, d in zip(n.kwonlyargs, n.kw_defaults) if d is not None]
            for a, d in pairs:
                if isinstance(d, ast.Constant) and isinstance(d.value, str):
                    bound.setdefault(a.arg, set()).add(d.value.lower())
        elif isinstance(n, ast.Call):
            d = _dotted(n.func) or ""
            if d.endswith("init_process_group"):
                calls.append(n)
            elif d.endswith("add_argument"):
                default = next((k.value for k in n.keywords if k.arg == "default"), None)
                flags = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                dest = next((k.value.value for k in n.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)),
                            None)
                name = dest or next((f for f in flags if f.startswith("--")), flags[0] if flags else "")
                name = str(name).lstrip("-").replace("-", "_")
                if name and isinstance(default, ast.Constant) and isinstance(default.value, str):
                    bound.setdefault(name, set()).add(default.value.lower())
    pinned = set()  # inits in a block that also pins the rank's GPU
    for n in (flat if pins else ()):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt) and _pins_gpu(block):
                pinned.update(id(c) for c in _straight_calls(block) if _is_init(c))
    out = []
    for c in calls:
        arg = c.args[0] if c.args else next((k.value for k in c.keywords if k.arg == "backend"), None)
        b = None
        if id(c) in pinned:
            b = "nccl"
        elif _literal_backend(arg) is not None:
            b = _literal_backend(arg)
        elif arg is not None and _dotted(arg):
            vals = bound.get(_dotted(arg).rsplit(".", 1)[-1], set())
            b = next(iter(vals)) if len(vals) == 1 else None
        out.append("nccl" if b and b.startswith("nccl") else b)
    return out


def _ensures(stmts: list, in_function: bool, ensuring: set) -> bool:
    """Top-level statements that make sure of a GPU before the block can go on."""
    local: dict = {}  # names bound to a backend on the way (`backend = "gloo" if os.name == "nt" else "nccl"`)
    pinned = in_function and _pins_gpu([s for s in stmts if not isinstance(s, ast.Try)])
    for s in stmts:
        if isinstance(s, ast.Assert) and _availability(s.test) == 1:
            return True
        if isinstance(s, ast.If):
            pol = _availability(s.test)
            # only leaving the program (raise, exit) ensures: a function that returns early
            # without CUDA lets its caller go on without it
            if pol == -1 and _stops(s.body, False):
                return True
            if pol == 1 and _stops(s.orelse, False):
                return True
            if _is_main_test(s.test) and _ensures(s.body, False, ensuring):
                return True
            if pol == 0 and in_function and _early_return(s):
                return False  # an early return on another condition: the check may be skipped
            if pol == 0 and in_function and _branches_ensure(s, ensuring):
                return True
        if in_function and isinstance(s, (ast.If, ast.Try, ast.With, ast.For, ast.While)) and _returns_within(s):
            return False  # `try: ... if world_size < 2: return None`: the function may leave before the check
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            b = _literal_backend(s.value)
            if b is not None:
                local[s.targets[0].id] = b
        value = s.value if isinstance(s, (ast.Expr, ast.Assign)) else None
        if isinstance(value, ast.Call):
            if _nccl_init(value, local) or (pinned and _is_init(value)) or _gpu_only_call(value) or _cuda_mesh(value):
                return True
            # a call of one of the file's own functions (`model.train()` runs no `def train`)
            if isinstance(value.func, ast.Name) and value.func.id in ensuring:
                return True
        if in_function and isinstance(s, ast.Return):
            return False
    return False


# library calls with no CPU path: faiss's GPU index API is absent from a CPU build of faiss
# (AttributeError) and fails without a device in a GPU build, so what follows such a call runs
# only with a GPU (a library's documented behaviour, like diffusers' xformers switch in guards.py)
_GPU_ONLY_CALLS = {"faiss": frozenset({
    "index_cpu_to_all_gpus", "index_cpu_to_gpu", "index_cpu_to_gpu_multiple", "index_cpu_to_gpus_list",
    "StandardGpuResources", "GpuIndexFlatL2", "GpuIndexFlatIP", "GpuIndexIVFFlat", "GpuIndexIVFPQ",
    "GpuIndexIVFScalarQuantizer"})}


def _cuda_mesh(call: ast.Call) -> bool:
    """``init_device_mesh("cuda", ...)`` (see ``guards.cuda_mesh``): it raises without a GPU."""
    if not (_dotted(call.func) or "").endswith("init_device_mesh"):
        return False
    a = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device_type"), None)
    return isinstance(a, ast.Constant) and a.value == "cuda"


def _gpu_only_call(call: ast.Call) -> bool:
    d = _dotted(call.func)
    head, _, rest = (d or "").partition(".")
    return rest in _GPU_ONLY_CALLS.get(head, ())


def _returns_within(s: ast.stmt) -> bool:
    """A ``return`` somewhere in the compound statement (not in a function or class it defines)."""
    stack = list(ast.iter_child_nodes(s))
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Return):
            return True
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(n))
    return False


def _early_return(s: ast.If) -> bool:
    """A branch of the ``if`` / ``elif`` / ``else`` chain ends in ``return``."""
    if s.body and isinstance(s.body[-1], ast.Return):
        return True
    if len(s.orelse) == 1 and isinstance(s.orelse[0], ast.If):
        return _early_return(s.orelse[0])
    return bool(s.orelse) and isinstance(s.orelse[-1], ast.Return)


def _branches_ensure(s: ast.If, ensuring: set) -> bool:
    """``if launcher == "pytorch": <GPU setup> elif launcher == "slurm": <GPU setup> else:
    raise``: every way past the chain made sure of a GPU."""
    if not _ensures(s.body, True, ensuring) or not s.orelse:
        return False
    if len(s.orelse) == 1 and isinstance(s.orelse[0], ast.If):
        return _branches_ensure(s.orelse[0], ensuring) or _ensures(s.orelse, True, ensuring)
    return _ensures(s.orelse, True, ensuring) or isinstance(s.orelse[-1], ast.Raise)


@dataclass
class _Calls:
    """What a module's functions and script body call first (for requirements that run
    through other modules: ``main()`` -> ``setup()`` -> ``distributed.enable()``)."""

    functions: set  # top-level function names, and methods of top-level classes as `Class.method`
    ensuring: set  # of them, those that require CUDA by their own code
    first: dict  # function name -> callees (dotted, as spelled) of its unconditional top-level calls
    #              (a method called on an instance the block made, `bank = MemoryBank(n)` then
    #              `bank.mine()`, is spelled `MemoryBank.mine`)
    main: list  # callees of the script body's unconditional calls (module level and `__main__` block)


def _first_calls(stmts: list, in_function: bool) -> list:
    """Callees of the calls a block makes unconditionally, up to its first (early) return."""
    out = []
    made: dict = {}  # name -> the callee whose result the block bound to it (`bank = MemoryBank(n)`)

    def spelled(call: ast.Call) -> Optional[str]:
        d = _dotted(call.func)
        head, _, rest = (d or "").partition(".")
        if rest and "." not in rest and head in made:
            return f"{made[head]}.{rest}"  # `bank.mine()`: the method of what made `bank`
        return d

    for s in stmts:
        if isinstance(s, ast.If):
            if _is_main_test(s.test):
                out += _first_calls(s.body, False)
                continue
            if in_function and s.body and isinstance(s.body[-1], ast.Return):
                break
            continue
        if in_function and isinstance(s, ast.Return):
            if isinstance(s.value, ast.Call):
                d = _dotted(s.value.func)
                if d:
                    out.append(d)
            break
        value = s.value if isinstance(s, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Call):
            if isinstance(value.func, ast.Call):  # `sys.exit(main(args))`
                value = value.func
            for call in (value, *(a for a in value.args if isinstance(a, ast.Call))):
                d = spelled(call)
                if d:
                    out.append(d)
        for target in (s.targets if isinstance(s, ast.Assign) else [s.target] if isinstance(s, ast.AnnAssign) else []):
            if isinstance(target, ast.Name):  # the latest binding wins
                made.pop(target.id, None)
                if isinstance(value, ast.Call) and _dotted(value.func):
                    made[target.id] = _dotted(value.func)
    return out


_PARSED: dict = {}  # a module's text -> its ast, or the error parsing it raised (the latest few)


def _parsed(source: bytes) -> ast.Module:
    """``ast.parse(source)``, once per text in a run: the index asks several questions of one
    module's ``ast`` (its summary, its calls, its callers' arguments). Callers only read the tree."""
    hit = _PARSED.get(source)
    if hit is None:
        if len(_PARSED) >= 16:  # (a module's questions come close together; trees are large)
            _PARSED.clear()
        try:
            hit = ast.parse(source)
        except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
            hit = e
        _PARSED[source] = hit
    if isinstance(hit, BaseException):
        raise hit
    return hit


def _calls_summary(source: bytes) -> Optional[_Calls]:
    try:
        tree = _parsed(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    funcs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for c in tree.body:
        if isinstance(c, ast.ClassDef):
            funcs.update({f"{c.name}.{m.name}": m for m in c.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))})
    ensuring: set = set()
    for _ in range(2):  # a second pass only where the first found one (its callers may follow)
        before = len(ensuring)
        for name, fn in funcs.items():
            if name not in ensuring and _ensures(fn.body, True, ensuring):
                ensuring.add(name)
        if len(ensuring) == before:
            break
    return _Calls(set(funcs), ensuring, {name: _first_calls(fn.body, True) for name, fn in funcs.items()},
                  _first_calls(tree.body, False))


def _is_main_test(test: ast.AST) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


def _top_level(body: list):
    """Module-level statements, also those inside top-level ``try`` / ``with`` / ``if`` blocks."""
    for n in body:
        yield n
        if isinstance(n, (ast.Try, ast.With)):
            yield from _top_level(n.body)
        elif isinstance(n, ast.If) and not _is_main_test(n.test):
            yield from _top_level(n.body)
            yield from _top_level(n.orelse)


_CHECKPOINT_FILE = lazyre.compile(rb"\.(?:pth|pt|ckpt|pkl|bin|tar)[\"']")


_FORMAT_FIELD = lazyre.compile(r"\{[^{}]*\}")
_PERCENT_FIELD = lazyre.compile(r"%(?:\([^)]*\))?[-+ #0]*\d*(?:\.\d+)?[sdifrx]")


def name_template(fmt: str, style: str) -> Optional[str]:
    """The file name a formatted path ends in, its fields as ``*``: ``"{}/utt2embedding.pt"``
    (``str.format``), ``"%s/clean_data_%s_%s.pth"`` (``%``), an f-string's text with its fields
    already ``*``. ``None`` when too little of the name is spelled to tell one file from
    another (``"%s.pth"``, ``"{}_{}.pt"``): at least three letters or digits besides the
    extension."""
    if style == "format":
        fmt = _FORMAT_FIELD.sub("*", fmt.replace("{{", "(").replace("}}", ")"))
    elif style == "percent":
        fmt = _PERCENT_FIELD.sub("*", fmt.replace("%%", "%"))
    name = fmt.replace("\\", "/").rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return name if len(re.sub(r"[^A-Za-z0-9]", "", stem)) >= 3 else None


def same_file(a: str, b: str) -> bool:
    """Two spelled file names name the same file: equal, or one a template (``*`` fields)
    the other fills in."""
    if a == b:
        return True
    if "*" not in a and "*" not in b:
        return False
    for t, n in ((a, b), (b, a)):
        if "*" in t and re.fullmatch(".+?".join(re.escape(x) for x in t.split("*")), n):
            return True
    return False


def _save_name(target: ast.AST) -> Optional[str]:
    """The file name a save/load path ends in, when the code spells it: ``"m.pt"``,
    ``os.path.join(d, "m.pt")``, ``d + "/m.pt"``, ``f"{d}/m.pt"``, ``out_dir / "m.pt"`` (pathlib),
    and formatted names as templates (:func:`name_template`): ``"{}/m.pt".format(d)``,
    ``"%s/m_%d.pt" % (d, i)``, ``f"{d}/m_{i}.pt"``."""
    if isinstance(target, ast.Constant) and isinstance(target.value, str):
        return os.path.basename(target.value) or None
    if (isinstance(target, ast.Call) and isinstance(target.func, ast.Attribute) and target.func.attr == "format"
            and isinstance(target.func.value, ast.Constant) and isinstance(target.func.value.value, str)):
        return name_template(target.func.value.value, "format")
    if (isinstance(target, ast.BinOp) and isinstance(target.op, ast.Mod) and isinstance(target.left, ast.Constant)
            and isinstance(target.left.value, str)):
        return name_template(target.left.value, "percent")
    if isinstance(target, ast.Call) and target.args and (_dotted(target.func) or "").endswith("join"):
        return _save_name(target.args[-1])
    if isinstance(target, ast.BinOp) and isinstance(target.op, ast.Add):
        return _save_name(target.right)
    if (isinstance(target, ast.BinOp) and isinstance(target.op, ast.Div) and isinstance(target.right, ast.Constant)
            and isinstance(target.right.value, str)):
        return _save_name(target.right)  # a pathlib join: only a string on the right of `/` is one
    if isinstance(target, ast.JoinedStr) and target.values and isinstance(target.values[-1], ast.Constant):
        return name_template("".join(str(v.value) if isinstance(v, ast.Constant) else "*" for v in target.values),
                             "fstring")
    return None


def _bound_path(target: ast.AST, fn: Optional[ast.AST]) -> ast.AST:
    """A save's path spelled as a name the saving function binds once (``gt_path = save_dir /
    "gt.pt"``): what it is bound to; else the path as spelled."""
    if isinstance(target, ast.Name) and fn is not None:
        values = [n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == target.id for t in n.targets)]
        if len(values) == 1:
            return values[0]
    return target


def _bound_paths(target: ast.AST, fn: Optional[ast.AST]) -> list:
    """:func:`_bound_path`, and for a name the saving function binds to one of several spelled
    file names (``output_file = "a.pth"`` in one branch, ``"b.pth"`` in the other): each of them."""
    if isinstance(target, ast.Name) and fn is not None:
        values = [n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == target.id for t in n.targets)]
        if len(values) > 1 and all(_save_name(v) is not None for v in values):
            return values
    return [_bound_path(target, fn)]


def _fresh_module(obj: ast.AST, fn: Optional[ast.AST], classes: set) -> bool:
    """``best.state_dict()`` (or ``best``) where the saving function binds ``best`` only to a
    new instance of a class the module defines (``best = Net(n)``, then maybe
    ``best.load_state_dict(model.state_dict())``, which copies into its own tensors): in a
    module that places nothing, a model built on the host and kept there."""
    if isinstance(obj, ast.Call) and isinstance(obj.func, ast.Attribute) and obj.func.attr == "state_dict" \
            and not obj.args:
        obj = obj.func.value
    if not (isinstance(obj, ast.Name) and fn is not None and classes):
        return False
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and obj.id in {
            a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}:
        return False
    binds = []
    for n in ast.walk(fn):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if any(isinstance(x, ast.Name) and x.id == obj.id for x in ast.walk(t)):
                    binds.append(n.value if isinstance(t, ast.Name) else None)
        elif isinstance(n, (ast.For, ast.With, ast.comprehension)):
            tgt = n.target if not isinstance(n, ast.With) else None
            items = [tgt] if tgt is not None else [i.optional_vars for i in n.items if i.optional_vars is not None]
            if any(isinstance(x, ast.Name) and x.id == obj.id for t in items for x in ast.walk(t)):
                binds.append(None)
    made = [b for b in binds if not (isinstance(b, ast.Constant) and b.value is None)]  # (`best = None` first)
    return bool(made) and all(isinstance(b, ast.Call) and isinstance(b.func, ast.Name) and b.func.id in classes
                              for b in made)


def _model_state(obj: ast.AST, built: set) -> bool:
    """A model checkpoint: ``m.state_dict()``, a dict holding one, or a name bound to a
    constructor call (``decoder = CharRNN(...)``); not a vocabulary or a data cache."""
    if isinstance(obj, ast.Call) and isinstance(obj.func, ast.Attribute) and obj.func.attr == "state_dict":
        return True
    if isinstance(obj, ast.Dict):
        return any(v is not None and _model_state(v, built) for v in obj.values)
    return isinstance(obj, ast.Name) and obj.id in built


_JOINS = ("cat", "concat", "concatenate", "stack", "vstack", "hstack")


def _cache_save(obj: ast.AST, target: Optional[ast.AST], fn: Optional[ast.AST]) -> bool:
    """The cache idiom: ``if os.path.exists(p): x = torch.load(p)`` whose ``else`` builds the
    value and saves it to ``p`` (or ``if not os.path.isfile(p): ...; torch.save(v, p)`` and a load
    of ``p`` after it), the saving branch placing nothing: the file holds what this code builds
    on the host (devlint.analysis.checkpoints.cache_written_beside reads the same idiom in a file)."""
    if fn is None or target is None:
        return False
    want = ast.dump(target)
    for node in ast.walk(fn):
        if not isinstance(node, ast.If):
            continue
        pol = _exists_polarity(node.test, want)
        if pol == 0:
            continue
        found, missing = (node.body, node.orelse) if pol > 0 else (node.orelse, node.body)
        if not any(n is obj for st in missing for n in ast.walk(st)):
            continue
        if any(isinstance(n, ast.Call) and _places(n) for st in missing for n in ast.walk(st)):
            return False
        # the other branch loads the file (for `if not exists(p)`, the function loads it anyway)
        where = found if pol > 0 or found else [fn]
        return any(isinstance(n, ast.Call) and (_dotted(n.func) or "").endswith("load") and n.args
                   and ast.dump(n.args[0]) == want for st in where for n in ast.walk(st))
    return False


def _exists_polarity(test: ast.AST, want: str) -> int:
    """+1 for ``os.path.exists(p)`` / ``isfile(p)`` / ``Path(p).exists()`` of the path ``want``
    (an ``ast.dump``), -1 for its ``not``, else 0."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return -_exists_polarity(test.operand, want)
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute)):
        return 0
    name = test.func.attr
    if name in ("exists", "isfile") and test.args and ast.dump(test.args[0]) == want:
        return 1
    inner = test.func.value
    if (name in ("exists", "is_file") and not test.args and isinstance(inner, ast.Call) and inner.args
            and ast.dump(inner.args[0]) == want):
        return 1
    return 0


def _host_object(obj: ast.AST, fn: Optional[ast.AST] = None, target: Optional[ast.AST] = None) -> bool:
    """``x.cpu()``, ``net.cpu().state_dict()``, ``x.to("cpu").half()``, a dict of those, or a
    list/dict the saving function builds empty and fills only with those: moved off the device
    by the saving code. Also a name the function binds only to such a list joined
    (``torch.cat(rows)``) or to what it loads from the very file it saves to (``target``)."""
    if _host_copy(obj):
        return True
    if isinstance(obj, ast.Name) and fn is not None:
        values = [n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == obj.id for t in n.targets)]
        joined = [v for v in values if isinstance(v, ast.Call) and v.args and isinstance(v.args[0], ast.Name)
                  and (_dotted(v.func) or "").rsplit(".", 1)[-1] in _JOINS]
        reloaded = [v for v in values if target is not None and isinstance(v, ast.Call) and v.args
                    and (_dotted(v.func) or "").endswith("load") and ast.dump(v.args[0]) == ast.dump(target)]
        if joined and len(joined) + len(reloaded) == len(values) and all(
                v.args[0].id != obj.id and _host_object(v.args[0], fn) for v in joined):
            return True
    if isinstance(obj, ast.Dict):
        return bool(obj.values) and all(v is not None and (_host_copy(v) or _plain_number(v)) for v in obj.values)
    if not (isinstance(obj, ast.Name) and fn is not None):
        return False
    if _accumulated_on_host(obj.id, fn):
        return True
    binds, stored = [], []
    for n in ast.walk(fn):
        if isinstance(n, ast.AnnAssign) and n.value is not None and isinstance(n.target, ast.Name) \
                and n.target.id == obj.id:
            binds.append(n.value)  # `rows: List[torch.Tensor] = []`
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name) and t.id == obj.id:
                    binds.append(n.value)
                elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == obj.id:
                    stored.append(n.value)
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
              and n.func.value.id == obj.id and n.func.attr in ("append", "extend", "update", "insert")):
            stored.append(n.args[-1] if n.func.attr == "append" and n.args else None)
    empty = all((isinstance(b, (ast.List, ast.Tuple)) and not b.elts) or (isinstance(b, ast.Dict) and not b.keys)
                or (isinstance(b, ast.Call) and not b.args and _dotted(b.func) in ("list", "dict", "OrderedDict"))
                for b in binds)
    return bool(binds) and empty and bool(stored) and all(v is not None and _host_copy(v) for v in stored)


_STOP_WORDS = (b"assert", b"raise", b"exit", b"quit", b"abort")


def _may_ensure(source: bytes) -> bool:
    """A cheap gate before :func:`_ensures` reads a module's ``ast``: an NCCL group or a CUDA
    device mesh, faiss's GPU API, or an availability check beside something that stops the program."""
    return b"init_process_group" in source or b"faiss" in source or b"init_device_mesh" in source or (
        (b"is_available" in source or b"device_count" in source) and any(w in source for w in _STOP_WORDS))


def _host_mapped(load: ast.Call) -> bool:
    """``torch.load(p, map_location="cpu")`` (also ``torch.device("cpu")``, ``{"cuda:0": "cpu"}``,
    ``lambda storage, loc: storage``): every tensor it returns is on the host."""
    m = next((k.value for k in load.keywords if k.arg == "map_location"),
             load.args[1] if len(load.args) > 1 else None)
    if m is None:
        return False
    if isinstance(m, ast.Call) and (_dotted(m.func) or "").endswith("device") and len(m.args) == 1:
        m = m.args[0]
    if isinstance(m, ast.Constant):
        return m.value == "cpu"
    if isinstance(m, ast.Dict):
        return bool(m.values) and all(isinstance(v, ast.Constant) and v.value == "cpu" for v in m.values)
    if isinstance(m, ast.Lambda):  # `lambda storage, loc: storage`: the storage as deserialised on the host
        params = m.args.args
        return bool(params) and isinstance(m.body, ast.Name) and m.body.id == params[0].arg
    return False


def _accumulated_on_host(name: str, fn: ast.AST) -> bool:
    """``tot = 0`` ... ``tot = x.cpu()`` / ``tot = torch.cat((tot, x.cpu()), 0)`` ...
    ``tot = torch.index_select(tot, 0, idx)``: every binding of ``name`` in ``fn`` is a host copy,
    a plain number, a join of itself with host copies, or a selection from itself (which stays
    where it is), and one is a host copy: the tensor it ends as lives on the host."""
    values: list = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    values.append(n.value)
                elif isinstance(t, (ast.Tuple, ast.List)) and any(isinstance(e, ast.Name) and e.id == name
                                                                  for e in t.elts):
                    if not (isinstance(n.value, (ast.Tuple, ast.List)) and len(n.value.elts) == len(t.elts)):
                        return False  # `a, tot = f()`: unknown
                    values += [v for e, v in zip(t.elts, n.value.elts) if isinstance(e, ast.Name) and e.id == name]
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For, ast.comprehension, ast.NamedExpr)) \
                and any(isinstance(x, ast.Name) and x.id == name for x in ast.walk(n.target)):
            return False
        elif isinstance(n, ast.withitem) and n.optional_vars is not None and any(
                isinstance(x, ast.Name) and x.id == name for x in ast.walk(n.optional_vars)):
            return False
    host = False
    for v in values:
        if _host_copy(v):
            host = True
        elif _plain_number(v) or (isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name) and v.value.id == name):
            continue
        elif isinstance(v, ast.Call) and v.args and (_dotted(v.func) or "").rsplit(".", 1)[-1] in _JOINS \
                and isinstance(v.args[0], (ast.Tuple, ast.List)) and v.args[0].elts and all(
                    (isinstance(e, ast.Name) and e.id == name) or _host_copy(e) for e in v.args[0].elts):
            host = host or any(_host_copy(e) for e in v.args[0].elts)
        elif isinstance(v, ast.Call) and v.args and (_dotted(v.func) or "") == "torch.index_select" \
                and isinstance(v.args[0], ast.Name) and v.args[0].id == name:
            continue
        else:
            return False
    return host


def _plain_number(e: ast.AST) -> bool:
    """``epoch + 1``, ``0.5``, ``"resnet"``, ``len(x)``, ``loss.item()``: a Python number or string,
    no tensor (a name alone is not: it may hold anything)."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float, str, bool)) or e.value is None
    if isinstance(e, ast.BinOp):
        sides = (e.left, e.right)
        return any(isinstance(x, ast.Constant) and isinstance(x.value, (int, float)) for x in sides) and all(
            isinstance(x, (ast.Name, ast.Attribute)) or _plain_number(x) for x in sides)
    if isinstance(e, ast.Call):
        if isinstance(e.func, ast.Name) and e.func.id in ("int", "float", "len", "round", "str", "bool"):
            return True
        return isinstance(e.func, ast.Attribute) and e.func.attr in ("item", "tolist") and not e.args
    return False


_KEEPS_PLACE = frozenset({"detach", "clone", "contiguous", "half", "float", "double", "bfloat16", "to", "state_dict"})


def _host_copy(e: ast.AST) -> bool:
    """A call chain through a move to the host: ``x.cpu()``, ``x.to("cpu").half()``."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        if e.func.attr == "cpu" and not e.args:
            return True
        if e.func.attr == "to" and e.args and isinstance(e.args[0], ast.Constant) and e.args[0].value == "cpu":
            return True
        if e.func.attr not in _KEEPS_PLACE:
            return False
        e = e.func.value
    return False


_OLD_ASYNC = lazyre.compile(rb"\basync\s*=(?!=)")
_SAVE_WORDS = (b"save(",)

# a Cog (Replicate) predictor and its build file's GPU switch (`build:` / `  gpu: true`)
_COG_IMPORT = lazyre.compile(rb"^[ \t]*(?:from[ \t]+cog[ \t]+import|import[ \t]+cog\b)", re.M)
_COG_GPU = lazyre.compile(rb"^[ \t]+gpu:[ \t]*true[ \t]*(?:#.*)?\r?$", re.M | re.I)
_AVAILABILITY_WORDS = (b"is_available", b"device_count", b"init_process_group", b"faiss", b"init_device_mesh")
_INIT_WORDS = (b"init_process_group",)
# DL005 asks about `torch.load` / `torch.jit.load` calls only: a file that spells none (however it
# names torch: `th.load(`, `from torch import load`) needs no checkpoint facts
_LOAD_CALL = lazyre.compile(rb"\.[ \t]*load[ \t]*\(")
_RECEIVER_END = lazyre.compile(rb"(\w+)[ \t]*$")
_LOAD_IMPORTED = lazyre.compile(rb"\n[ \t]*from[ \t]+torch[\w.]*[ \t]+import[^\n]*\bload\b")
_TORCH_MODULES_AS = lazyre.compile(rb"^[ \t]*(?:import[ \t]+torch[\w.]*|from[ \t]+torch[\w.]*[ \t]+import[ \t]+\w+)"
                               rb"[ \t]+as[ \t]+(\w+)", re.M)


def _calls_any(source: bytes, names: list) -> bool:
    """Whether the text calls one of ``names`` (``name(``, a gate before a summary is read)."""
    names = [n for n in names if n != "*"]
    if not names:
        return True  # `from m import *`: anything may be called
    pattern = rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in names) + rb")[ \t]*\("
    return re.search(pattern, source) is not None


def _loads_checkpoint(source: bytes) -> bool:
    """Whether the text may call ``torch.load`` or ``torch.jit.load`` (a superset: a gate)."""
    if b"load" not in source:
        return False
    if b"from torch" in source and _LOAD_IMPORTED.search(b"\n" + source):
        return True
    receivers = set()
    for m in _LOAD_CALL.finditer(source):  # the literal first, then the name before it
        r = _RECEIVER_END.search(source, max(0, m.start() - 80), m.start())
        if r is not None:
            receivers.add(r.group(1))
    return bool(receivers & {b"torch", b"jit", b"serialization"}
                or receivers and receivers & set(_TORCH_MODULES_AS.findall(source)))
# code that deals with devices spells one of these (DL010 asks whether a file does)
DEVICE_WORDS = lazyre.compile(rb"cuda|device|accelerator|mps|xpu|xla|hpu|npu|map_location|\.to\(")
# ... and these, spelled, are nearly always code that places values (prose says "device")
_PLACES_IN_CODE = (b".cuda(", b".to(", b".device(", b"map_location", b"accelerator")
_DEVICE_KEYWORD = lazyre.compile(rb"device\s*=")


def _places_in_code(source: bytes) -> bool:
    return any(w in source for w in _PLACES_IN_CODE) or (
        b"device" in source and _DEVICE_KEYWORD.search(source) is not None)
_DTYPE_WORDS = lazyre.compile(r"float|half|int|long|bool|double|bfloat|complex|uint")


def _dtype_params(tree: ast.AST) -> frozenset:
    """Names of function parameters that hold a dtype (``dtype: torch.dtype = torch.float32``):
    ``.to(dtype)`` of one casts, it places nothing."""
    out = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = fn.args.posonlyargs + fn.args.args
            defaults = [None] * (len(args) - len(fn.args.defaults)) + list(fn.args.defaults)
            for a, d in list(zip(args, defaults)) + list(zip(fn.args.kwonlyargs, fn.args.kw_defaults)):
                ann = _dotted(a.annotation) if a.annotation is not None else None
                dflt = _dotted(d) if d is not None else None
                if ann in ("torch.dtype", "dtype") or (
                        dflt and dflt.startswith("torch.") and _DTYPE_WORDS.search(dflt.rsplit(".", 1)[-1])):
                    out.add(a.arg)
    return frozenset(out)


def _places(call: ast.Call, dtypes: frozenset = frozenset()) -> bool:
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "cuda":
        return True
    for k in call.keywords:
        if k.arg == "device" and not (isinstance(k.value, ast.Constant) and k.value.value == "cpu"):
            return True
    if isinstance(f, ast.Attribute) and f.attr == "to" and call.args:
        a = call.args[0]
        if isinstance(a, ast.Constant):
            return isinstance(a.value, str) and a.value != "cpu"
        if isinstance(a, ast.Name) and a.id in dtypes:
            return False
        d = _dotted(a) or ""
        return not (d.startswith("torch.") and _DTYPE_WORDS.search(d.rsplit(".", 1)[-1]))
    return (_dotted(f) or "").endswith(("DataParallel", "DistributedDataParallel"))


# A module none of whose lines can bear on a CUDA requirement or a checkpoint needs no parse:
# its imports and whether it runs as a script are read off its text (most of a library).
_NEEDS_AST = lazyre.compile(rb"is_available|device_count|init_process_group|init_device_mesh|is_initialized|\.save\(|\.(?:pth|pt|ckpt)[\"']")
# a return of slices or torch results (see _tensor_returns): worth a parse
_TENSOR_RETURN = lazyre.compile(rb"^[ \t]+return[ \t][^\n]*(?:\[[ \t]*:|\.(?:chunk|split|unbind|tensor_split)\(|torch\.)",
                            re.M)
# a statement that converts a plain name and throws the result away (DL001 asks what it is)
# (Patterns read at a line's start but searched often over whole modules are spelled `\n...` and
# searched in `b"\n" + source`, not `^...` under re.M: a literal first character lets the regex
# engine skip ahead, where `^` is tried at every offset, several times slower on a large module.)
_CONVERSION_CALL = lazyre.compile(rb"\.(?:to|cuda|cpu|half|float|double|bfloat16|long|int|pin_memory)\(")
_BARE_RECEIVER = lazyre.compile(rb"[ \t]*[A-Za-z_]\w*")


def _bare_conversion(source: bytes) -> bool:
    """A statement that converts a plain name and throws the result away: ``x.to(dev)``
    alone on its line (the call is found first, then the start of its line is read)."""
    for m in _CONVERSION_CALL.finditer(source):
        if _BARE_RECEIVER.fullmatch(source, source.rfind(b"\n", 0, m.start()) + 1, m.start()):
            return True
    return False


# a module-level statement a script's work may start from (``Summary.script`` reads inside a
# top-level ``try`` / ``with`` / ``if`` too): no match, no script
_MAYBE_SCRIPT = lazyre.compile(rb"\n(?:if|for|while|try|with)\b|\n[A-Za-z_][\w.]*\(")
_SCRIPT_HINT = lazyre.compile(rb"\n(?:if[ \t]+__name__|for[ \t]|while[ \t]|[A-Za-z_][\w.]*\()")
_IMPORT_LINE = lazyre.compile(rb"\n[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)|import[ \t]+([^\n#;]+))")
_NAME_AS = lazyre.compile(r"^([\w.*]+)(?:\s+as\s+(\w+))?$")


def _text_imports(source: bytes) -> list:
    """The imports a module's text spells: ``[module, level, [[name, alias], ...]]`` (shared
    between the questions asked of one text in a run: read it, do not change it)."""
    return _spelled_imports(source)[0]


def _top_imports(source: bytes) -> list:
    """The imports a module always runs (at its top, unindented), as :func:`_text_imports`."""
    return _spelled_imports(source)[1]


# `fused = load("fused", sources=[..., "fused_bias_act_kernel.cu"])` unindented: the module compiles a
# CUDA extension (nvcc, the CUDA toolkit) the moment it is imported
_JIT_LOAD = lazyre.compile(rb"^(?:[A-Za-z_][\w.]*[ \t]*=[ \t]*)?(?:torch\.utils\.)?(?:cpp_extension\.)?load(?:_inline)?\(", re.M)
_CU_SOURCE = lazyre.compile(rb"""\.cu['"]|cuda_sources[ \t]*=""")


# what a file that deals with devices spells (devlint.analysis.usage reads the same words)
_TOP_DEVICE_NAME = lazyre.compile(rb"^([A-Za-z_]*[Dd][Ee][Vv][Ii][Cc][Ee]\w*)[ \t]*=(?!=)", re.M)


def unread_device_names(source: bytes) -> frozenset:
    """Device-named variables a file binds at its top level (``DEVICE = "cuda"``) where every
    spelling of the name is such a binding: the file never reads them. A text test, the same
    for the index (which then asks whether another module imports the file) and for DL002."""
    if b"__main__" in source or b"evice" not in source and b"EVICE" not in source:
        return frozenset()  # (a `__main__` script: no module imports it, nothing to ask)
    out = set()
    for m in _TOP_DEVICE_NAME.finditer(source):
        name = re.escape(m.group(1))
        spelled = len(re.findall(rb"(?<![\w.])" + name + rb"(?!\w)", source))
        bound = len(re.findall(rb"(?m)^" + name + rb"[ \t]*=(?!=)", source))
        if spelled == bound:
            out.add(m.group(1).decode())
    return frozenset(out)


_NAMES_DEVICE = lazyre.compile(rb"cuda|device|\.to\(|mps|xla|accelerat|\bxpu\b|fabric|torch\.distributed|import distributed")


def _compiles_cuda_at_import(source: bytes) -> bool:
    """The module builds a CUDA extension with ``torch.utils.cpp_extension.load`` at its top (not
    under a condition, ``try`` or function): importing it needs a CUDA toolkit and GPU build, so
    the program cannot start without CUDA. One built only from C++ sources has a CPU path."""
    if b"cpp_extension" not in source or b".cu" not in source and b"cuda_sources" not in source:
        return False
    for m in _JIT_LOAD.finditer(source):
        if _CU_SOURCE.search(_call_text(source, m.end())):
            return True
    return False


_SYS_PATH_ADD = lazyre.compile(rb"\bsys\.path\.(?:append|insert)\(")
_STRING_LIT = lazyre.compile(rb"""(['"])([^'"\n]*)\1""")
_TRY_LINE = lazyre.compile(rb"^try[ \t]*:[ \t]*(?:#[^\n]*)?$", re.M)
_BLOCK_LINE = lazyre.compile(rb"^(\S[^\n]*)$", re.M)  # an unindented line: where a top-level block ends
_RAISES = lazyre.compile(rb"^[ \t]+raise\b", re.M)


def _mandatory_try_bodies(source: bytes) -> list:
    """``(start, end, indent)`` of each top-level ``try:`` body whose every ``except`` clause
    raises (``except ImportError: raise ImportError("build the extension first")``): what that
    body imports, the module always needs, as it needs an unindented import. A handler that
    falls back (``except ImportError: fast = None``) makes the import optional."""
    out = []
    for t in _TRY_LINE.finditer(source):
        body_start = t.end() + 1
        handlers: list = []
        body_end = None
        for b in _BLOCK_LINE.finditer(source, body_start):
            line = b.group(1)
            if line.startswith(b"#"):
                continue
            if line.startswith(b"except"):
                if body_end is None:
                    body_end = b.start()
                if handlers and not isinstance(handlers[-1], tuple):
                    handlers[-1] = (handlers[-1], b.start())  # the clause before ends where this one starts
                handlers.append(b.end())
                continue
            if handlers:
                handlers[-1] = (handlers[-1], b.start())
            break
        else:
            if handlers:
                handlers[-1] = (handlers[-1], len(source))
        if body_end is None or not handlers or not all(isinstance(h, tuple) for h in handlers):
            continue
        if any(_RAISES.search(source, a, z) is None for a, z in handlers):
            continue
        first = re.match(rb"[ \t]+", source[body_start:body_end])
        if first:
            out.append((body_start, body_end, first.group(0)))
    return out


@functools.lru_cache(maxsize=256)
def _spelled_imports(source: bytes) -> tuple:
    """(every import the text spells, those at its top), read in one pass."""
    out: list = []
    top: list = []
    tries = _mandatory_try_bodies(source) if b"\ntry" in source or source.startswith(b"try") else []
    for m in _IMPORT_LINE.finditer(b"\n" + source):
        at_top = source[m.start():m.start() + 1] not in (b" ", b"\t")  # (m.start() is the newline's)
        if not at_top and tries:  # an import in a top-level `try:` that must succeed
            at_top = any(a <= m.start() < z and source.startswith(ind, m.start())
                         and source[m.start() + len(ind):m.start() + len(ind) + 1] not in (b" ", b"\t")
                         for a, z, ind in tries)
        dots, module, names, plain = (g.decode("utf-8", "replace") if g is not None else None for g in m.groups())
        if plain is not None:
            for part in plain.replace("\\", " ").split(","):
                nm = _NAME_AS.match(part.strip())
                if nm:
                    out.append([nm.group(1), 0, []])
                    if at_top:
                        top.append(out[-1])
            continue
        pairs = []
        for part in names.strip().strip("()").replace("\\", " ").split(","):
            nm = _NAME_AS.match(" ".join(part.split()))
            if nm:
                pairs.append([nm.group(1), nm.group(2)])
        if pairs:
            out.append([module, len(dots), pairs])
            if at_top:
                top.append(out[-1])
    return out, top


def _text_summary(source: bytes) -> Summary:
    return Summary(imports=_text_imports(source), script=_SCRIPT_HINT.search(b"\n" + source) is not None)


_SWITCH_SET = lazyre.compile(rb"^([A-Za-z_]*(?:cuda|CUDA|Cuda|gpu|GPU|Gpu)[A-Za-z0-9_]*)[ \t]*=[ \t]*(True|False)[ \t]*(?:#[^\n]*)?$",
                         re.M)


# a bare switch-like name (not an attribute, not a call): `if USE_CUDA:`, `x.cuda() if gpu else x`
_SWITCH_READ = lazyre.compile(rb"\b(?:if|elif|while|and|or|not)[ \t]+([A-Za-z_]*(?:cuda|CUDA|Cuda|gpu|GPU|Gpu)[A-Za-z0-9_]*)"
                          rb"\b(?![ \t]*[(.\[=])")


_IMPORTS_SWITCH = lazyre.compile(rb"\n[ \t]*from[ \t]+[\w.]+[ \t]+import[^\n]*(?:cuda|CUDA|Cuda|gpu|GPU|Gpu)")


def _switches_of(source: bytes) -> list:
    """``USE_CUDA = True`` at the top of a module (column 0), the name bound nowhere else in the
    text (no other ``NAME =``, ``NAME +=``, ``for NAME``, ``global NAME``, ``as NAME``)."""
    out = []
    for m in _SWITCH_SET.finditer(source):
        name = m.group(1)
        rebinds = re.findall(rb"(?:^[ \t]*|[,(][ \t]*)" + name + rb"[ \t]*(?:[-+*/|&]?=(?!=)|:)|\b(?:global|nonlocal|for|as|import)[ \t]+(?:[\w, \t]*,[ \t]*)?"
                             + name + rb"\b", source, re.M)
        if len(rebinds) == 1:
            out.append([name.decode(), m.group(2) == b"True"])
    return out


def _root_name(node: ast.AST) -> Optional[str]:
    """``model`` for ``model.module.state_dict()`` / ``model["net"]``."""
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return node.id if isinstance(node, ast.Name) else None


class _PassedSaves(ast.NodeVisitor):
    def __init__(self) -> None:
        self.params: list = [set()]
        self.out: set = set()

    def visit_FunctionDef(self, fn) -> None:
        a = fn.args
        self.params.append(self.params[-1] | ({x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} - {"self", "cls"}))
        self.generic_visit(fn)
        self.params.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, n: ast.Call) -> None:
        if (_dotted(n.func) or "") in ("torch.save", "torch.jit.save") and n.args \
                and _root_name(n.args[0]) in self.params[-1]:
            self.out.add(id(n.args[0]))
        self.generic_visit(n)


def _passed_saves(tree: ast.AST) -> set:
    """The saved objects (``id``) that come from a parameter of the saving function
    (``def save_checkpoint(self, model, path): torch.save(model.state_dict(), ...)``): whatever
    the callers pass, not something the module made."""
    v = _PassedSaves()
    v.visit(tree)
    return v.out


def _innermost_functions(tree: ast.AST) -> dict:
    """``id(call)`` -> the innermost function whose code (body, decorators, defaults) holds the
    call, for every call in a function: one walk of the tree."""
    out: dict = {}
    stack = [(tree, None)]
    while stack:
        node, fn = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fn = node
        elif fn is not None and isinstance(node, ast.Call):
            out[id(node)] = fn
        stack.extend((child, fn) for child in ast.iter_child_nodes(node))
    return out


def summarize(source: bytes) -> Optional[Summary]:
    """The summary of one module's source, or None when Python cannot parse it."""
    if (_NEEDS_AST.search(source) is None and _TENSOR_RETURN.search(source) is None and not _may_wrap(source)
            and _KERNEL_DEF.search(source) is None):
        return _text_summary(source)
    try:
        tree = _parsed(source)
    except SyntaxError:
        # PyTorch <= 0.3 scripts spell `.cuda(async=True)` (`non_blocking` since 0.4), which
        # Python >= 3.7 refuses: a summary (not the lint) reads them with the keyword renamed
        if _OLD_ASYNC.search(source) is None:
            return None
        try:
            tree = ast.parse(_OLD_ASYNC.sub(b"non_blocking=", source))
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return None
    except (ValueError, MemoryError, RecursionError):
        return None
    s = Summary(imports=_text_imports(source))
    raw_saves = []
    loads = False
    flat = list(ast.walk(tree)) if b".save(" in source or b"init_process_group" in source else []
    saving_fn = _innermost_functions(tree) if b".save(" in source else {}  # id(call) -> its function
    mapped = False  # a load mapped to the host: a conversion script's input
    dtypes = _dtype_params(tree) if b".save(" in source and b"dtype" in source else frozenset()
    for node in (flat if b".save(" in source else ()):  # calls matter for saves only
        if isinstance(node, ast.Call):
            if not s.places and _places(node, dtypes):
                s.places = True
            d = _dotted(node.func) or ""
            if d.endswith("load_file") and any(k.arg == "device" and isinstance(k.value, ast.Constant)
                                               and k.value.value == "cpu" for k in node.keywords):
                mapped = True  # safetensors' `load_file(p, device="cpu")`
            elif d.endswith(("torch.load", "jit.load")):
                if _host_mapped(node):
                    mapped = True
                else:
                    loads = True  # (what a script re-saves after a load mapped to the CPU is host data)
            if d in ("torch.save", "torch.jit.save") and node.args:
                target = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "f"), None)
                raw_saves.append((target, node.args[0], saving_fn.get(id(node))))
    s.script = any(
        isinstance(n, (ast.For, ast.While)) or (isinstance(n, ast.If) and _is_main_test(n.test))
        or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)) for n in _top_level(tree.body))
    # host data: moved off the device by the save itself, or saved by a script that places
    # nothing and loads nothing (what a helper module saves is whatever its callers pass it;
    # what a script re-saves after a load is whatever the loaded file held)
    made_here = s.script and not s.places and not loads
    built = {t.id for n in flat if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
             and (_dotted(n.value.func) or "").rsplit(".", 1)[-1][:1].isupper()
             for t in n.targets if isinstance(t, ast.Name)} if raw_saves else set()
    passed = _passed_saves(tree) if made_here and raw_saves else set()
    # a model the saving code builds from a class of its own and, placing nothing, keeps on the host
    classes = {c.name for c in tree.body if isinstance(c, ast.ClassDef)} if raw_saves and not s.places else set()
    # a conversion script (it reads what it saves with `map_location="cpu"`, places nothing):
    # its saves are host copies as surely as `.cpu()` ones
    converts = made_here and mapped
    s.saves = [[_save_name(p) if t is not None else None,
                _host_object(o, fn, t) or (made_here and id(o) not in passed) or _fresh_module(o, fn, classes)
                or _cache_save(o, t, fn),
                _model_state(o, built), _host_object(o, fn, t) or (converts and id(o) not in passed)]
               for t, o, fn in raw_saves for p in (_bound_paths(t, fn) if t is not None else [None])]
    funcs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    ensuring: set = set()
    for _ in range(2):  # a function calling one that requires CUDA requires it too
        before = len(ensuring)
        for fn in funcs:
            if fn.name not in ensuring and _ensures(fn.body, True, ensuring):
                ensuring.add(fn.name)
        if len(ensuring) == before:  # nothing new: a second pass would find nothing either
            break
    s.cuda_functions = sorted(ensuring)
    s.backends = _backends(tree, b"set_device" in source, flat) if b"init_process_group" in source else []
    s.requires_cuda = s.script and _ensures(tree.body, False, ensuring)
    s.tensor_returns = sorted(fn.name for fn in funcs if _tensor_returns(fn))
    s.dist_checks = sorted(fn.name for fn in funcs if b"is_initialized" in source and _dist_check(fn))
    if b"init_process_group" in source:
        starts = [n.lineno for n in flat if _is_init(n)]  # (only the functions that start a group)
        s.backend_params = [p for fn in funcs if any(fn.lineno <= line <= fn.end_lineno for line in starts)
                            for p in _backend_params(fn)]
    if _may_wrap(source):
        s.gpu_wrappers = sorted(fn.name for fn in funcs if _wraps_for_gpus(fn))
    if _CHECKPOINT_FILE.search(source):
        for st in tree.body:
            if (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)):
                name = _save_name(st.value)
                if name is not None and re.search(r"\.(?:pth|pt|ckpt|pkl|bin|tar)$", name):
                    s.checkpoint_paths.append([st.targets[0].id, name])
    if b"is_available" in source or b"device_count" in source:
        s.gpu_decorators = _gpu_decorators(funcs)
    if _KERNEL_DEF.search(source) is not None and TRITON_INTERPRETER.search(source) is None:
        s.kernel_functions = _kernel_functions(funcs)  # (unless Triton's CPU interpreter runs them)
    if raw_saves:
        saving = {id(fn) for _, _, fn in raw_saves if fn is not None}
        s.savers = sorted(d.name for d in tree.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                        ast.ClassDef))
                          and any(id(n) in saving for n in ast.walk(d)))
    return s


# a decorator line's name: `@run_if_cuda`, `@helpers.run_if_cuda(...)`
_DECORATOR = lazyre.compile(rb"\n[ \t]*@[ \t]*([A-Za-z_][\w.]*)")
# `os.environ["TRITON_INTERPRET"] = "1"` (or `setdefault("TRITON_INTERPRET", "1")`) on a line that is
# no comment: Triton runs the module's kernels in its CPU interpreter, on host tensors
TRITON_INTERPRETER = lazyre.compile(rb"""^[ \t]*[^#\n]*TRITON_INTERPRET["'][ \t]*(?:\][ \t]*=|,)[ \t]*["']?1""", re.M)
# a GPU kernel defined in the module: `@triton.jit` (also `@triton.autotune(...)`), `@helion.kernel`
_KERNEL_DEF = lazyre.compile(rb"@[ \t]*(?:triton\.(?:jit|autotune|heuristics)|helion\.kernel)\b")


def _gpu_decorators(funcs: list) -> list:
    """Summary.gpu_decorators: top-level ``def deco(func)`` that return an inner function calling
    ``func`` only where CUDA is usable: under ``if torch.cuda.is_available():`` (or a
    ``device_count()`` test), or after ``if not torch.cuda.is_available(): return`` (a skip)."""
    out = []
    for fn in funcs:
        params = [a.arg for a in fn.args.args]
        if len(params) != 1:
            continue
        inner = {d.name: d for d in fn.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))}
        returned = [st.value.id for st in fn.body if isinstance(st, ast.Return) and isinstance(st.value, ast.Name)]
        if len(returned) == 1 and returned[0] in inner and _calls_only_with_cuda(inner[returned[0]].body, params[0]):
            out.append(fn.name)
    return sorted(out)


def _availability_test(test: ast.AST) -> int:
    """+1 for ``torch.cuda.is_available()`` / ``torch.cuda.device_count() [> 0]``, -1 for its ``not``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return -_availability_test(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Gt, ast.GtE)):
        test = test.left
    if isinstance(test, ast.Call) and (_dotted(test.func) or "").endswith(("cuda.is_available", "cuda.device_count")):
        return 1
    return 0


def _calls_only_with_cuda(body: list, func: str) -> bool:
    """Every call of ``func`` in ``body`` runs only where CUDA is usable, and there is one."""
    calls = 0
    for st in body:
        if isinstance(st, ast.If):
            pol = _availability_test(st.test)
            guarded, other = (st.body, st.orelse) if pol == 1 else (st.orelse, st.body) if pol == -1 else ([], [])
            if pol == -1 and st.body and isinstance(st.body[-1], (ast.Return, ast.Raise)):
                return calls == 0 and _calls(body[body.index(st) + 1:], func) > 0  # a skip: the rest is guarded
            if pol != 0:
                if _calls(other, func):
                    return False
                calls += _calls(guarded, func)
                continue
        if _calls([st], func):
            return False
    return calls > 0


def _calls(stmts: list, func: str) -> int:
    return sum(1 for st in stmts for n in ast.walk(st)
               if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == func)


def _kernel_functions(funcs: list) -> list:
    """Summary.kernel_functions: the module's top-level functions that always launch one of its
    kernels (in their body, or a loop or ``with`` in it; not in one branch), directly or through
    another such function (``GuardModel._scan_kernel_launches`` reads a file the same way)."""
    kernels: set = set()
    launchers: set = set()
    for fn in funcs:
        for d in fn.decorator_list:
            q = _dotted(d.func if isinstance(d, ast.Call) else d) or ""
            if q in ("triton.jit", "triton.autotune", "triton.heuristics"):
                kernels.add(fn.name)
            elif q == "helion.kernel":
                launchers.add(fn.name)

    def always(body: list):
        for st in body:
            if isinstance(st, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
                yield from always(st.body)
            elif not isinstance(st, (ast.If, ast.Try, ast.TryStar, ast.Match, ast.FunctionDef, ast.AsyncFunctionDef,
                                     ast.ClassDef)):
                yield st

    def launches(fn) -> bool:
        for st in always(fn.body):
            for c in ast.walk(st):
                if isinstance(c, ast.Call):
                    f = c.func
                    if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name) and f.value.id in kernels:
                        return True
                    if isinstance(f, ast.Name) and f.id in launchers:
                        return True
        return False

    out = set(launchers)
    for _ in range(4):
        found = {fn.name for fn in funcs if fn.name not in kernels and fn.name not in out and launches(fn)}
        if not found:
            break
        out |= found
        launchers |= found
    return sorted(out)


_WRAPPERS = ("DataParallel", "DistributedDataParallel")
_GPU_IF = lazyre.compile(rb"^[ \t]+(?:el)?if[ \t][^\n]*(?:gpu|GPU|cuda|CUDA)", re.M)
# a user's GPU option read as a condition: a list of ids (`opt.gpu_ids`, `args.gpus`), a count
# (`n_gpu`, `args.ngpu`), a switch (`args.cuda`, `use_gpu`)
_GPU_IDS = lazyre.compile(r"gpus?_?ids$|^gpus$", re.I)
_GPU_COUNT_OR_SWITCH = lazyre.compile(r"^(?:n_?|num_?)gpus?$|^ngpus?$|^gpu_?(?:count|num)$|^(?:use_?|with_?)?(?:cuda|gpus?)$",
                                  re.I)


def _may_wrap(source: bytes) -> bool:
    """Cheap text gate for :func:`_wraps_for_gpus`: a wrapper call and a GPU condition."""
    return b"DataParallel(" in source and _GPU_IF.search(source) is not None


def _asks_for_gpus(test: ast.AST) -> bool:
    """``test`` true means the caller asked for GPUs: ``len(opt.gpu_ids)``, ``len(gpu_ids) > 0``,
    ``args.cuda``, ``n_gpu > 1``, ``torch.cuda.is_available()``, or a conjunction with one."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_asks_for_gpus(v) for v in test.values)
    if _availability(test) == 1:
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        right = test.comparators[0]
        if not (isinstance(right, ast.Constant) and type(right.value) is int):
            return False
        op, n = test.ops[0], right.value
        positive = ((isinstance(op, ast.Gt) and n >= 0) or (isinstance(op, ast.GtE) and n >= 1)
                    or (isinstance(op, ast.NotEq) and n == 0))
        return positive and _gpu_amount(test.left)
    return _gpu_amount(test)


def _gpu_amount(e: ast.AST) -> bool:
    """``len(opt.gpu_ids)``, ``opt.gpu_ids``, ``args.ngpu``, ``use_cuda``: read for its truth."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "len" and len(e.args) == 1:
        last = (_dotted(e.args[0]) or "").rsplit(".", 1)[-1]
        return _GPU_IDS.search(last) is not None
    last = (_dotted(e) or "").rsplit(".", 1)[-1]
    return bool(last) and (_GPU_IDS.search(last) is not None or _GPU_COUNT_OR_SWITCH.search(last) is not None)


def _wraps_for_gpus(fn) -> bool:
    """``fn`` returns a name that it binds to a ``DataParallel`` / ``DistributedDataParallel``
    wrapper, and binds so only inside branches taken when the caller asked for GPUs."""
    wrapped: dict = {}  # name -> every wrap of it is on a GPU branch

    def walk(stmts: list, on_gpu: bool) -> None:
        for st in stmts:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(st, ast.If):
                walk(st.body, on_gpu or _asks_for_gpus(st.test))
                walk(st.orelse, on_gpu)
                continue
            if (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
                    and isinstance(st.value, ast.Call)
                    and (_dotted(st.value.func) or "").rsplit(".", 1)[-1] in _WRAPPERS):
                name = st.targets[0].id
                wrapped[name] = wrapped.get(name, True) and on_gpu
            for field_name in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(st, field_name, None)
                if isinstance(inner, list):
                    walk([x for x in inner if isinstance(x, ast.stmt)], on_gpu)
                    for h in inner:
                        if isinstance(h, ast.ExceptHandler):
                            walk(h.body, on_gpu)

    walk(fn.body, False)
    if not wrapped:
        return False
    returned = {n.value.id for n in _own_nodes(fn) if isinstance(n, ast.Return) and isinstance(n.value, ast.Name)}
    return any(ok and name in returned for name, ok in wrapped.items())


def _own_nodes(fn):
    """The nodes of ``fn``'s body, not those of functions or classes defined inside it."""
    stack = list(fn.body)
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(n))


def _backend_params(fn) -> list:
    """``[[fn, index, param]]`` when ``fn`` calls ``init_process_group`` with one of its own
    parameters, never rebound in it, as the backend."""
    args = fn.args.posonlyargs + fn.args.args
    names = {a.arg: i for i, a in enumerate(args)}
    names.update({a.arg: -1 for a in fn.args.kwonlyargs})
    used = []  # the parameters passed as a backend, in order
    for n in ast.walk(fn):
        if _is_init(n):
            arg = n.args[0] if n.args else next((k.value for k in n.keywords if k.arg == "backend"), None)
            if isinstance(arg, ast.Name) and arg.id in names:
                used.append(arg.id)
    if not used:  # (most functions: no second walk for what they rebind)
        return []
    rebound = {t.id for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For))
               for tg in (n.targets if isinstance(n, ast.Assign) else [n.target]) for t in ast.walk(tg)
               if isinstance(t, ast.Name)}
    return [[fn.name, names[a], a] for a in used if a not in rebound]


def _is_initialized_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (_dotted(node.func) or "").endswith(("dist.is_initialized",
                                                                             "distributed.is_initialized"))


def _dist_check(fn: ast.AST) -> bool:
    """``fn`` returns whether a process group is up: ``return dist.is_available() and
    dist.is_initialized()``, or ``if not dist.is_initialized(): return False`` (among other such
    early ``return False``) then ``return True``."""
    body = [st for st in fn.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        v = body[0].value
        parts = v.values if isinstance(v, ast.BoolOp) and isinstance(v.op, ast.And) else [v]
        return any(_is_initialized_call(x) for x in parts)
    if not body or not (isinstance(body[-1], ast.Return) and isinstance(body[-1].value, ast.Constant)
                        and body[-1].value.value is True):
        return False
    found = False
    for st in body[:-1]:
        if not (isinstance(st, ast.If) and not st.orelse and len(st.body) == 1 and isinstance(st.body[0], ast.Return)
                and isinstance(st.body[0].value, ast.Constant) and st.body[0].value.value is False):
            return False
        t = st.test
        found = found or (isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not) and _is_initialized_call(t.operand))
    return found


# NumPy arrays have these too, but no `.to()`: what DL001 asks is whether a converted value is a tensor
_ARRAY_METHODS = {"view", "reshape", "unsqueeze", "permute", "contiguous", "transpose", "float", "long",
                  "squeeze", "flatten", "detach", "clone"}
_SPLITS = {"chunk", "split", "unbind", "tensor_split"}


def _tensor_returns(fn) -> bool:
    """Every return of ``fn`` is a tuple of array-like values (``x[:, :3]``, ``torch.cat(...)``,
    ``x[i].view(-1)``), or a split of one (``torch.split(x, n)``, ``x.chunk(2)``)."""
    found = False
    for n in ast.walk(fn):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and n is not fn:
            return False  # (a nested function's returns are not this function's: keep it simple)
        if isinstance(n, (ast.Yield, ast.YieldFrom)):
            return False
        if not isinstance(n, ast.Return):
            continue
        v = n.value
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in _SPLITS:
            found = True
            continue
        if not isinstance(v, (ast.Tuple, ast.List)) or len(v.elts) < 2 or not all(_array_like(e) for e in v.elts):
            return False
        found = True
    return found


def _array_like(e) -> bool:
    if isinstance(e, ast.Subscript):
        sl = e.slice
        return isinstance(sl, ast.Tuple) and any(isinstance(x, ast.Slice) for x in sl.elts)
    if isinstance(e, ast.Call):
        d = _dotted(e.func) or ""
        if d.startswith("torch.") and d.count(".") == 1 or d.startswith("torch.nn.functional."):
            return True
        return isinstance(e.func, ast.Attribute) and e.func.attr in _ARRAY_METHODS and _array_like_base(e.func.value)
    return False


def _array_like_base(e) -> bool:
    """The receiver of ``.view(-1)`` & co: a slice or another array-like value (not a bare
    name: ``labels.long()`` of anything says nothing)."""
    return isinstance(e, ast.Subscript) or _array_like(e)


# ---------------------------------------------------------------------------------
# the project
# ---------------------------------------------------------------------------------

_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules", ".tox", "build", "dist"}


# Inside one lint run (``one_run()``) the project's directory listings and files are checked against
# their stamps once, not once per file: a run reads the tree as it was when it started. Outside a run
# (a test calling ``facts_for`` after editing a file) every question checks them again.
_RUN: list = [None]


class one_run:
    """``with one_run(): ...``: the stamps behind the project listings and summaries are checked once."""

    _count = 0

    def __enter__(self):
        one_run._count += 1
        if _RUN[0] is None:
            _RUN_STAMPS.clear()  # what the last run saw: a new run stats again
        self._outer = _RUN[0]
        _RUN[0] = one_run._count
        return self

    def __exit__(self, *exc) -> None:
        _RUN[0] = self._outer

_RUN_STAMPS: dict = {}  # path -> (run, stamp): a file is stat'ed once per run


def _stamp(path: str) -> Optional[tuple]:
    run = _RUN[0]
    if run is not None:
        hit = _RUN_STAMPS.get(path)
        if hit is not None and hit[0] == run:
            return hit[1]
    try:
        st = os.stat(path)
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    if run is not None:
        _RUN_STAMPS[path] = (run, stamp)
    return stamp


class ProjectIndex:
    """Summaries of a project's modules, read as questions need them.

    Every file and directory a file's facts are read from is noted with its stat stamp (a
    directory's changes when a module appears in it or goes), so the facts can be kept under
    the lint cache and reused while none of those stamps moves: a warm run stats them instead
    of reading the modules again."""

    def __init__(self, root: str, cache_dir: Optional[str] = None) -> None:
        self.root = os.path.abspath(root)
        self.cache_dir = os.path.join(cache_dir, "project-v%d" % SUMMARY_VERSION) if cache_dir else None
        self._summaries: dict = {}
        self._resolved: dict = {}
        self._top_resolved: dict = {}  # path -> (_top_step answer), cleared with _resolved
        self._closure: dict = {}
        self._by_digest: dict = {}  # content hash -> summary (a file and its neighbours' view agree)
        self._texts: dict = {}  # path -> (stat stamp, (may be a script, its bytes))
        self._imports_text: dict = {}  # path -> (stat stamp, its imports read off the text)
        self._class_memo: dict = {}  # (path, text hash) -> (classes, torch aliases)
        self._calls_memo: dict = {}  # (path, text hash) -> _Calls
        self._ensures_memo: dict = {}  # (path, function) -> requires CUDA, through other modules too
        self._callers_memo: dict = {}  # (path, name) -> (run, every use of it requires CUDA anyway)
        self._notebooks: list = []  # every notebook of the project, listed with the Python files
        self._blobs: dict = {}  # checkpoint-like files of the project by name, listed with them
        self._blob_host: dict = {}  # path -> (stamp, holds CPU storages only?)
        self._recs: list = []  # dependency sets being recorded (innermost last)
        self._memo_deps: dict = {}  # memo key -> the dependencies its value was read from
        self._files: list = []  # every Python file of the project, once listed
        self._large = False  # more Python files than _WHOLE_PROJECT_FILES (_large_project)
        self._exts: frozenset = frozenset()  # CUDA extensions the project's setup.py files build
        self._placing_memo: dict = {}  # (path, text hash) -> its definitions that place values
        self._module_files: dict = {}  # (base, dotted name) -> (run, module file, stamps read)
        self._checked: dict = {}  # listing memo key -> the run (one_run) whose stamps were checked
        self._apply_memo: dict = {}  # ("apply moves",) -> attribute -> modules whose `_apply` moves it

    # ---- dependencies ---------------------------------------------------------------
    def _note(self, path: str, stamp: Optional[tuple]) -> None:
        for rec in self._recs:
            rec[path] = stamp

    def _recorded(self, key, compute):
        """``compute()`` with its dependencies noted under ``key`` for a memo hit to replay."""
        rec: dict = {}
        self._recs.append(rec)
        try:
            value = compute()
        finally:
            self._recs.pop()
        self._memo_deps[key] = rec
        for outer in self._recs:
            outer.update(rec)
        return value

    def _replay(self, key) -> None:
        rec = self._memo_deps.get(key)
        if rec:
            for outer in self._recs:
                outer.update(rec)

    # ---- summaries ------------------------------------------------------------------
    def summary(self, path: str) -> Optional[Summary]:
        path = os.path.abspath(path)
        stamp = _stamp(path)  # a long-lived process (the language server) sees edits
        self._note(path, stamp)
        if stamp is None:
            return None
        hit = self._summaries.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError:
            return None
        s = self._cached(source)
        self._summaries[path] = (stamp, s)
        if hit is not None:  # an edited module: what was derived from the old one goes
            self._resolved.clear()
            self._top_resolved.clear()
            self._closure.clear()
        return s

    def _cached(self, source: bytes) -> Optional[Summary]:
        digest = hashlib.sha256(source).hexdigest()
        if digest in self._by_digest:
            return self._by_digest[digest]
        s = self._by_digest[digest] = self._stored(source, digest)
        return s

    def _stored(self, source: bytes, digest: str) -> Optional[Summary]:
        entry = os.path.join(self.cache_dir, digest[:2], digest[2:] + ".json") if self.cache_dir else None
        if entry is not None:
            try:
                with open(entry, encoding="utf-8") as f:
                    data = json.load(f)
                return Summary(**data) if data is not None else None
            except (OSError, ValueError, TypeError):
                pass
        s = summarize(source)
        if entry is not None:
            try:
                os.makedirs(os.path.dirname(entry), exist_ok=True)
                tmp = f"{entry}.{os.getpid()}.tmp"
                with open(tmp, "w", encoding="utf-8") as f:
                    json.dump(asdict(s) if s is not None else None, f)
                os.replace(tmp, entry)
            except OSError:
                pass  # best effort: a read-only cache only means no caching
        return s

    def _text_imports(self, path: str) -> list:
        stamp = _stamp(path)
        self._note(path, stamp)
        if stamp is None:
            return []
        hit = self._imports_text.get(path)
        if hit is None or hit[0] != stamp:
            try:
                with open(path, "rb") as f:
                    hit = self._imports_text[path] = (stamp, _text_imports(f.read()))
            except OSError:
                return []
        return hit[1]

    def _may_import(self, path: str, stem: bytes) -> bool:
        """A script whose text names ``stem`` (a cheap test before any parse)."""
        text = self._text(path)
        return text is not None and (text[0] or os.path.basename(path) == "hubconf.py") \
            and stem in text[1]  # the import graph decides

    def _may_ensure(self, path: str) -> bool:
        """:func:`_may_ensure` of the module's text."""
        text = self._text(path)
        return text is not None and _may_ensure(text[1])

    def _words(self, path: str, wanted: tuple) -> bool:
        """Whether the module's text holds any of ``wanted`` (a gate before a parse)."""
        text = self._text(path)
        return text is not None and any(w in text[1] for w in wanted)

    def _text(self, path: str):
        """(may it be a script, its bytes), by stat stamp."""
        stamp = _stamp(path)
        self._note(path, stamp)
        if stamp is None:
            return None
        hit = self._texts.get(path)
        if hit is None or hit[0] != stamp:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                return None
            if path in self._texts:  # an edited module: requirements read through it go
                self._ensures_memo.clear()
                self._top_resolved.clear()
            hit = self._texts[path] = (stamp, (_SCRIPT_HINT.search(b"\n" + data) is not None, data))
        return hit[1]

    # ---- imports --------------------------------------------------------------------
    def _module_file(self, base: str, dotted_name: str) -> Optional[str]:
        if _RUN[0] is None:
            return self._find_module_file(base, dotted_name)
        key = (base, dotted_name)
        hit = self._module_files.get(key)
        if hit is None or hit[0] != _RUN[0]:  # looked up once per run (one_run)
            rec: dict = {}
            self._recs.append(rec)
            try:
                found = self._find_module_file(base, dotted_name)
            finally:
                self._recs.pop()
            hit = self._module_files[key] = (_RUN[0], found, rec)
        for outer in self._recs:
            outer.update(hit[2])
        return hit[1]

    def _find_module_file(self, base: str, dotted_name: str) -> Optional[str]:
        parts = [p for p in dotted_name.split(".") if p]
        if self._recs:  # a module appearing or going there changes the directory's stamp
            probe = os.path.join(base, *parts)
            for d in (os.path.dirname(probe), probe) if parts else (base,):
                self._note(d, _stamp(d))
        if not parts:
            init = os.path.join(base, "__init__.py")
            return init if os.path.isfile(init) else None
        cand = os.path.join(base, *parts)
        if os.path.isfile(cand + ".py"):
            return cand + ".py"
        if os.path.isfile(os.path.join(cand, "__init__.py")):
            return os.path.join(cand, "__init__.py")
        return None

    def imports(self, path: str, summary: Optional[Summary] = None) -> list:
        """[(project file, ((name, alias), ...) imported from it, or None for the whole module)]."""
        path = os.path.abspath(path)
        if summary is None:
            if path in self._resolved:
                self._replay(("imports", path))
                return self._resolved[path]
            return self._recorded(("imports", path), lambda: self._imports(path, None))
        return self._imports(path, summary)

    def _imports(self, path: str, summary: Optional[Summary]) -> list:
        out = []
        # imports are read off the text (a summary's are too): following them parses nothing
        listed = summary.imports if summary is not None else self._text_imports(path)
        here = os.path.dirname(path)
        appended = None  # the directories the file itself puts on sys.path, read when needed
        for module, level, names in listed:
            if level:
                base = here
                for _ in range(level - 1):
                    base = os.path.dirname(base)
                bases = [base]
            else:
                bases = ([here, self.root] if here != self.root else [self.root]) + self._source_roots() \
                    + self._subproject_roots(here)
                if appended is None:
                    appended = self._appended_dirs(path)
                bases = bases + appended
            for base in bases:
                target = self._module_file(base, module)
                if target is None:
                    continue
                if names:
                    subs = [(self._module_file(base, f"{module}.{n}"), n, a) for n, a in names if n != "*"]
                    out.extend((sub, None) for sub, _, _ in subs if sub is not None)
                    star = any(n == "*" for n, _ in names)
                    out.append((target, None if star else tuple((n, a) for sub, n, a in subs if sub is None)))
                else:
                    out.append((target, None))
                break
            else:
                if names and level == 0 and module:
                    continue
                for base in bases:  # `from . import utils`: the names are modules
                    for n, _a in names:
                        sub = self._module_file(base, f"{module}.{n}" if module else n)
                        if sub is not None:
                            out.append((sub, None))
        out = [(os.path.abspath(t), n) for t, n in out
               if os.path.abspath(t) != path and os.path.commonpath([os.path.abspath(t), self.root]) == self.root]
        if summary is None:
            self._resolved[path] = out
        return out

    def _appended_dirs(self, path: str) -> list:
        """Project directories the file puts on ``sys.path`` itself
        (``sys.path.append(os.path.join(ROOT_DIR, 'pointnet2'))``, ``sys.path.insert(0, '../utils')``):
        its absolute imports resolve there too. The directory is the call's last string literal,
        taken beside the file, beside its directory, or under the root, where one exists."""
        text = self._text(path)
        if text is None or b"sys.path" not in text[1]:
            return []
        here = os.path.dirname(path)
        out: list = []
        for m in _SYS_PATH_ADD.finditer(text[1]):
            lits = _STRING_LIT.findall(_call_text(text[1], m.end(), 300))
            if not lits:
                continue
            rel = lits[-1][1].decode("utf-8", "replace").strip("/\\")
            if not rel or os.path.isabs(rel):
                continue
            for base in (here, os.path.dirname(here), self.root):
                d = os.path.normpath(os.path.join(base, rel))
                try:
                    inside = d not in out and os.path.commonpath([d, self.root]) == self.root and os.path.isdir(d)
                except (ValueError, OSError):  # a NUL in the literal, another drive: no directory of ours
                    break
                if inside:
                    out.append(d)
                    break
        return out

    def _subproject_roots(self, here: str) -> list:
        """The nearest directory between ``here`` and the root (the root excluded) holding its own
        ``pyproject.toml`` / ``setup.py`` / ``setup.cfg``, and its ``src/`` when that is no
        package: a sub-project of a mono-repository (a course's ``assignment2/``) whose files
        import ``from src.distributed.basics import setup`` from there. Memoised per directory and run."""
        memo = self.__dict__.setdefault("_subroots_memo", {})
        got = memo.get(here)
        if got is not None and got[0] == _RUN[0]:
            return got[1]  # (looked up once per run, as module files are: a server sees edits)
        hit = []
        d = here
        while d != self.root and os.path.commonpath([d, self.root]) == self.root:
            # (as for the root: a `setup.py` inside a package is one of its modules, no marker)
            if os.path.isfile(os.path.join(d, "pyproject.toml")) or (
                    any(os.path.isfile(os.path.join(d, m)) for m in ("setup.py", "setup.cfg"))
                    and not os.path.exists(os.path.join(d, "__init__.py"))):
                hit = [d]
                src = os.path.join(d, "src")
                if os.path.isdir(src) and not os.path.exists(os.path.join(src, "__init__.py")):
                    hit.append(src)
                break
            d = os.path.dirname(d)
        memo[here] = (_RUN[0], hit)
        return hit

    def _source_roots(self) -> list:
        """``src/`` and ``lib/`` under the root when they are no package themselves: where
        absolute imports also resolve (ruff's default ``src``; the ``sys.path.insert(0, "lib")``
        of many research repositories)."""
        roots = getattr(self, "_roots_memo", None)
        if roots is None:
            roots = self._roots_memo = [
                d for d in (os.path.join(self.root, "src"), os.path.join(self.root, "lib"))
                if os.path.isdir(d) and not os.path.exists(os.path.join(d, "__init__.py"))]
        return roots

    def closure(self, path: str, depth: int = 3) -> set:
        """The project files ``path`` imports, directly or through others (``depth`` hops)."""
        key = (os.path.abspath(path), depth)
        if key in self._closure:
            self._replay(("closure", key))
            return self._closure[key]
        return self._recorded(("closure", key), lambda: self._compute_closure(key))

    def _compute_closure(self, key: tuple) -> set:
        path, depth = key
        seen: set = set()
        frontier = [path]
        for _ in range(depth):
            nxt = []
            for p in frontier:
                for t, _names in self.imports(p):
                    if t not in seen:
                        seen.add(t)
                        nxt.append(t)
            frontier = nxt
        self._closure[key] = seen
        return seen

    # ---- CUDA device defaults: does a call elsewhere in the project leave one in place? --------
    def _defaults_reached(self, path: str, source: bytes) -> frozenset:
        out = set()
        for owner, fn, cuda in _signatures_with_cuda_defaults(source):
            a = fn.args
            params = a.posonlyargs + a.args
            for param in params + a.kwonlyargs:
                if "device" not in param.arg.lower() or param.arg not in cuda:
                    continue
                if owner and fn.name != "__init__":
                    continue  # a method's name is shared by many classes: its calls elsewhere say little
                callee = owner if owner else fn.name
                positional = [p.arg for p in params if p.arg not in ("self", "cls")]
                pos = positional.index(param.arg) if param.arg in positional else None
                if self._default_left(path, callee, param.arg, pos):
                    out.add(f"{callee}.{param.arg}")
        return frozenset(out)

    def _built_extensions(self) -> frozenset:
        """Module names the project's setup.py files build with ``CUDAExtension``, or with a
        ``CppExtension`` whose C++ accepts CUDA tensors only (:func:`_checks_cuda_inputs`), full
        dotted names and their last part. Read once per run."""
        key = ("built extensions",)
        if self._unchanged(key):
            self._replay(key)
            return self._exts
        def compute():
            out = set()
            for f in self._project_files():
                base = os.path.basename(f)
                if base == "setup.py":
                    text = self._text(f)
                    if text is None or b"Extension" not in text[1]:
                        continue
                    for m in _CUDA_EXTENSION.finditer(text[1]):
                        name = m.group(1).decode()
                        out |= {name, name.rsplit(".", 1)[-1]}
                    for m in _CPP_EXTENSION.finditer(text[1]):
                        if self._cuda_only_sources(os.path.dirname(f), m.group(2)):
                            name = m.group(1).decode()
                            out |= {name, name.rsplit(".", 1)[-1]}
                elif base.startswith("build") and base.endswith(".py"):
                    text = self._text(f)
                    if text is None or b"create_extension(" not in text[1]:
                        continue
                    if _FFI_NO_CPU_SOURCE.search(text[1]) or _FFI_RAISES_WITHOUT_CUDA.search(text[1]):
                        # the full name only (`_ext.nms`): its last part is often a Python module's too
                        out |= {m.group(1).decode() for m in _FFI_EXTENSION.finditer(text[1])}
            return frozenset(out)
        self._exts = self._recorded(key, compute)
        self._checked[key] = _RUN[0]
        return self._exts

    def _cuda_only_sources(self, here: str, listed: bytes) -> bool:
        """The C++ sources a ``CppExtension`` lists (quoted, relative to its ``setup.py``) check
        that their inputs are CUDA tensors and have no CPU branch: the extension has no CPU path."""
        texts = []
        for m in _QUOTED_SOURCE.finditer(listed):
            text = self._text(os.path.normpath(os.path.join(here, m.group(1).decode("utf-8", "replace"))))
            if text is None:
                return False
            texts.append(text[1])
        return bool(texts) and any(_checks_cuda_inputs(t) for t in texts) and not any(
            _CPU_BRANCH.search(t) for t in texts)

    def _imported_functions(self, source: bytes, imported: list, words: tuple, field: str,
                            called: bool = True, gate=None) -> set:
        """The project functions a ``Summary`` list (``field``) names, in the modules the file
        imports (whose text holds one of ``words``), as the file spells them: ``from utils import
        init as setup`` is ``setup``, ``import utils`` gives every listed name. ``called``: only
        from a module whose imported names the file calls; ``gate``: a finer test of the module's
        text, after ``words``."""
        out: set = set()
        for target, names in imported:
            if not self._words(target, words) or gate is not None and not gate(self._text(target)[1]):
                continue
            if called and names is not None and not _calls_any(source, [a or n for n, a in names]):
                continue
            s = self.summary(target)
            funcs = set(getattr(s, field)) if s is not None else set()
            if funcs:
                out |= {a or n for n, a in names if n in funcs} if names is not None else funcs
        return out

    def _imports_cuda_only(self, path: str, source: bytes) -> bool:
        """ProjectFacts.cuda_imports: the file, or a project module it imports at its top
        (through up to three such modules), imports at its top a package with no CPU path
        (CUDA_ONLY_PACKAGES but ``triton``), a compiled CUDA extension the project builds, or
        one named as ``torch.utils.cpp_extension`` builds are (``causal_conv1d_cuda``) that is
        no module of the project."""
        seen = {path}
        direct, frontier = self._top_step(path, source)  # (the file's own text may be an editor's)
        for _ in range(3):
            if direct:
                return True
            nxt = []
            for target in frontier:
                if target in seen:
                    continue
                seen.add(target)
                if target not in self._top_resolved:
                    text = self._text(target)
                    if text is None:
                        continue
                    self._top_resolved[target] = self._recorded(("top imports", target),
                                                                lambda: self._top_step(target, text[1]))
                else:
                    self._replay(("top imports", target))
                d, targets = self._top_resolved[target]
                if d:
                    return True
                nxt += targets
            frontier = nxt
        return direct

    def _top_step(self, path: str, text: bytes) -> tuple:
        """(``path`` imports a CUDA-only package or extension at its top, the project modules it
        imports there), memoised per module for a run."""
        tops = _top_imports(text)
        if not tops:
            return False, []
        return (self._names_cuda_only(path, tops) or _compiles_cuda_at_import(text),
                [t for t, _n in self._imports(path, Summary(imports=tops))])

    def _may_import_extension(self, path: str, spelled: list) -> bool:
        """Whether an import among ``spelled`` (``[module, level, names]``) may load a compiled
        extension the project builds: one that names neither the standard library nor torch,
        nor a Python module of the project (a module file, or a package whose imported names
        are its Python submodules). Where none may, the project's ``setup.py`` files, found by
        listing the whole tree, are not read: a one-file run of a large tree stays cheap."""
        for module, level, names in spelled:
            if not level and module.split(".")[0] in _NEVER_BUILT:
                continue
            if not level and not self._imports(path, Summary(imports=[[module.split(".")[0], 0, []]])) \
                    and _installed_python(module.split(".")[0]):
                continue  # a Python package installed from elsewhere (numpy): no build of this project
            for one in ([[n, a]] for n, a in names) if names else [[]]:
                got = self._imports(path, Summary(imports=[[module, level, one]]))
                # a submodule, a module file's own name, or the module itself: Python, not built
                if not got or any(left and t.endswith("__init__.py") and left != (("*", None),)
                                  for t, left in got):
                    return True
        return False

    def _names_cuda_only(self, path: str, tops: list) -> bool:
        built = None if self._may_import_extension(path, tops) else frozenset()
        for module, level, names in tops:
            if level:  # `from ._ext import nms`: a built extension's full name, no project module
                if names and module:
                    if built is None:
                        built = self._built_extensions()
                    if any(f"{module}.{n}" in built for n, _a in names) and not self._imports(
                            path, Summary(imports=[[module, level, names]])):
                        return True
                continue
            spelled = [module] if not names else [module] + [f"{module}.{n}" for n, _a in names]
            for dotted_name in spelled:
                root, last = dotted_name.split(".")[0], dotted_name.rsplit(".", 1)[-1]
                if root in _CUDA_ONLY_ROOTS:
                    return True
                if built is None:
                    built = self._built_extensions()
                if dotted_name in built or last in built:
                    return True
            if not names and module.endswith("_cuda") and "." not in module \
                    and not self._imports(path, Summary(imports=[[module, 0, []]])):
                return True  # `import causal_conv1d_cuda`: a compiled extension from elsewhere
        return False

    def _extensions_named(self, path: str, source: bytes, imported: list) -> frozenset:
        """The names this file gives compiled CUDA extensions of the project (ProjectFacts.extensions)."""
        out = set()
        if b"import" in source and self._may_import_extension(path, _text_imports(source)):
            built = self._built_extensions()
            if built:
                for m in _IMPORT_AS.finditer(source):
                    mod, alias = m.group(1).decode(), m.group(2)
                    if mod in built or mod.rsplit(".", 1)[-1] in built:
                        out.add(alias.decode() if alias else mod.split(".")[0])
                for m in _FROM_IMPORT.finditer(source):
                    mod = m.group(1).decode().lstrip(".")
                    for part in m.group(2).decode().strip("() ").split(","):
                        nm = _NAME_AS.match(" ".join(part.split()))
                        if nm and (f"{mod}.{nm.group(1)}" in built or (mod in built)):
                            out.add(nm.group(2) or nm.group(1))
        for target, names in imported:
            if not names:
                continue
            text = self._text(target)
            if text is None or b"load(" not in text[1] or b".cu" not in text[1]:
                continue
            loaded = {m.decode() for m in _LOAD_BOUND.findall(text[1])}
            out |= {a or n for n, a in names if n in loaded}
        return frozenset(out)

    def _stateless_modules(self, path: str, source: bytes) -> frozenset:
        """Class names this file calls (its own or imported from the project) that are
        stateless nn.Modules (``_stateless_class``)."""
        called = {m.decode() for m in re.findall(rb"(?<![.\w])([A-Z]\w*)[ \t]*\(", source)}
        # `decode.SOLOV2Decoder(...)`, `decode.__dict__["SOLOV2Decoder"](...)`: a class of a project
        # module the file imports whole
        heads = sorted({_module_stem(t) for t, names in self.imports(path) if names is None})
        heads = [h for h in heads if h.isidentifier() and h.encode() + b"." in source]
        if heads:  # (a pattern led by the names themselves: a class-led one scans every byte)
            pat = re.compile(rb"(?<![.\w])(" + "|".join(heads).encode() + _MODULE_CLASS_TAIL)
            called |= {f"{m.decode()}.{c.decode()}" for m, c in pat.findall(source)}
        return frozenset(n for n in called if self._stateless_class(path, n))

    def _project_files(self) -> list:
        """Every Python file under the root (skipping VCS, virtualenv and build directories),
        each directory noted with its stamp; at most 5,000 files. Listed once per run."""
        key = ("project files",)
        if self._unchanged(key):
            self._replay(key)  # no directory changed since the listing
            return self._files
        self._files = self._recorded(key, self._walk_files)
        self._checked[key] = _RUN[0]
        return self._files

    def _large_project(self) -> bool:
        """More than ``_WHOLE_PROJECT_FILES`` Python files under the root (a library, whose users
        are mostly elsewhere). Where the tree is not listed yet, a walk counts them and stops
        there: what it did not visit cannot make the answer no."""
        if self._unchanged(("project files",)):
            self._replay(("project files",))
            return len(self._files) > _WHOLE_PROJECT_FILES
        key = ("large project",)
        if self._unchanged(key):
            self._replay(key)
            return self._large
        self._large = self._recorded(key, self._count_files)
        self._checked[key] = _RUN[0]
        return self._large

    def _known_large(self) -> bool:
        """:meth:`_large_project` says yes, and this run has asked it already (its dependencies
        replayed): a cheap first test, which never lists the tree itself."""
        for key in (("project files",), ("large project",)):
            if _RUN[0] is not None and key in self._memo_deps and self._checked.get(key) == _RUN[0]:
                return self._large_project()
        return False

    def _count_files(self) -> bool:
        n = 0
        for d, dirs, files in os.walk(self.root):
            dirs[:] = sorted(x for x in dirs if x not in _SKIP_DIRS and not x.startswith("."))
            self._note(d, _stamp(d))
            n += sum(1 for f in files if f.endswith(".py"))
            if n > _WHOLE_PROJECT_FILES:
                return True
        return False

    def _unchanged(self, key) -> bool:
        """The listing memoised under ``key`` still stands: checked in this run already, or no
        file or directory it was read from has a new stamp."""
        if key not in self._memo_deps:
            return False
        if _RUN[0] is not None and self._checked.get(key) == _RUN[0]:
            return True
        if all(_stamp(d) == st for d, st in self._memo_deps[key].items()):
            self._checked[key] = _RUN[0]
            return True
        return False

    def _walk_files(self) -> list:
        out: list = []
        notebooks: list = []
        blobs: dict = {}
        for d, dirs, files in os.walk(self.root):
            dirs[:] = sorted(x for x in dirs if x not in _SKIP_DIRS and not x.startswith("."))
            self._note(d, _stamp(d))
            out += [os.path.join(d, f) for f in sorted(files) if f.endswith(".py")]
            notebooks += [os.path.join(d, f) for f in sorted(files) if f.endswith(".ipynb")]
            for f in files:
                if f.endswith(_BLOB_EXTENSIONS):
                    blobs.setdefault(f, []).append(os.path.join(d, f))
            if len(out) > 5000:
                break
        self._notebooks = notebooks
        self._blobs = blobs
        return out

    def _default_left(self, path: str, callee: str, param: str, pos: Optional[int]) -> bool:
        """A call ``callee(...)`` in another file of the project that passes neither
        ``param=`` nor an argument at its position (nor ``*args`` / ``**kwargs``)."""
        name = callee.encode()
        files = self._project_files()
        if len(files) > _WHOLE_PROJECT_FILES:
            # a large library: its callers near the definition (its directory, with what is
            # below it) stand for the rest
            near = os.path.dirname(path) + os.sep
            files = [f for f in files if f.startswith(near)]
        for other in files:
            if other == path:
                continue
            text = self._text(other)
            if text is None or name not in text[1]:
                continue
            starts = _call_starts(text[1], name)
            if not starts or _TOP_CUDA_ONLY_IMPORT.search(text[1]):
                continue  # (a caller in a module built on a CUDA-only package runs with a GPU anyway)
            if re.search(rb"^(?:def|class)[ \t]+" + re.escape(name) + rb"\b", text[1], re.M):
                continue  # that module defines its own `callee`: its calls run that one
            if all(param.encode() + b"=" in _call_text(text[1], i) for i in starts):
                continue  # every call spells `param=`: no parse needed
            try:
                tree = _parsed(text[1])
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                continue
            for n in ast.walk(tree):
                if not (isinstance(n, ast.Call) and (_dotted(n.func) or "").rsplit(".", 1)[-1] == callee):
                    continue
                if any(k.arg == param or k.arg is None for k in n.keywords):
                    continue
                if any(isinstance(x, ast.Starred) for x in n.args) or (pos is not None and len(n.args) > pos):
                    continue
                return True
        return False

    def _neighbours(self, path: str) -> list:
        """The Python files of ``path``'s directory and of the one above (inside the root)."""
        here = os.path.dirname(os.path.abspath(path))
        dirs = [here]
        up = os.path.dirname(here)
        if os.path.commonpath([up, self.root]) == self.root and up != here:
            dirs.append(up)
        out = []
        for d in dirs:
            self._note(d, _stamp(d))
            try:
                names = sorted(os.listdir(d))
            except OSError:
                continue
            out += [os.path.join(d, n) for n in names if n.endswith(".py") and os.path.isfile(os.path.join(d, n))]
        return out

    # ---- requirements through calls into other modules --------------------------------
    def _calls(self, path: str) -> Optional[_Calls]:
        text = self._text(path)
        if text is None:
            return None
        key = (path, hash(text[1]))
        if key not in self._calls_memo:
            self._calls_memo[key] = _calls_summary(text[1])
        return self._calls_memo[key]

    def function_ensures(self, path: str, name: str, depth: int = 5) -> bool:
        """The function ``name`` of the module at ``path`` exits, raises or asserts without CUDA
        (or starts an NCCL process group) before it returns: by its own code or by calling,
        first thing, a function of this or another project module that does."""
        key = (path, name)
        if key in self._ensures_memo:
            self._replay(("ensures", key))
            return self._ensures_memo[key]
        if depth <= 0:
            return False
        self._ensures_memo[key] = False  # a cycle of calls ensures nothing
        found = self._recorded(("ensures", key), lambda: self._compute_ensures(path, name, depth))
        self._ensures_memo[key] = found
        return found

    def _compute_ensures(self, path: str, name: str, depth: int) -> bool:
        calls = self._calls(path)
        if calls is None:
            return False
        if name in calls.ensuring:
            return True
        return any(self._callee_ensures(path, callee, depth - 1) for callee in calls.first.get(name, ()))

    def _callee_ensures(self, path: str, callee: str, depth: int) -> bool:
        """``callee`` as spelled in the module at ``path`` (``setup``, ``distributed.enable``)."""
        if depth <= 0:
            return False
        calls = self._calls(path)
        head, _, rest = callee.partition(".")
        if calls is not None and callee in calls.functions:  # `setup`, or `Bank.mine` of a class here
            return self.function_ensures(path, callee, depth)
        aliases = self._class_info(path)[1]  # import aliases, memoised by content
        for target, names in self.imports(path):
            if names is None:
                stem = os.path.splitext(os.path.basename(target))[0]
                if stem == "__init__":
                    stem = os.path.basename(os.path.dirname(target))
                if rest and "." not in rest and stem in (head, aliases.get(head, head).split(".")[-1]):
                    return self.function_ensures(target, rest, depth)
                continue
            for n, a in names:
                if (a or n) == head and not rest:
                    return self.function_ensures(target, n, depth)
                if (a or n) == head and "." not in rest:  # `from memory import Bank`: `Bank.mine`
                    return self.function_ensures(target, f"{n}.{rest}", depth)
        return False

    # ---- who uses a function: only code that requires CUDA anyway ----------------------
    def cuda_callers(self, path: str, source: bytes) -> frozenset:
        """ProjectFacts.cuda_callers: of the top-level functions and classes of ``path`` whose
        code names CUDA, those every use of which in the project runs only where CUDA is
        (:meth:`_only_cuda_uses`). Not asked of a large library (more than
        ``_WHOLE_PROJECT_FILES`` modules), whose users are mostly elsewhere."""
        if self._known_large():  # (answered already in this run: no scan of the file's blocks)
            return frozenset()
        tops = _top_starts(source)[0]
        wanted = []
        for i, start in enumerate(tops):
            head = _TOP_HEAD.match(source, start)
            if head is not None and b"cuda" in source[start:tops[i + 1] if i + 1 < len(tops) else len(source)]:
                wanted.append(head.group(1).decode())
        # (a class naming CUDA is among `wanted` already: its methods cost no further reads)
        methods = _cuda_methods(source, tops) if wanted else []
        if not (wanted or methods) or self._large_project():
            return frozenset()
        public = _quoted_in_all(source)
        out = {n for n in wanted if n not in public and self._only_cuda_uses(path, n, 3)}
        out |= {f"{cls}.{meth}" for cls, meth in methods
                if cls not in out and cls not in public and self._only_wrapper_uses(path, meth)}
        return frozenset(out)

    def _only_wrapper_uses(self, path: str, method: str) -> bool:
        """Every use of the word ``method`` in the project, but its definition, reads it off the
        ``.module`` of a model that its module binds only to the result of a function wrapping
        the model in ``DataParallel`` when GPUs were asked for (``model.module.encode_features(x)``
        after ``model = create_model(opt)``): only that wrapper has ``.module``, so the method runs
        on the GPU path only (what :func:`guards.reads_gpu_wrapper` reads within one file). At
        least one such use; none in a notebook, nor a bare or ``self.`` call."""
        word = method.encode()
        pattern = re.compile(rb"\b" + re.escape(word) + rb"\b")
        for nb in self._notebooks:
            text = self._text(nb)
            if text is not None and word in text[1] and pattern.search(text[1]):
                return False
        found = False
        for other in self._project_files():
            text = self._text(other)
            if text is None or word not in text[1]:
                continue
            data = text[1]
            receivers = set()
            for m in pattern.finditer(data):
                p = m.start()
                line = data.rfind(b"\n", 0, p) + 1
                head = data[line:p]
                if head.lstrip().startswith(b"#") or (other == path and _DEFINES.match(head)):
                    continue
                r = _MODULE_RECEIVER.search(head)
                if r is None:
                    return False
                receivers.add(r.group(1).decode())
            if not receivers:
                continue
            wrappers = self._gpu_wrappers(data, self.imports(other))
            if not wrappers or not all(_bound_only_to(data, n, wrappers) for n in receivers):
                return False
            found = True
        return found

    def _only_cuda_uses(self, path: str, name: str, depth: int) -> bool:
        """Every use of the top-level ``name`` of the module at ``path`` (other than its own
        definition, an import or a comment) sits in code that runs only where CUDA is, and
        there is one: a script body that requires CUDA first thing (:meth:`script_requires_cuda`),
        a module built on a CUDA-only package (``cuda_imports``), or a function that requires
        CUDA itself or is used only so (through ``depth`` such steps). A use in a notebook or
        in a package's ``__init__`` (an export, for callers the project does not show) vouches
        for nothing; nor does a use the text cannot place."""
        key = (path, name)
        hit = self._callers_memo.get(key)
        if hit is not None and hit[0] == _RUN[0] is not None:
            self._replay(("callers", key))
            return hit[1]
        if depth <= 0:
            return False
        self._callers_memo[key] = (_RUN[0], False)  # a cycle of uses vouches for nothing
        found = self._recorded(("callers", key), lambda: self._compute_only_cuda_uses(path, name, depth))
        self._callers_memo[key] = (_RUN[0], found)
        if _RUN[0] is None:
            del self._callers_memo[key]  # outside a run, every question reads the files again
        return found

    def _compute_only_cuda_uses(self, path: str, name: str, depth: int) -> bool:
        word = name.encode()
        files = self._project_files()
        for nb in self._notebooks:
            text = self._text(nb)
            if text is not None and word in text[1] and re.search(rb"\b" + re.escape(word) + rb"\b", text[1]):
                return False  # a notebook's cells run wherever its reader runs them
        users = []  # (module, its text, the places it uses the name)
        for other in files:
            text = self._text(other)
            if text is None or word not in text[1]:
                continue
            if other != path and not any(t == path for t, _n in self.imports(other)):
                continue  # another object of the same name
            if os.path.basename(other) in ("__init__.py", "hubconf.py") and other != path \
                    and re.search(rb"\b" + re.escape(word) + rb"\b", text[1]):
                return False  # a package's export, torch.hub's entry point: their users are elsewhere
            contexts = _uses(text[1], name)
            if other == path:
                contexts.discard(name)  # (its own recursion)
            if not contexts:
                continue
            if self._imports_cuda_only(other, text[1]):
                users.append((other, text, set()))  # the program cannot start without CUDA
                continue
            if None in contexts and not self._may_need_cuda(other, text[1]):
                return False  # a script body where nothing (nor what it imports) checks for CUDA
            users.append((other, text, contexts))
        for other, text, contexts in users:
            if contexts and (b"is_available" in text[1] or b"device_count" in text[1]):
                contexts = _unguarded_uses(text[1], name, contexts)
                if other == path:
                    contexts.discard(name)
            for ctx in contexts:
                if ctx is None:
                    if not (text[0] and self._script_needs_cuda(other)):
                        return False
                elif not (self.function_ensures(other, ctx) or self.function_ensures(other, f"{ctx}.__init__")
                          or self._only_cuda_uses(other, ctx, depth - 1)):
                    return False  # (a class whose constructor requires CUDA runs its methods only there)
        return bool(users)

    def _may_need_cuda(self, path: str, text: bytes) -> bool:
        """A cheap gate before a script is parsed: it, or a project module it imports (through
        three), names anything that can make it require CUDA (an availability check, an NCCL
        group, faiss's GPU API)."""
        if any(w in text for w in _AVAILABILITY_WORDS):
            return True
        return any(self._words(p, _AVAILABILITY_WORDS) for p in self.closure(path))

    def _script_needs_cuda(self, path: str) -> bool:
        """Running the module at ``path`` as a script requires CUDA first thing: by its own code
        (``assert torch.cuda.is_available()``) or through what it calls."""
        text = self._text(path)
        if text is not None and _may_ensure(text[1]):
            s = self.summary(path)
            if s is not None and s.requires_cuda:
                return True
        return self.script_requires_cuda(path)

    def script_requires_cuda(self, path: str) -> bool:
        """Running the module at ``path`` as a script requires CUDA before it does its work:
        its body (or ``__main__`` block) calls, unconditionally, a function that does."""
        if not self._may_ensure(path) and not any(self._may_ensure(p) for p in self.closure(path)):
            return False  # nothing the program runs stops without CUDA: no parse needed to say so
        calls = self._calls(path)
        return calls is not None and any(self._callee_ensures(path, c, 5) for c in calls.main)

    # ---- classes --------------------------------------------------------------------
    def _class_info(self, path: str) -> tuple:
        """(classes, aliases) of a project module, by stat stamp (no parse)."""
        text = self._text(path)
        if text is None:
            return {}, {}
        key = (path, hash(text[1]))
        hit = self._class_memo.get(key)
        if hit is None:
            data = text[1]
            hit = self._class_memo[key] = (_classes(data), _torch_aliases(data, _text_imports(data)))
        return hit

    def _resolve_class(self, path: str, spelled: str, depth: int = 5):
        """``(moves, owned, plain)`` when the class ``spelled`` as seen from ``path`` descends
        from nn.Module (through project classes of this or other modules), else None."""
        if depth <= 0:
            return None
        classes, aliases = self._class_info(path)
        head, _, rest = spelled.partition(".")
        if not rest and spelled in classes:
            info = classes[spelled]
            moves, owned, plain = info.moves, set(info.owned), True
            found = False
            for base in info.bases:
                if base == spelled:
                    continue
                q = aliases.get(base.split(".")[0])
                qualified = q + base[len(base.split(".")[0]):] if q is not None else None
                if qualified is not None and is_module_base(qualified):
                    found = True
                    plain = plain and qualified in ("torch.nn.Module", "torch.nn.modules.module.Module")
                    continue
                r = self._resolve_class(path, base, depth - 1)
                if r is not None:
                    found = True
                    moves = moves or r[0]
                    owned |= r[1]
                    plain = plain and r[2]
                else:
                    plain = False  # a mixin or a base we cannot read may own any name
            return (moves, frozenset(owned), plain) if found else None
        for target, names in self.imports(path):
            if names is None:
                # `import models.base as base`, `from . import base`: `base.BaseModel`
                stem = os.path.splitext(os.path.basename(target))[0]
                if stem == "__init__":
                    stem = os.path.basename(os.path.dirname(target))
                named = aliases.get(head, head).split(".")[-1]  # `import models.base as mb`
                if rest and stem in (head, named) and "." not in rest:
                    return self._resolve_class(target, rest, depth - 1)
                continue
            for n, a in names:
                if (a or n) == spelled:
                    return self._resolve_class(target, n, depth - 1)
        return None

    def _gpu_bases(self, path: str, source: bytes, imports: list) -> frozenset:
        """The bases of the file's classes that are project GPU trainers (ProjectFacts.gpu_bases)."""
        if not _CLASS_HEAD.search(b"\n" + source):
            return frozenset()
        return frozenset(b for b in _project_bases(source, imports) if self._gpu_class(path, b))

    def _class_holds(self, path: str, spelled: str, found, depth: int = 5) -> bool:
        """``found(path, name, info, depth)`` for the class ``spelled`` as seen from ``path``:
        asked of the module that defines it, reached through the imports that bring it in (a
        module's attribute, a name, a package re-exporting a module's names)."""
        if depth <= 0:
            return False
        classes, _aliases = self._class_info(path)
        head, _, rest = spelled.partition(".")
        if not rest and spelled in classes:
            return found(path, spelled, classes[spelled], depth)
        for target, names in self.imports(path):
            if names is None:
                stem = os.path.splitext(os.path.basename(target))[0]
                if rest and "." not in rest and stem == head:
                    return self._class_holds(target, rest, found, depth - 1)
                if (not rest and os.path.basename(path) == "__init__.py"
                        and self._class_holds(target, spelled, found, depth - 1)):
                    return True  # a package re-exporting a module's names (`from .base import *`)
                continue
            for n, a in names:
                if (a or n) == spelled:
                    return self._class_holds(target, n, found, depth - 1)
        return False

    def _gpu_class(self, path: str, spelled: str, depth: int = 5) -> bool:
        """The class ``spelled`` as seen from ``path`` (or one of its project bases) wraps its
        model in ``DistributedDataParallel(..., device_ids=...)`` unconditionally in a method."""
        return self._class_holds(path, spelled, lambda p, name, info, d: info.gpu or any(
            b != name and self._gpu_class(p, b, d - 1) for b in info.bases), depth)

    def _dataset_bases(self, path: str, source: bytes, imports: list) -> frozenset:
        """The bases of the file's classes that are project datasets (ProjectFacts.dataset_bases)."""
        if not _CLASS_HEAD.search(b"\n" + source):
            return frozenset()
        return frozenset(b for b in _project_bases(source, imports) if self._dataset_class(path, b))

    def _dataset_class(self, path: str, spelled: str, depth: int = 5) -> bool:
        """The class ``spelled`` as seen from ``path`` is a dataset: one of its bases, or of its
        project bases', is named as datasets are (``Dataset``, ``InMemoryDataset``, ``DataModule``)."""
        def found(p, name, info, d):
            bases = [b for b in info.bases if b != name]
            return any(b.rsplit(".", 1)[-1].endswith(DATASET_NAMES) for b in bases) or any(
                self._dataset_class(p, b, d - 1) for b in bases)
        return self._class_holds(path, spelled, found, depth)

    def _stateless_class(self, path: str, spelled: str, depth: int = 5) -> bool:
        """The class ``spelled`` as seen from ``path`` is an nn.Module with no parameter, buffer
        or stateful submodule, itself or through its project bases (down to exactly nn.Module)."""
        if depth <= 0:
            return False
        classes, aliases = self._class_info(path)
        if "." not in spelled and spelled in classes:
            info = classes[spelled]
            if info.held is None or not info.bases:
                return False
            for name in info.held:  # each held instance: a plain class, or a stateless module
                if name == spelled or not (self._plain_class(path, name, depth - 1)
                                           or self._stateless_class(path, name, depth - 1)):
                    return False
            for base in info.bases:
                q = aliases.get(base.split(".")[0])
                qualified = q + base[len(base.split(".")[0]):] if q is not None else None
                if qualified in ("torch.nn.Module", "torch.nn.modules.module.Module"):
                    continue
                if base == spelled or not self._stateless_class(path, base, depth - 1):
                    return False
            return True
        head, _, rest = spelled.partition(".")
        for target, names in self.imports(path):
            if rest and "." not in rest and names is None and _module_stem(target) == head:
                return self._stateless_class(target, rest, depth - 1)  # `decode.SOLOV2Decoder`
            for n, a in names or ():
                if (a or n) == spelled:
                    return self._stateless_class(target, n, depth - 1)
        return False

    def _plain_class(self, path: str, spelled: str, depth: int) -> bool:
        """The class ``spelled`` as seen from ``path`` is a plain class of the project (no base
        but ``object``): not an nn.Module, so a Module's ``.cuda()`` never reaches its instances."""
        if depth <= 0 or not spelled.isidentifier():
            return False
        text = self._text(path)
        if text is None:
            return False
        if re.search(rb"\nclass[ \t]+" + spelled.encode() + rb"\b", b"\n" + text[1]):
            return re.search(rb"\nclass[ \t]+" + spelled.encode() + rb"[ \t]*(?:\([ \t]*(?:object)?[ \t]*\))?[ \t]*:",
                             b"\n" + text[1]) is not None
        for target, names in self.imports(path):
            for n, a in names or ():
                if (a or n) == spelled:
                    return self._plain_class(target, n, depth - 1)
        return False

    def module_bases(self, path: str, source: bytes, imports: list) -> frozenset:
        """The bases of the file's classes that are project classes descending from nn.Module
        (``imports``: the file's own, read off its text)."""
        out = set()
        for base in _project_bases(source, imports):
            r = self._resolve_class(path, base)
            if r is not None:
                out.add((base, r[0], r[1], r[2]))
        return frozenset(out)

    # ---- one file's facts -----------------------------------------------------------
    def facts_for(self, path: str, source: Optional[bytes] = None) -> ProjectFacts:
        """``source``: the file's Python source when it is not the file's bytes (a notebook)."""
        path = os.path.abspath(path)
        if os.path.commonpath([path, self.root]) != self.root:
            return NONE
        if source is None:
            try:
                if path.endswith(".ipynb"):
                    source = _notebook_python(path)
                else:
                    with open(path, "rb") as f:
                        source = f.read()
            except OSError:
                return NONE
            if source is None:
                return NONE
        digest = hashlib.sha1(source).hexdigest()
        kept = self._kept_facts(path, digest)
        if kept is not None:
            return kept
        rec: dict = {}
        self._recs.append(rec)
        collecting = gc.isenabled()
        gc.disable()  # (its trees hold no cycles: they go by reference count, a collection only walks them)
        try:
            facts = self._facts_for(path, source)
        finally:
            if collecting:
                gc.enable()
            self._recs.pop()
            # the trees read for this file's questions go with them: kept alive through the
            # file's own lint, each of their nodes would be walked by every collection its
            # parse triggers
            _PARSED.clear()
        self._keep_facts(path, digest, facts, rec)
        return facts

    # ---- facts kept under the lint cache, with the stamps they were read from --------
    def _facts_entry(self, path: str) -> Optional[str]:
        if self.cache_dir is None:
            return None
        h = hashlib.sha1(path.encode("utf-8", "surrogateescape")).hexdigest()
        return os.path.join(self.cache_dir, "facts", h[:2], h[2:] + ".json")

    def _kept_facts(self, path: str, digest: str) -> Optional[ProjectFacts]:
        entry = self._facts_entry(path)
        if entry is None:
            return None
        try:
            with open(entry, encoding="utf-8") as f:
                data = json.load(f)
            if data["source"] != digest:
                return None
            for dep, stamp in data["deps"]:
                if _stamp(dep) != (tuple(stamp) if stamp is not None else None):
                    return None
            return _facts_from_json(data["facts"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _keep_facts(self, path: str, digest: str, facts: ProjectFacts, deps: dict) -> None:
        entry = self._facts_entry(path)
        if entry is None:
            return
        data = {"source": digest, "deps": sorted(([d, list(st) if st else None] for d, st in deps.items()),
                                                 key=lambda x: x[0]),
                "facts": _facts_to_json(facts)}
        try:
            os.makedirs(os.path.dirname(entry), exist_ok=True)
            tmp = f"{entry}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(data, f)
            os.replace(tmp, entry)
        except OSError:
            pass  # best effort, as for summaries

    def _facts_for(self, path: str, source: bytes) -> ProjectFacts:
        # of its own file the index needs only what its text says (imports, script or not):
        # what it requires or saves is the file's own model's business
        own = _text_summary(source)
        # only what the file's own text can use is asked: CUDA facts for code that names CUDA
        # (DL002, DL004), checkpoint facts for code that loads (DL005)
        need_cuda = b"cuda" in source or b"pin_memory" in source
        need_ckpt = _loads_checkpoint(source)
        # a class deriving a project class may be an nn.Module defined in another file
        module_bases = self.module_bases(path, source, own.imports) if _CLASS_HEAD.search(b"\n" + source) else frozenset()
        need_tensor = _bare_conversion(source)  # DL001: what a moved value is
        # DL002: a CUDA device default is reported where some call leaves it in place
        defaults_reached = (self._defaults_reached(path, source) if need_cuda and b"device" in source
                            and _ASSIGNED_CUDA.search(source)  # (both assign a quoted "cuda")
                            and (_CUDA_DEFAULT.search(source) or _CUDA_FALLBACK.search(source)
                                 or _CUDA_IFEXP.search(source)) else frozenset())
        # DL002: `Criterion(...).cuda()` of a Module holding nothing to move
        stateless = self._stateless_modules(path, source) if b".cuda(" in source else frozenset()
        # DL003/DL010: a function looping over a parameter its callers elsewhere fill with a DataLoader
        loader_params = (self._loader_params(path, source) if (b".cuda(" in source or b".to(" in source)
                         and _LOOPED_PARAM_HINT.search(b"\n" + source) else frozenset())
        imported = None
        placing: frozenset = frozenset()
        if own.script and own.imports and b"torch" in source and not _places_in_code(source):
            # DL010: a file that never spells a device may still place its values, through a
            # project helper (`to_var(x)`, `get_batch(split)`, `Trainer(model)`)
            imported = self.imports(path, own)
            placing = self._placing_imported(imported, source)
        # DL009: a plain tensor attribute that a project `_apply` elsewhere moves with the model
        applied = self._applied(path, source) if _TENSOR_ATTRIBUTE.search(source) else frozenset()
        # DL009: a script naming no device runs its modules on the host, unless another module imports them
        # DL002: a device name a script binds at its top and never reads places nothing, unless
        # another module imports it
        reused = (own.script and ((_CLASS_HEAD.search(b"\n" + source) is not None and _NAMES_DEVICE.search(source) is None)
                                  or unread_device_names(source))
                  and self._imported(path))
        if not (need_cuda or need_ckpt or need_tensor):
            return ProjectFacts(module_bases=module_bases, defaults_reached=defaults_reached,
                                stateless_modules=stateless, placing=placing, loader_params=loader_params,
                                applied=applied, imported=reused) if (
                module_bases or defaults_reached or stateless or placing or loader_params or applied
                or reused) else NONE
        imported = self.imports(path, own) if imported is None else imported
        extensions = self._extensions_named(path, source, imported) if need_cuda else frozenset()
        tensor_functions = self._imported_functions(source, imported, (b"return",), "tensor_returns",
                                                    called=False) if need_tensor else set()
        # a module that never checks for CUDA has no function that requires it; nor can a
        # function this file never calls make it CUDA-only
        entry = self._imported_functions(source, imported, _AVAILABILITY_WORDS, "cuda_functions", gate=_may_ensure) \
            if need_cuda else set()
        kernel_functions = self._imported_functions(source, imported, (b"triton", b"helion"), "kernel_functions") \
            if need_cuda else set()
        # decorators that run what they wrap only with CUDA: the file's own and the project's
        decorators = {d.decode() for d in _DECORATOR.findall(b"\n" + source)} if need_cuda and b"@" in source else set()
        gpu_decorators = set()
        if decorators:  # (only the modules whose names the file uses as decorators are read)
            used = [(t, names) for t, names in imported if names is None
                    or any((a or n) in decorators for n, a in names)]
            gpu_decorators = self._imported_functions(source, used, (b"is_available", b"device_count"),
                                                      "gpu_decorators", called=False)
            gpu_decorators = {d for d in gpu_decorators if d in decorators} | {
                d for d in decorators if d.rsplit(".", 1)[-1] in gpu_decorators and "." in d}
        checks = self._imported_functions(source, imported, (b"is_initialized",), "dist_checks") \
            if need_cuda and b"dist" in source else set()
        cuda_only = False
        nccl_only = False
        program = {t for t, _ in imported}
        own_requires = need_cuda and own.script and self.script_requires_cuda(path)
        # (a large library's own scripts are not the users of its modules: who imports one there
        # says nothing about where it runs)
        if need_cuda and (not own.script or own_requires) and os.path.basename(path) != "__init__.py" \
                and (own_requires or not self._large_project()):
            importers = []
            importer_paths: list = []
            stem = os.path.splitext(os.path.basename(path))[0].encode()
            for other in self._neighbours(path):
                # an importer is a script that names this module: read off the text first, so a
                # library's directory of large modules costs a read each, not a parse
                if other == path or not self._may_import(other, stem) or path not in self.closure(other):
                    continue
                s = self.summary(other)
                # `hubconf.py`: torch.hub's entry points, run by whoever loads the model
                if s is not None and (s.script or os.path.basename(other) == "hubconf.py"):
                    importers.append(s)
                    importer_paths.append(other)
            # a script that requires CUDA first thing is CUDA-only too, unless another script
            # imports its code and runs without a GPU
            cuda_only = (bool(importers) or own_requires) and all(
                s.requires_cuda or self.script_requires_cuda(p) for s, p in zip(importers, importer_paths))
            # the process groups the importing programs start (in the scripts or what they import)
            backends = []
            for script in importer_paths:
                for p in {script} | self.closure(script):
                    if p != path and self._words(p, _INIT_WORDS):
                        s = self.summary(p)
                        backends += s.backends if s is not None else [None]
            nccl_only = bool(backends) and all(b == "nccl" for b in backends)
        if checks and not nccl_only:
            # asked "is a process group up" through a project function: the groups the project
            # modules this file imports start (the helper's own module among them)
            backends = []
            for p in self.closure(path):
                if p != path and self._words(p, _INIT_WORDS):
                    s = self.summary(p)
                    backends += s.backends if s is not None else [None]
            nccl_only = bool(backends) and all(b == "nccl" for b in backends)
        if need_cuda and not nccl_only and b"init_process_group" not in source and _ASKS_DIST.search(source):
            # a module asking about the process group that no script beside it starts: the groups
            # the whole project starts (a training script in another directory), when it is small
            nccl_only = self._project_nccl_only()
        host_files: frozenset = frozenset()
        gpu_files: frozenset = frozenset()
        host_program = False
        savers = self._imported_functions(source, imported, _SAVE_WORDS, "savers") if need_ckpt else set()
        paths = set()
        for target, names in (imported if need_ckpt else ()):
            if names is None or not self._words(target, (b".pth", b".pt", b".ckpt", b".pkl", b".bin", b".tar")):
                continue
            s = self.summary(target)
            known = dict(s.checkpoint_paths) if s is not None else {}
            paths |= {f"{a or n}={known[n]}" for n, a in names if n in known}
        if need_ckpt:
            here = os.path.dirname(path)
            for other in self._neighbours(path):
                if (os.path.dirname(other) == here and other != path and self._words(other, _SAVE_WORDS)
                        and _MAYBE_SCRIPT.search(b"\n" + self._text(other)[1])):  # (no script: no parse)
                    s = self.summary(other)
                    if s is not None and s.script:
                        program.add(other)
            saves: dict = {}
            all_saves = []
            helpers = {t for t, _ in imported}
            for t in list(helpers):
                if os.path.basename(t) == "__init__.py":
                    # a package's `__init__` re-exports its modules (`from .lora import *`): what the
                    # file calls through it is theirs
                    reexported = {m for m, _ in self.imports(t) if os.path.dirname(m).startswith(os.path.dirname(t))}
                    helpers |= reexported
                    program |= reexported
            for p in program - {path}:  # the file's own saves are its own model's business
                s = self.summary(p) if self._words(p, _SAVE_WORDS) else None
                for name, host, model, explicit in (s.saves if s is not None else ()):
                    # a path the code does not spell is a model checkpoint, if anything, or what
                    # a helper this file imports moves to the host itself (`weights.append(w.cpu())`)
                    if model or (explicit and p in helpers):
                        all_saves.append(host)
                    if name:
                        saves.setdefault(name, []).append(host)
            host_files = frozenset(n for n, hosts in saves.items() if all(hosts))
            gpu_files = frozenset(saves) - host_files
            # data files the project's code moves to the host itself before saving, wherever
            # that code is (an evaluation module writing `gt.pt` from `rows.append(p.cpu())`,
            # read back by scripts elsewhere)
            host_files |= self._explicit_host_saves(source) - gpu_files
            host_program = bool(all_saves) and all(all_saves)
            if host_program and self._words(path, _SAVE_WORDS):
                # ... and the file's own model checkpoints are part of its program too: one saved
                # from the device (`save_checkpoint(net_g, ...)` of a GPU run) is no host data
                own = self.summary(path)
                host_program = own is None or all(host for _n, host, model, _e in own.saves if model)
        if need_cuda and not cuda_only and self._cog_gpu(path, source):
            cuda_only = True
        cuda_imports = need_cuda and self._imports_cuda_only(path, source)
        # DL002/DL004: functions of this file that only code requiring CUDA anyway uses
        callers = (self.cuda_callers(path, source) if need_cuda and not (cuda_only or cuda_imports)
                   and _TOP_DEF_OR_CLASS.search(source) else frozenset())
        return ProjectFacts(cuda_only=cuda_only, cuda_entry=frozenset(entry), host_files=host_files,
                            gpu_files=gpu_files,
                            host_program=host_program, module_bases=module_bases, nccl_only=nccl_only,
                            tensor_functions=frozenset(tensor_functions), defaults_reached=defaults_reached,
                            stateless_modules=stateless, extensions=extensions, placing=placing,
                            loader_params=loader_params,
                            gpu_bases=self._gpu_bases(path, source, own.imports) if need_cuda else frozenset(),
                            dataset_bases=self._dataset_bases(path, source, own.imports) if need_ckpt else frozenset(),
                            cuda_imports=cuda_imports,
                            dist_checks=frozenset(checks), applied=applied, savers=frozenset(savers),
                            checkpoint_paths=frozenset(paths), imported=reused, cuda_callers=callers,
                            switches=self._switches(path, source) if need_cuda else frozenset(),
                            backend_helpers=self._backend_helpers(path) if need_cuda and b"nccl" in source
                            else frozenset(),
                            gpu_wrappers=self._gpu_wrappers(source, imported) if need_cuda and b".module." in source
                            else frozenset(),
                            host_blobs=self._host_blobs(source) if need_ckpt else frozenset(),
                            kernel_functions=frozenset(kernel_functions),
                            gpu_decorators=frozenset(gpu_decorators))

    def _host_blobs(self, source: bytes) -> frozenset:
        """``ProjectFacts.host_blobs``: of the checkpoint names the file spells in string
        literals, those whose every file of that name in the project is a torch file with CPU
        storages only (at least one)."""
        spelled = _spelled_blobs(source)
        if not spelled:
            return frozenset()
        self._project_files()  # (lists the project's checkpoint-like files too)
        out = set()
        for name in spelled:
            paths = [p for n, ps in self._blobs.items() if same_file(name, n) for p in ps]
            if paths and all(self._host_blob(p) for p in paths):
                out.add(name)
        return frozenset(out)

    def _host_blob(self, path: str) -> bool:
        """``path`` is a torch file (or a pickle) whose storages are all on the CPU, read without
        torch: a zip checkpoint's ``data.pkl`` names each storage's location, a legacy one (read
        only up to 2 MB) spells them in its pickle. Any ``cuda`` in there says no; so does a file
        that is neither (a Git LFS pointer, say)."""
        stamp = _stamp(path)
        self._note(path, stamp)
        hit = self._blob_host.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        import zipfile  # (only a project that ships checkpoint files pays for the import)

        host = False
        try:
            if zipfile.is_zipfile(path):
                with zipfile.ZipFile(path) as z:
                    pkls = [n for n in z.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
                    host = len(pkls) == 1 and b"cuda" not in z.read(pkls[0])
            elif stamp is not None and os.path.getsize(path) <= _LEGACY_BLOB_LIMIT:
                with open(path, "rb") as f:
                    data = f.read()
                host = data[:1] == b"\x80" and b"cuda" not in data
        except (OSError, zipfile.BadZipFile, ValueError, RuntimeError):
            host = False
        self._blob_host[path] = (stamp, host)
        return host

    def _gpu_wrappers(self, source: bytes, imported: list) -> frozenset:
        """``ProjectFacts.gpu_wrappers``: the imported ones from their modules' summaries; the
        file's own from its text (an ``ast`` read, only when the text could hold one)."""
        out = self._imported_functions(source, imported, (b"DataParallel(",), "gpu_wrappers")
        if _may_wrap(source):
            try:
                tree = _parsed(source)
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                tree = None
            if tree is not None:
                out |= {fn.name for fn in tree.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and _wraps_for_gpus(fn)}
        return frozenset(out)

    def _backend_helpers(self, path: str) -> frozenset:
        """``ProjectFacts.backend_helpers``: imported project functions whose backend is a parameter."""
        out = set()
        for target, names in self.imports(path):
            if not self._words(target, (b"init_process_group",)):
                continue
            s = self.summary(target)
            for fn, index, param in (s.backend_params if s is not None else ()):
                spelled = [fn] if names is None else [a or n for n, a in names if n == fn]
                out |= {f"{name}:{index}:{param}" for name in spelled}
        return frozenset(out)

    def _switches(self, path: str, source: bytes) -> frozenset:
        """``ProjectFacts.switches``: what the project modules this file imports set once, for
        the switch-like names the file reads bare (read off the modules' text, no parse)."""
        star = b"import *" in source
        if not star and _IMPORTS_SWITCH.search(b"\n" + source) is None:
            return frozenset()  # no project switch can reach the file's bare names
        wanted = {w for w in set(_SWITCH_READ.findall(source))  # (a name the file binds is its own)
                  if re.search(rb"(?<![.\w])" + w + rb"[ \t]*=(?!=)", source) is None}
        if not star:  # a name imported by name: the import line spells it
            wanted = {w for w in wanted if re.search(rb"import[^\n]*\b" + w + rb"\b", source)}
        if not wanted:
            return frozenset()
        out = set()
        for target, names in self.imports(path):
            if names is None and not star:
                continue  # `import constants`: its names are read as `constants.X`
            spelled = wanted if names is None else {n.encode() for n, a in names if (a or n).encode() in wanted}
            if not spelled:
                continue
            text = self._text(target)
            if text is None or not any(w in text[1] for w in spelled):
                continue
            for name, value in _switches_of(text[1]):
                if names is None:  # `from constants import *` (or the module: then unread bare)
                    out.add(f"{name}={int(value)}")
                else:
                    out |= {f"{a or n}={int(value)}" for n, a in names if n == name}
        return frozenset(out)

    def _explicit_host_saves(self, source: bytes) -> frozenset:
        """Of the checkpoint file names ``source`` spells, those that some module of the project
        saves and every save of which, anywhere in the project, holds data the saving code
        itself moved to the host (``torch.save(torch.cat(rows), "gt.pt")`` after
        ``rows.append(p.cpu())``), no model's state (not asked of a large library)."""
        spelled = _spelled_blobs(source)
        if not spelled:
            return frozenset()
        files = self._project_files()
        if len(files) > _WHOLE_PROJECT_FILES:
            return frozenset()
        verdict: dict = {}  # name -> every save of it is an explicit host copy
        for p in files:
            if not self._words(p, _SAVE_WORDS):
                continue
            s = self.summary(p)
            for saved, _host, model, explicit in (s.saves if s is not None else ()):
                for name in spelled:
                    if saved and same_file(name, saved):
                        verdict[name] = verdict.get(name, True) and explicit and not model
        return frozenset(n for n, ok in verdict.items() if ok)

    def _project_nccl_only(self) -> bool:
        """Every process group the project's modules start is an NCCL one, and there is one (not
        asked of a library of more than ``_WHOLE_PROJECT_FILES`` modules, whose users start theirs)."""
        files = self._project_files()
        if len(files) > _WHOLE_PROJECT_FILES:
            return False
        backends: list = []
        for p in files:
            if self._words(p, _INIT_WORDS):
                s = self.summary(p)
                backends += s.backends if s is not None else [None]
        return bool(backends) and all(b == "nccl" for b in backends)

    def _cog_gpu(self, path: str, source: bytes) -> bool:
        """A Cog predictor (``from cog import BasePredictor``) of a project whose ``cog.yaml``
        builds a GPU image (``build: gpu: true``): Cog runs it only in that container, so it is
        CUDA-only by the project's own declaration (the nearest ``cog.yaml`` up to the root)."""
        if b"cog" not in source or _COG_IMPORT.search(source) is None:
            return False
        d = os.path.dirname(os.path.abspath(path))
        while os.path.commonpath([d, self.root]) == self.root:
            text = self._text(os.path.join(d, "cog.yaml"))
            if text is not None:
                return _COG_GPU.search(text[1]) is not None
            if d == self.root:
                break
            d = os.path.dirname(d)
        return False

    def _imported(self, path: str) -> bool:
        """Another project module imports ``path`` (read off the text first, then resolved)."""
        stem = os.path.splitext(os.path.basename(path))[0].encode()
        for other in self._neighbours(path):
            if other == path:
                continue
            text = self._text(other)
            if text is not None and stem in text[1] and path in self.closure(other):
                return True
        return False

    def _applied(self, path: str, source: bytes) -> frozenset:
        """``"Detect.stride"`` for each class of this file whose attribute an ``_apply`` override
        of another project module moves, where that module imports the class from this file."""
        moves = self._apply_moves()
        wanted = {m.group(1).decode() for m in _TENSOR_ATTRIBUTE.finditer(source)} & set(moves)
        if not wanted:
            return frozenset()
        classes = {m.group(1).decode() for m in _CLASS_HEAD.finditer(b"\n" + source)}
        out = set()
        for attr in sorted(wanted):
            for other in moves[attr]:
                if other == path:
                    continue  # the file's own `_apply`: its own model's business
                for target, names in self.imports(other):
                    if target != path:
                        continue
                    named = classes if names is None else {n for n, _ in names} & classes
                    out |= {f"{c}.{attr}" for c in named}
        return frozenset(out)

    def _apply_moves(self) -> dict:
        """attribute name -> the project modules whose ``_apply`` overrides move that attribute of
        another object (a submodule): read once per run from the modules that define ``_apply``."""
        key = ("apply moves",)
        if self._unchanged(key) and key in self._apply_memo:
            self._replay(key)
            return self._apply_memo[key]

        def compute() -> dict:
            files = self._project_files()
            out: dict = {}
            if len(files) > _WHOLE_PROJECT_FILES:
                return out  # (a large library: its `_apply` overrides are its own classes')
            for other in files:
                text = self._text(other)
                if text is None or b"def _apply" not in text[1]:
                    continue
                for attr in _apply_moved_attributes(text[1]):
                    out.setdefault(attr, []).append(other)
            return out

        self._apply_memo[key] = self._recorded(key, compute)
        self._checked[key] = _RUN[0]
        return self._apply_memo[key]

    def _loader_params(self, path: str, source: bytes) -> frozenset:
        """``"validate.val_loader"`` for each module-level function of this file that loops over
        a parameter which every call of it in the project's other files fills with a DataLoader
        (a name bound to ``DataLoader(...)`` there, or the call itself); at least one call."""
        out = set()
        for m in _DEF_HEAD.finditer(source):
            if m.group(1):
                continue  # methods and nested functions: their callers are not found by name
            args = _call_text(source, m.end())
            try:
                fn = ast.parse(b"def " + m.group(2) + b"(" + args + b"): pass").body[0]
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                continue
            positional = [a.arg for a in fn.args.posonlyargs + fn.args.args]
            for a in positional + [a.arg for a in fn.args.kwonlyargs]:
                if not _LOADER_NAME.search(a.encode()) or not re.search(
                        rb"^[ \t]+for[ \t][^\n]*,[^\n]*[ \t]in[ \t]+(?:\w+\()*" + a.encode() + rb"\b", source, re.M):
                    continue  # (a cost gate, batches unpacked in a loop: the callers decide)
                pos = positional.index(a) if a in positional else None
                if self._callers_pass_loader(path, fn.name, a, pos):
                    out.add(f"{fn.name}.{a}")
        return frozenset(out)

    def _callers_pass_loader(self, path: str, callee: str, param: str, pos: Optional[int]) -> bool:
        name = callee.encode()
        files = self._project_files()
        if len(files) > _WHOLE_PROJECT_FILES:
            near = os.path.dirname(path) + os.sep
            files = [f for f in files if f.startswith(near)]
        seen = False
        for other in files:
            if other == path:
                continue
            text = self._text(other)
            if text is None or name not in text[1] or not _call_starts(text[1], name):
                continue
            if re.search(rb"^(?:def|class)[ \t]+" + re.escape(name) + rb"\b", text[1], re.M):
                continue  # that module's own `callee`
            try:
                tree = _parsed(text[1])
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                continue
            loaders = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and _is_loader_call(n.value)
                       for t in n.targets if isinstance(t, ast.Name)}
            others = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and not _is_loader_call(n.value)
                      for t in n.targets if isinstance(t, ast.Name)}
            for n in ast.walk(tree):
                if not (isinstance(n, ast.Call) and (_dotted(n.func) or "").rsplit(".", 1)[-1] == callee):
                    continue
                arg = next((k.value for k in n.keywords if k.arg == param), None)
                if arg is None and pos is not None and len(n.args) > pos:
                    arg = n.args[pos]
                if arg is None or isinstance(arg, ast.Starred) or any(isinstance(x, ast.Starred) for x in n.args):
                    return False
                if not (_is_loader_call(arg) or (isinstance(arg, ast.Name) and arg.id in loaders
                                                 and arg.id not in others)):
                    return False
                seen = True
        return seen

    def _placing_imported(self, imported: list, source: bytes) -> frozenset:
        """The names this file gives project functions/classes that place values (ProjectFacts.placing):
        only names it calls are asked about (``to_var(x)``, ``helpers.to_var(x)``)."""
        called = {m.decode() for m in _CALLED.findall(source)}
        out: set = set()
        for target, names in imported:
            if names == ():
                continue
            if names is None:  # a whole module: the attributes the file calls
                out |= {n for n in called if self._places_definition(target, n)}
            else:
                out |= {a or n for n, a in names if (a or n) in called and self._places_definition(target, n)}
        return frozenset(out)

    def _places_definition(self, path: str, name: str, depth: int = 2) -> bool:
        """The module at ``path`` defines ``name`` at its top level, and it chooses a device for
        a value (``_chooses_placement``), itself or through a function of the same module. Only
        that definition's text is parsed."""
        text = self._text(path)  # (notes the stamp: kept facts follow an edit of the helper)
        if text is None or name.encode() not in text[1]:
            return False
        key = (path, hash(text[1]), name)  # (a bytes object keeps its hash: cheap on every ask)
        hit = self._placing_memo.get(key)
        if hit is None:
            self._placing_memo[key] = False  # (a recursion through the same name says no)
            chunk = _top_definition(text[1], name)
            hit = False
            if chunk is not None and any(w in chunk for w in _PLACING_WORDS + (b"(",)):
                try:
                    node = ast.parse(chunk).body[-1]
                except (SyntaxError, ValueError, MemoryError, RecursionError, IndexError):
                    node = None
                if node is not None:
                    hit = _chooses_placement(node) or (depth > 0 and any(
                        self._places_definition(path, c, depth - 1) for c in
                        {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
                        - {name}))
            self._placing_memo[key] = hit
        return hit


_TENSOR_ATTRIBUTE = lazyre.compile(rb"\n[ \t]+self\.(\w+)[ \t]*=[ \t]*(?:torch\.|Variable\()")


def _apply_moved_attributes(source: bytes) -> set:
    """Attributes an ``_apply(self, fn)`` method moves on another object than ``self`` itself:
    ``self.detect.stride = fn(self.detect.stride)``, ``m.grid = list(map(fn, m.grid))``."""
    try:
        tree = _parsed(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return set()
    out = set()
    for fn in ast.walk(tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name == "_apply" and len(fn.args.args) >= 2):
            continue
        apply_fn = fn.args.args[1].arg
        for n in ast.walk(fn):
            if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Attribute)):
                continue
            target = n.targets[0]
            if isinstance(target.value, ast.Name) and target.value.id == "self":
                continue  # its own attribute: the class moves it (the rule sees that override)
            value = n.value
            if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "list"
                    and len(value.args) == 1 and isinstance(value.args[0], ast.Call)):
                value = value.args[0]  # list(map(fn, m.grid))
                if not (isinstance(value.func, ast.Name) and value.func.id == "map" and len(value.args) == 2
                        and isinstance(value.args[0], ast.Name) and value.args[0].id == apply_fn):
                    continue
                moved = value.args[1]
            elif (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == apply_fn
                  and len(value.args) == 1):
                moved = value.args[0]
            else:
                continue
            if ast.dump(moved) == ast.dump(ast.Attribute(target.value, target.attr, ast.Load())):
                out.add(target.attr)
    return out


def _top_definition(source: bytes, name: str) -> Optional[bytes]:
    """The text of the top-level ``def name`` / ``class name`` of a module (decorators included),
    up to the next line that starts at column 0."""
    m = re.search(rb"^(?:async[ \t]+)?(?:def|class)[ \t]+" + re.escape(name.encode()) + rb"\b", source, re.M)
    if m is None:
        return None
    nxt = _NEXT_TOP.search(source, source.find(b"\n", m.end()) + 1) if b"\n" in source[m.end():] else None
    return source[m.start():nxt.start() if nxt else len(source)]


_NEXT_TOP = lazyre.compile(rb"^[^\s#)\]}]", re.M)  # (a closing bracket at column 0 ends a signature, not the def)


# ---- where a module uses a name (ProjectFacts.cuda_callers) ----------------------------
# a module asking whether (or how widely) a process group runs: `dist.is_initialized()`,
# `get_world_size()`, `is_distributed()`, `world_size > 1`
_ASKS_DIST = lazyre.compile(rb"is_initialized|get_world_size|is_distributed|world_size[ \t]*>")
_TOP_DEF_OR_CLASS = lazyre.compile(rb"^(?:async[ \t]+)?(?:def|class)[ \t]", re.M)
_TOP_HEAD = lazyre.compile(rb"(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)")
_PAREN_IMPORT = lazyre.compile(rb"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]*\([^)]*\)", re.M)
_DEFINES = lazyre.compile(rb"[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+$")
_IMPORT_START = lazyre.compile(rb"[ \t]*(?:from|import)[ \t]")


@functools.lru_cache(maxsize=64)
def _top_starts(source: bytes) -> tuple:
    """The offsets of the lines that start a top-level statement (column 0, no comment or
    closing bracket), and the spans of parenthesised imports."""
    return (tuple(m.start() for m in _NEXT_TOP.finditer(source)),
            tuple(m.span() for m in _PAREN_IMPORT.finditer(source)))


_MODULE_RECEIVER = lazyre.compile(rb"(?<![\w.])([A-Za-z_]\w*)\.module\.$")


def _cuda_methods(source: bytes, tops: tuple) -> list:
    """``(class, method)`` for the methods of the module's top-level classes whose code names
    CUDA (a method runs from its ``def`` to the next ``def`` or ``class`` at its indentation or
    less, or the class's end)."""
    out = []
    for i, start in enumerate(tops):
        head = _TOP_HEAD.match(source, start)
        if head is None or not source.startswith(b"class", start):
            continue
        end = tops[i + 1] if i + 1 < len(tops) else len(source)
        body = source[start:end]
        if b"cuda" not in body:
            continue
        defs = [(len(m.group(1).expandtabs()), m.group(2), m.start()) for m in _DEF_HEAD.finditer(body)]
        for j, (indent, name, at) in enumerate(defs):
            if indent == 0:
                continue
            stop = next((a for ind, _n, a in defs[j + 1:] if ind <= indent), len(body))
            if b"cuda" in body[at:stop]:
                out.append((head.group(1).decode(), name.decode()))
    return out


def _bound_only_to(source: bytes, name: str, functions: frozenset) -> bool:
    """Every binding of ``name`` in the module's text is ``name = f(...)`` for an ``f`` of
    ``functions`` (no loop target, ``with ... as``, parameter or other assignment), and one is."""
    word = re.escape(name.encode())
    assigned = re.findall(rb"(?m)^[ \t]*" + word + rb"[ \t]*=(?!=)[ \t]*([A-Za-z_][\w.]*)[ \t]*\(", source)
    if not assigned or any(f.decode() not in functions for f in assigned):
        return False
    anywhere = len(re.findall(rb"(?m)^[ \t]*" + word + rb"[ \t]*(?::[^=\n]*)?[-+*/|&]?=(?!=)", source))
    other = re.search(rb"\b(?:for|as|global|nonlocal)[ \t]+(?:[\w, \t]*,[ \t]*)?" + word + rb"\b|\bdef[ \t]+\w+[ \t]*\([^)]*\b"
                      + word + rb"\b|[,(][ \t]*" + word + rb"[ \t]*(?:,[^=\n]*)?\)?[ \t]*=(?!=)", source)
    return anywhere == len(assigned) and other is None


def _spelled_blobs(source: bytes) -> set:
    """The checkpoint file names a module spells in string literals (``"Ybar_t.pkl"``; a
    formatted one as a template, ``"step_o_t_*.pkl"``)."""
    spelled = set()
    for m in _SPELLED_BLOB.finditer(source):
        text = m.group(1).decode("utf-8", "replace")
        name = name_template(text, "format") if "{" in text else os.path.basename(text.replace("\\", "/"))
        if name:
            spelled.add(name)
    return spelled


def _quoted_in_all(source: bytes) -> frozenset:
    """The names a module's ``__all__ = [...]`` lists: its public interface."""
    m = re.search(rb"^__all__[ \t]*(?::[^=\n]*)?\+?=[ \t]*[\[(]([^\])]*)", source, re.M)
    return frozenset(x.decode() for x in re.findall(rb"[\"'](\w+)[\"']", m.group(1))) if m else frozenset()


def _uses(source: bytes, name: str) -> set:
    """Where a module's text names ``name`` as a word, but in an import or a comment: the
    top-level ``def`` / ``class`` each use sits in, ``None`` for the module's own level (a
    script's body, a decorator, a table of callbacks). Text only: a string or docstring that
    names it counts as a use (one more place to vouch for, never one less)."""
    out: set = set()
    tops, imports = _top_starts(source)
    for m in re.finditer(rb"\b" + re.escape(name.encode()) + rb"\b", source):
        p = m.start()
        line = source.rfind(b"\n", 0, p) + 1
        head = source[line:p]
        if head.lstrip().startswith(b"#") or _IMPORT_START.match(head) and b"(" not in head \
                or _DEFINES.match(head):
            continue  # a comment, an import, the definition itself
        if any(a <= p < b for a, b in imports):
            continue
        i = bisect.bisect_right(tops, p) - 1
        if i < 0 or tops[i] == line:  # a script's statement, a signature, a base class, a decorator
            out.add(None)
            continue
        top = _TOP_HEAD.match(source, tops[i])
        out.add(top.group(1).decode() if top is not None else None)
    return out


def _unguarded_uses(source: bytes, name: str, contexts: set) -> set:
    """:func:`_uses` without the uses inside a branch that runs only when CUDA is usable
    (``if torch.cuda.is_available(): prepare(x)``, the ``else`` of ``if not ...``), read off the
    module's ``ast`` (``contexts``, the text's answer, when it does not parse)."""
    try:
        tree = _parsed(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return contexts
    out: set = set()

    def visit(node: ast.AST, ctx, guarded: bool) -> None:
        if isinstance(node, ast.If):
            pol = _availability(node.test)
            visit(node.test, ctx, guarded)
            for s in node.body:
                visit(s, ctx, guarded or pol > 0)
            for s in node.orelse:
                visit(s, ctx, guarded or pol < 0)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return
        if not guarded and ((isinstance(node, ast.Name) and node.id == name)
                            or (isinstance(node, ast.Attribute) and node.attr == name)
                            or (isinstance(node, ast.Constant) and node.value == name)):
            out.add(ctx)
        for child in ast.iter_child_nodes(node):
            visit(child, ctx, guarded)

    try:
        _visit_tops(tree, visit)
    except RecursionError:  # (a pathologically deep expression: the text's answer stands)
        return contexts
    return out


def _visit_tops(tree: ast.Module, visit) -> None:
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in top.decorator_list:
                visit(d, None, False)
            if isinstance(top, ast.ClassDef):
                for b in (*top.bases, *top.keywords):
                    visit(b, None, False)
            else:
                for d in (*top.args.defaults, *(x for x in top.args.kw_defaults if x is not None)):
                    visit(d, None, False)
            for s in top.body:
                visit(s, top.name, False)
        else:
            visit(top, None, False)


_CALLED = lazyre.compile(rb"(?:^|[^\w.])(?:\w+\.)?(\w+)[ \t]*\(", re.M)


_PLACING_WORDS = (b".cuda(", b".to(", b"device", b"DataParallel")
# a module-level function that loops over a parameter named like a data source (a cost gate only)
_LOOPED_PARAM_HINT = lazyre.compile(rb"\ndef[ \t]+\w+[ \t]*\([^)]*(?:loader|data|batches|_dl\b|iterator)", re.I)
_LOADER_NAME = lazyre.compile(rb"loader|data|batches|_dl$|^dl$|iterator", re.I)


def _is_loader_call(v: ast.AST) -> bool:
    return isinstance(v, ast.Call) and (_dotted(v.func) or "").rsplit(".", 1)[-1] == "DataLoader"


def _chooses_placement(node: ast.AST) -> bool:
    """``node`` puts a value on a device it picks (``x.cuda()``, ``.to(device)``), not only on
    the device its input is on (``.to(x.device)``, ``if x.is_cuda: iden = iden.cuda()``): a
    helper that follows its input chooses nothing for the program."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.If, ast.IfExp)) and _follows_input(n.test):
            stack.append(n.orelse) if isinstance(n, ast.IfExp) else stack.extend(n.orelse)
            continue
        if isinstance(n, ast.Call) and _places(n) and not any(
                _follows_input(a) for a in (*n.args, *(k.value for k in n.keywords))):
            return True
        stack.extend(ast.iter_child_nodes(n))
    return False


def _follows_input(expr: ast.AST) -> bool:
    """``x.device``, ``x.is_cuda``, ``x.get_device()``: where another value already is."""
    return any(isinstance(n, ast.Attribute) and n.attr in ("device", "is_cuda", "get_device") for n in ast.walk(expr))


# ---------------------------------------------------------------------------------
# classes across files: which project classes are nn.Modules (read off the text, no parse)
# ---------------------------------------------------------------------------------

_CLASS_HEAD = lazyre.compile(rb"\nclass[ \t]+(\w+)[ \t]*\(([^()]*)\)[ \t]*:")  # (in b"\n" + source: see _SCRIPT_HINT)
_TOP_LINE = lazyre.compile(rb"\n[^\s#]")  # (searched in b"\n" + source, as the heads below)
# `class Trainer:` (no bases): read only where a GPU-trainer question can be asked of it
_BARE_CLASS_HEAD = lazyre.compile(rb"\nclass[ \t]+(\w+)()[ \t]*:")
_MOVES_DEF = lazyre.compile(rb"^[ \t]+def[ \t]+(?:_apply|to|cuda|to_empty)[ \t]*\(", re.M)
_REGISTERS = lazyre.compile(rb"register_(?:buffer|parameter)\(\s*[\"']([A-Za-z_]\w*)[\"']")
_SELF_ASSIGN = lazyre.compile(rb"\bself\.([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)")
_LIBRARY_ROOTS = ("torch", "lightning", "pytorch_lightning", "transformers", "diffusers", "typing", "abc",
                   "collections", "enum", "dataclasses", "numpy")
_PLAIN_IMPORT_AS = lazyre.compile(rb"\n[ \t]*import[ \t]+([\w.]+)[ \t]+as[ \t]+(\w+)")


class _ClassInfo:
    """One top-level class read off its text. Only ``bases`` is read eagerly: most questions
    (a file's project bases) need nothing else, so the body is read when a property is asked."""

    def __init__(self, bases: list, body: bytes) -> None:
        self.bases = bases  # dotted names as spelled
        self._body = body

    @functools.cached_property
    def moves(self) -> bool:  # defines _apply / to / cuda
        return _MOVES_DEF.search(self._body) is not None

    @functools.cached_property
    def owned(self) -> frozenset:  # names given to register_buffer / register_parameter, or assigned on self
        return frozenset(x.decode() for x in set(_REGISTERS.findall(self._body)) | set(_SELF_ASSIGN.findall(self._body)))

    @functools.cached_property
    def held(self) -> Optional[frozenset]:  # see _stateless
        return _stateless(self._body)

    @functools.cached_property
    def stateless(self) -> bool:  # holds no parameter, buffer or stateful submodule of its own
        return self.held is not None and not self.held

    @functools.cached_property
    def gpu(self) -> bool:  # a method wraps the model in DistributedDataParallel(device_ids=...) unconditionally
        return _gpu_ddp(self._body)


# what gives a module state of its own: a parameter, a buffer, a container of submodules
_STATEFUL = lazyre.compile(rb"Parameter\(|register_buffer|register_parameter|add_module|register_module|ModuleList|ModuleDict"
                       rb"|Sequential\(|setattr\(")
_SELF_VALUE = lazyre.compile(rb"\bself\.([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)[ \t]*([^\n#]*)")
_LITERAL = lazyre.compile(rb"(?:-?[\d.]+(?:e-?\d+)?|True|False|None|[rbuf]*[\"'][^\"']*[\"'])[ \t]*")
_NN_CALL = lazyre.compile(rb"(?:torch\.)?nn\.(\w+)\(([^()]*)\)[ \t]*")
# torch.nn layers with no parameter or buffer of their own (given no weight)
_WEIGHTLESS_NN = frozenset(
    b"""Identity Flatten Unflatten ReLU ReLU6 LeakyReLU ELU SELU CELU GELU SiLU Mish Tanh Sigmoid Softplus Softsign
    Softmax LogSoftmax LogSigmoid Dropout Dropout2d Dropout3d MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d
    AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveMaxPool2d Upsample PixelShuffle CosineSimilarity
    PairwiseDistance""".split())


def _stateless(body: bytes) -> Optional[frozenset]:
    """A class body that gives its instances no parameter, buffer or stateful submodule: every
    ``self.x = ...`` is a literal, a weightless torch.nn layer or loss (no ``weight``), a value
    passed in that the class never calls nor reads attributes of (a flag, a margin, not a module),
    or an instance of a class named here (``self.iou = IOUloss(eps=1e-7)``). ``.cuda()`` on such a
    Module moves nothing, provided each class named is a plain class (not an nn.Module: no
    ``.cuda()`` reaches it) or a stateless module itself. Returns those names (empty: none),
    or None when the body holds state."""
    if _STATEFUL.search(body):
        return None
    held: set = set()
    data: Optional[set] = None  # parameters of `__init__` whose default is literal data
    for attr, value in _SELF_VALUE.findall(body):
        value = value.strip()
        if _LITERAL.fullmatch(value):
            continue
        if re.fullmatch(rb"[A-Za-z_]\w*", value):
            data = _data_defaults(body) if data is None else data
            if value in data:
                continue  # `self.strides = strides` with `strides=(8, 16, 32)`: numbers, indexed or not
        m = _NN_CALL.fullmatch(value)
        if m is not None:
            layer, args = m.groups()
            if (layer in _WEIGHTLESS_NN or layer.endswith(b"Loss")) and b"weight" not in args \
                    and not (layer.endswith(b"Loss") and args.strip() and b"=" not in args.split(b",")[0]):
                continue  # (a loss's first positional argument is a weight tensor)
            return None
        if re.fullmatch(rb"[A-Za-z_]\w*", value) and not re.search(rb"\bself\." + attr + rb"[ \t]*[.(\[]", body):
            continue  # a value passed in, only tested or computed with
        m = _HELD_CALL.fullmatch(value)
        if m is not None:
            held.add(m.group(1).decode())
            continue
        return None
    return frozenset(held)


# `mod.Class(` / `mod.__dict__["Class"](`: a class read off an imported module (a registry lookup)
# checkpoint-like data files a project may ship beside its code, and how they are spelled in a
# string literal of the loading code (an f-string's fields as `{...}`)
_BLOB_EXTENSIONS = (".pt", ".pth", ".pkl", ".th", ".ckpt", ".tar", ".pickle")
_SPELLED_BLOB = lazyre.compile(rb"""["']([^"'\n]{0,200}\.(?:pt|pth|pkl|th|ckpt|tar|pickle))["']""")
_LEGACY_BLOB_LIMIT = 2 * 1024 * 1024

_MODULE_CLASS_TAIL = rb")\.(?:__dict__\[[ \t]*[\"'])?([A-Z]\w*)(?:[\"'][ \t]*\])?[ \t]*\("


def _module_stem(path: str) -> str:
    """The name a module file is imported by: ``decode`` for ``.../decode.py`` and ``.../decode/__init__.py``."""
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.basename(os.path.dirname(path)) if stem == "__init__" else stem


def _data_defaults(body: bytes) -> set:
    """Parameters of the class's ``__init__`` whose default is literal data: a number, a string,
    a tuple or list of those (``strides=(8, 8, 16, 32, 32)``). What such a parameter holds is data,
    not a module: a caller handing a Module for it is no use of the class its author foresaw."""
    m = re.search(rb"\bdef[ \t]+__init__[ \t]*\(", body)
    if m is None:
        return set()
    depth, i = 1, m.end()
    while i < len(body) and depth:
        c = body[i:i + 1]
        depth += (c == b"(") - (c == b")")
        i += 1
    try:
        fn = ast.parse(b"def f(" + body[m.end():i] + b": pass").body[0]
    except (SyntaxError, ValueError):
        return set()
    args = fn.args.posonlyargs + fn.args.args
    pairs = list(zip(args[len(args) - len(fn.args.defaults):], fn.args.defaults))
    pairs += [(a, d) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None]
    return {a.arg.encode() for a, d in pairs if _literal_data(d)}


def _literal_data(d: ast.AST) -> bool:
    if isinstance(d, (ast.Tuple, ast.List)):
        return bool(d.elts) and all(_literal_data(e) for e in d.elts)
    if isinstance(d, ast.UnaryOp) and isinstance(d.op, ast.USub):
        d = d.operand
    return isinstance(d, ast.Constant) and isinstance(d.value, (int, float, str, bool)) and d.value is not None


# `IOUloss(box_format="xyxy", eps=1e-10)`: an instance of a class the module names (on one line)
_HELD_CALL = lazyre.compile(rb"([A-Z]\w*)\([^()\n]*\)")


def classes_of(source: bytes) -> dict:
    """Top-level classes of a module, read off its text: name -> _ClassInfo (bases as spelled,
    moves its own attributes, names it owns, holds no state of its own)."""
    return _classes(source)


def _project_bases(source: bytes, imports: list) -> list:
    """The bases of the file's classes that it imports from the project (as spelled, once each):
    not a class of the file (its own model answers), a builtin, or a library's."""
    own = _classes(source)
    if not own:
        return []
    aliases = _torch_aliases(source, imports)
    imported = set(aliases) | {a or n for _m, level, names in imports if level for n, a in names}
    out: list = []
    for info in own.values():
        for base in info.bases:
            root = base.split(".")[0]
            if base in own or base in out or root not in imported or aliases.get(root, "").split(".")[0] in _LIBRARY_ROOTS:
                continue
            out.append(base)
    return out


@functools.lru_cache(maxsize=64)
def _classes(source: bytes) -> dict:
    """Top-level classes of a module: name -> _ClassInfo (shared: read it, do not change it)."""
    out = {}
    source = b"\n" + source  # (the patterns spell a line's start as its newline)
    heads = list(_CLASS_HEAD.finditer(source)) + (list(_BARE_CLASS_HEAD.finditer(source))
                                                        if b"DistributedDataParallel" in source else [])
    for m in heads:
        end = len(source)
        nxt = _TOP_LINE.search(source, m.end())
        while nxt is not None and source[nxt.start() + 1:nxt.start() + 2] in (b")", b"]", b"}"):
            nxt = _TOP_LINE.search(source, nxt.end())
        if nxt is not None:
            end = nxt.start() + 1
        body = source[m.end():end]
        bases = []
        for part in (m.group(2) or b"").decode("utf-8", "replace").split(","):
            part = " ".join(part.split())
            if part and "=" not in part and re.fullmatch(r"[\w.]+", part):
                bases.append(part)
        out[m.group(1).decode()] = _ClassInfo(bases, body)
    return out


# a statement of a method body (not inside an if/for/with) that builds DistributedDataParallel
_METHOD_DDP = lazyre.compile(rb"^( {8}|\t\t)[^\s#][^\n]*DistributedDataParallel\(", re.M)


def _gpu_ddp(body: bytes) -> bool:
    """A method statement ``self.model = DistributedDataParallel(..., device_ids=[...])``: DDP
    takes device ids only for a module on GPUs."""
    if b"DistributedDataParallel" not in body or b"device_ids" not in body:
        return False
    for m in _METHOD_DDP.finditer(body):
        args = _call_text(body, m.end())
        if re.search(rb"device_ids[ \t]*=[ \t]*(?!None\b)\S", args):
            return True
    return False


def _torch_aliases(source: bytes, imports: list) -> dict:
    """local name -> qualified name, for the torch / lightning / transformers imports of a module."""
    out = {}
    for mod, alias in _PLAIN_IMPORT_AS.findall(b"\n" + source):
        out[alias.decode()] = mod.decode()
    for module, level, names in imports:
        if level:
            continue
        if not names:
            out.setdefault(module.split(".")[0], module.split(".")[0])
            continue
        for n, a in names:
            out[a or n] = f"{module}.{n}"
    return out


def _notebook_python(path: str) -> Optional[bytes]:
    from devlint.notebook import Notebook, NotebookError

    try:
        with open(path, "rb") as f:
            return Notebook(f.read()).python
    except (OSError, NotebookError, ValueError):
        return None


def find_root(path: str, config_root: Optional[str] = None) -> str:
    """The project root for ``path``: the configuration's directory, else the nearest
    ancestor holding ``.git`` or ``pyproject.toml``, or ``setup.py`` / ``setup.cfg`` outside a
    package (a package's ``setup.py`` is one of its modules), else the directory holding the
    file's top package (the file's own directory when it is in none)."""
    here = os.path.dirname(os.path.abspath(path))
    if config_root and os.path.commonpath([here, os.path.abspath(config_root)]) == os.path.abspath(config_root):
        return os.path.abspath(config_root)
    parts = here.split(os.sep)
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            # an installed package is a project of its own: its top directory under site-packages
            i = len(parts) - 1 - parts[::-1].index(marker)
            return os.sep.join(parts[:i + 2]) if i + 1 < len(parts) else here
    d = here
    while True:
        if any(os.path.exists(os.path.join(d, m)) for m in (".git", "pyproject.toml")):
            return d
        # `setup.py` inside a package is one of its modules (`dinov2/eval/setup.py`), not a marker
        if (any(os.path.exists(os.path.join(d, m)) for m in ("setup.py", "setup.cfg"))
                and not os.path.exists(os.path.join(d, "__init__.py"))):
            return d
        up = os.path.dirname(d)
        if up == d:
            break
        d = up
    # no marker (a tree copied out of its checkout): the directory its top package lives in,
    # where Python itself would find `import pkg.mod`
    d = here
    while os.path.exists(os.path.join(d, "__init__.py")) and os.path.dirname(d) != d:
        d = os.path.dirname(d)
    return d


_INDEXES: dict = {}
_ROOTS: dict = {}


def facts_for(path: str, source: Optional[bytes] = None, config_root: Optional[str] = None,
              cache_dir: Optional[str] = None) -> ProjectFacts:
    """The project facts of the file at ``path`` (``source``: its Python source, when it is
    not the file's bytes, as for a notebook). Never raises: a project that cannot be read
    says nothing."""
    try:
        here = os.path.dirname(os.path.abspath(path))
        root = _ROOTS.get((here, config_root))
        if root is None:
            root = _ROOTS[(here, config_root)] = find_root(path, config_root)
        return index_for(root, cache_dir).facts_for(path, source)
    except (OSError, ValueError, RecursionError):
        return NONE


def index_for(root: str, cache_dir: Optional[str] = None) -> ProjectIndex:
    """One index per root and process (summaries are read once per run)."""
    key = (os.path.abspath(root), cache_dir)
    idx = _INDEXES.get(key)
    if idx is None:
        if len(_INDEXES) > 16:
            _INDEXES.clear()
        idx = _INDEXES[key] = ProjectIndex(root, cache_dir)
    return idx
