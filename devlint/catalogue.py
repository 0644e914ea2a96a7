"""The rule catalogue: every code with its name, summary, default and prefilter.

This is the one table of what rules exist (like ruff's ``codes.rs``); each rule's logic,
docs and examples live in its own file under ``rules/``. It imports nothing heavy, so
selecting rules, validating config, prefiltering files and serving cached results never
import LibCST: a file that no selected rule's prefilter matches, or a warm-cache hit,
costs a few milliseconds. The rule classes take these fields from here
(:meth:`devlint.rule.Rule.__init_subclass__`), so the two cannot drift apart.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional, Union


class Ordered:
    """Matches when ``first`` occurs and ``then`` occurs somewhere after it, in linear time.

    The equivalent regex ``first[\\s\\S]*then`` is quadratic: a search retries from every
    occurrence of ``first`` and scans to the end of the file each time (52 s for a 480 KB
    file of ``for`` loops with no ``.to(``)."""

    def __init__(self, first: bytes, then: bytes) -> None:
        self.first, self.then = re.compile(first), re.compile(then)
        self.pattern = first + rb" ... " + then

    def search(self, source: bytes) -> Optional[re.Match]:
        m = self.first.search(source)
        return m and self.then.search(source, m.end())


Prefilter = Union[re.Pattern, Ordered]


@dataclass(frozen=True)
class RuleInfo:
    code: str
    name: str
    summary: str
    module: str  # where the rule class lives (imported only when a file is parsed)
    # A file that does not match is not parsed for this rule (the cheap prefilter). It must
    # match every file the rule could report on.
    prefilter: Prefilter
    default_enabled: bool = True
    # The target devices on which this rule's bug can happen (config `target-devices`): a
    # portability rule (code that fails without CUDA) matters only where "cpu" is a target,
    # DL010 (code that never uses the GPU) only where "cuda" is; the others everywhere. A
    # default rule none of whose devices is a target is off by default.
    targets: tuple = ("cpu", "cuda")


_RULES = "devlint.rules."

RULES: tuple[RuleInfo, ...] = (
    RuleInfo("DL001", "unassigned-transfer", "tensor conversion whose result is discarded",
             _RULES + "dl001_unassigned_transfer",
             # one alternative per method of devlint.facts.CONVERSIONS (a test checks it)
             re.compile(rb"\.(?:bfloat16|bool|byte|char|cpu|cuda|double|float|half|int|long|short|to|type)\(")),
    RuleInfo("DL002", "hardcoded-cuda", "hard-coded CUDA device outside an availability guard",
             _RULES + "dl002_hardcoded_cuda", re.compile(rb"cuda|\.to\(\s*\d|device\s*=\s*\d"), targets=("cpu",)),
    RuleInfo("DL003", "loop-transfer", "avoidable host<->device transfer repeated every loop iteration",
             _RULES + "dl003_loop_transfer", Ordered(rb"\b(?:for|while)\b", rb"\.(?:to|cuda)\(|\.cpu\(\)|Tensor\((?:np|numpy)\.|\]\.item\(\)")),
    RuleInfo("DL004", "unguarded-cuda-api",
             "CUDA runtime call that raises without CUDA, outside an availability guard",
             _RULES + "dl004_unguarded_cuda_api", re.compile(rb"cuda|pin_memory"), targets=("cpu",)),
    RuleInfo("DL005", "load-without-map-location", "`torch.load` / `torch.jit.load` without `map_location`",
             _RULES + "dl005_load_without_map_location", re.compile(rb"load"), targets=("cpu",)),
    RuleInfo("DL006", "factory-without-device",
             "tensor factory without `device=` in a per-call `nn.Module` method",
             _RULES + "dl006_factory_without_device", re.compile(rb"def forward")),
    RuleInfo("DL007", "host-alloc-then-move", "tensor allocated on the host, then moved to a device",
             _RULES + "dl007_host_alloc_then_move", re.compile(rb"\)\s*\.\s*(?:to|cuda)\(")),
    RuleInfo("DL008", "sync-in-loop", "device-to-host sync on every iteration of a training/eval loop",
             _RULES + "dl008_sync_in_loop", re.compile(rb"backward\(|\.step\(|no_grad|inference_mode"),
             default_enabled=False),
    RuleInfo("DL009", "unregistered-tensor-attribute",
             "plain tensor attribute in nn.Module.__init__ does not move with model.to(device)",
             _RULES + "dl009_unregistered_tensor_attribute", re.compile(rb"def __init__")),
    RuleInfo("DL010", "missing-device-placement", "model built and fed data without any device placement",
             _RULES + "dl010_missing_device_placement", re.compile(rb"torch"), targets=("cuda",),
             # porting advice, not a crash or a wasted copy: opt in (`--select DL010` to port a script)
             default_enabled=False),
)

# Reported by the engine itself, outside the rule traversal (a file without `noqa` has
# nothing for DL100 to report).
META: tuple[RuleInfo, ...] = (
    RuleInfo("DL100", "unused-noqa", "suppression comment that suppresses nothing",
             "devlint.suppression", re.compile(rb"noqa"), default_enabled=False),
)

# A file that cannot be parsed (or decoded): reported whatever the file contains and
# whatever is selected, unless DL000 itself is ignored (`--ignore DL000`, per-file-ignores).
# Only its exact code or name selects it: `--ignore DL00` and `ALL` are about rules.
PARSE_ERROR_INFO = RuleInfo("DL000", "parse-error", "file that could not be parsed (syntax error, undecodable bytes)",
                            "devlint.engine", re.compile(rb"(?!)"))
PARSE_ERROR = (PARSE_ERROR_INFO.code, PARSE_ERROR_INFO.name)

TARGET_DEVICES = ("cpu", "cuda")

BY_CODE: dict[str, RuleInfo] = {r.code: r for r in (PARSE_ERROR_INFO, *RULES, *META)}


# For benchmarks only: DEVLINT_NO_PREFILTER=1 puts every file through the parser and every
# rule (benchmarks/bench.py times the pipeline without the prefilter's help that way).
_NO_PREFILTER = os.environ.get("DEVLINT_NO_PREFILTER") == "1"


def prefiltered(rules, source: bytes) -> list:
    """The rules (catalogue entries or rule classes) whose prefilter matches ``source``."""
    if _NO_PREFILTER:
        return list(rules)
    return [r for r in rules if r.prefilter.search(source)]


def cpython_parses(source: bytes) -> bool:
    """Whether CPython's parser accepts ``source`` (bytes: the coding cookie is honoured,
    undecodable bytes and NUL bytes fail). For the files no rule's prefilter matches, so
    nothing is parsed with LibCST: a syntax error there is still DL000, at about a tenth
    of a LibCST parse and without importing it (what CPython refuses is then put to
    LibCST, which may know newer grammar). Parses only; nothing is executed."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning: invalid escape sequence ...
            compile(source, "<devlint>", "exec", flags=0x400, dont_inherit=True)  # PyCF_ONLY_AST
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return False
    return True
