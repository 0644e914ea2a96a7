"""The lint-result cache: a warm run over unchanged files parses nothing.

One small JSON file per (devlint code, settings, file name, file content), under
``<cache dir>/v1/<2 hex>/<62 hex>.json``. The key is a SHA-256 of

* the cache format and ``devlint.__version__``, plus a fingerprint (name, size, mtime) of
  devlint's own modules and rules, so an edited rule never serves stale results;
* ``Settings.key()`` (rule selection and every option results depend on);
* the display path (results carry it, and rules may look at the name);
* the file's bytes.

Entries are written to a temporary file and renamed into place, so concurrent runs
never see half an entry; an entry that cannot be read or decoded is treated as a miss
and removed (self-healing). The cache is best effort: a read-only or full disk only
means no caching. Only lint results are cached, never fixes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from functools import lru_cache
from typing import Optional

from devlint import __version__
from devlint.diagnostic import Applicability, Diagnostic, Fix
from devlint.fsutil import staged

FORMAT = 1
DEFAULT_DIR = ".devlint_cache"
ENV_DIR = "DEVLINT_CACHE_DIR"
TAG_NAME = "CACHEDIR.TAG"
TAG = (b"Signature: 8a477f597d28d172789f06886806bc55\n"
       b"# This file is a cache directory tag created by devlint.\n"
       b"# For information about cache directory tags see https://bford.info/cachedir/\n")


def default_dir() -> str:
    return os.environ.get(ENV_DIR) or DEFAULT_DIR


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Names, sizes and mtimes of devlint's modules and rules (cheap: a few stats)."""
    import devlint
    import devlint.analysis
    import devlint.rules

    h = hashlib.sha256(__version__.encode())
    for pkg in (devlint, devlint.analysis, devlint.rules):  # rules read devlint.analysis too
        for d in pkg.__path__:
            try:
                names = sorted(os.listdir(d))
            except OSError:
                continue
            for n in names:
                if n.endswith(".py"):
                    try:
                        st = os.stat(os.path.join(d, n))
                    except OSError:
                        continue
                    h.update(f"{d}/{n}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


# ---- (de)serialising diagnostics -------------------------------------------------------

_DIAG_FIELDS = tuple(f.name for f in dataclasses.fields(Diagnostic) if f.name not in ("filename", "fix"))
_FIX_FIELDS = tuple(f.name for f in dataclasses.fields(Fix) if f.name not in ("applicability", "replacements"))


def _fix_to_json(fix: Optional[Fix]):
    if fix is None:
        return None
    d = {k: getattr(fix, k) for k in _FIX_FIELDS}
    d["applicability"] = fix.applicability.value
    return d


def _fix_from_json(d) -> Optional[Fix]:
    if d is None:
        return None
    d = dict(d)
    return Fix(Applicability(d.pop("applicability")), **d)


def dump(diags: list[Diagnostic]) -> bytes:
    items = []
    for dg in diags:
        item = {k: getattr(dg, k) for k in _DIAG_FIELDS}
        item["fix"] = _fix_to_json(dg.fix)
        items.append(item)
    return json.dumps({"format": FORMAT, "diagnostics": items}, separators=(",", ":")).encode()


def load(data: bytes, filename: str) -> list[Diagnostic]:
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("diagnostics"), list):
        raise ValueError("not a devlint cache entry")
    out = []
    for item in doc["diagnostics"]:
        item = dict(item)
        fix = _fix_from_json(item.pop("fix"))
        out.append(Diagnostic(filename=filename, fix=fix, **item))
    return out


# ---- the cache ------------------------------------------------------------------------------

class Cache:
    def __init__(self, root: str, settings_key: str) -> None:
        self.root = root
        self.dir = os.path.join(root, f"v{FORMAT}")
        self._salt = hashlib.sha256(
            f"devlint-cache\0{FORMAT}\0{code_fingerprint()}\0{settings_key}\0".encode())
        self._ready = False
        self.hits = self.misses = self.writes = 0

    def key(self, filename: str, source: bytes, settings_key: str = "") -> str:
        """``settings_key``: the file's own settings when they differ from the run's
        (per-file ignores, baseline entries)."""
        h = self._salt.copy()
        h.update(filename.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
        h.update(settings_key.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
        h.update(source)
        return h.hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self.dir, key[:2], key[2:] + ".json")

    def get(self, key: str, filename: str) -> Optional[list[Diagnostic]]:
        path = self._path(key)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            self.misses += 1
            return None
        try:
            diags = load(data, filename)
        except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
            # a corrupt or foreign entry: drop it, lint again
            try:
                os.unlink(path)
            except OSError:
                pass
            self.misses += 1
            return None
        self.hits += 1
        return diags

    def put(self, key: str, diags: list[Diagnostic]) -> None:
        try:
            data = dump(diags)
        except (TypeError, ValueError):
            return  # something not serialisable: just don't cache it
        path = self._path(key)
        try:
            self._prepare()
            d = os.path.dirname(path)
            os.makedirs(d, exist_ok=True)
            with staged(d, data, prefix=".tmp-") as tmp:
                os.replace(tmp, path)
            self.writes += 1
        except OSError:
            pass  # read-only or full disk: run without a cache

    def _prepare(self) -> None:
        if self._ready:
            return
        os.makedirs(self.root, exist_ok=True)
        for name, content in ((TAG_NAME, TAG), (".gitignore", b"# created by devlint\n*\n")):
            p = os.path.join(self.root, name)
            if not os.path.exists(p):
                try:
                    with open(p, "xb") as fh:
                        fh.write(content)
                except FileExistsError:
                    pass
        self._ready = True


def is_cache_dir(path: str) -> bool:
    try:
        with open(os.path.join(path, TAG_NAME), "rb") as fh:
            return fh.read(len(TAG)) == TAG
    except OSError:
        return False


def clean(path: str) -> bool:
    """Remove a devlint cache directory; refuses anything that is not one. Returns
    whether something was removed."""
    if not os.path.lexists(path):
        return False
    if os.path.islink(path) or not os.path.isdir(path) or not is_cache_dir(path):
        raise ValueError(f"{path} is not a devlint cache directory (no {TAG_NAME} written by devlint)")
    shutil.rmtree(path)
    return True
