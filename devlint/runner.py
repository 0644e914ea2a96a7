"""Runs the engine over files: read bytes, lint or fix, write back atomically."""

from __future__ import annotations

import dataclasses
import difflib
import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Optional

from devlint.diagnostic import Diagnostic
from devlint.engine import Settings, fix_source, lint_source


@dataclass
class FileOutcome:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: Optional[str] = None  # a one-line problem: the file could not be linted or written
    fixed: int = 0
    diff: str = ""
    changed: bool = False
    new_source: Optional[bytes] = None  # the fixed source, when fixing

    def display_error(self) -> str:
        return f"{self.path}: {self.error}"


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def atomic_write(path: str, data: bytes, expected_old: bytes) -> None:
    """Write ``data`` over ``path`` via a temporary file in the same directory and a rename,
    keeping the permission bits; refuse when the file changed since it was read."""
    if read_bytes(path) != expected_old:
        raise OSError("file changed on disk while devlint was fixing it; not overwritten")
    st = os.stat(path)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".devlint-", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, st.st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    a = old.decode("utf-8", "replace").splitlines(keepends=True)
    b = new.decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"a/{path.lstrip('/')}", f"b/{path.lstrip('/')}"))


def process_file(path: str, display: str, settings: Settings, fix: bool = False,
                 diff: bool = False) -> FileOutcome:
    try:
        source = read_bytes(path)
    except OSError as exc:
        return FileOutcome(display, error=f"cannot read: {exc.strerror or exc}")
    return process_source(source, path, display, settings, fix=fix, diff=diff)


def process_source(source: bytes, path: Optional[str], display: str, settings: Settings,
                   fix: bool = False, diff: bool = False) -> FileOutcome:
    """Lint (or fix) one file's bytes; ``path`` is where a fix is written (None: nowhere)."""
    if path is not None and path.endswith(".ipynb"):
        from devlint.notebook import process_notebook_source
        return process_notebook_source(source, path, display, settings, fix=fix, diff=diff)
    try:
        if not (fix or diff):
            return FileOutcome(display, lint_source(source, display, settings).diagnostics)
        out = fix_source(source, display, settings)
    except RecursionError:
        return FileOutcome(display, error="too deeply nested to analyse")
    res = FileOutcome(display, out.remaining, fixed=out.fixed)
    if not out.converged:
        res.error = "fixes did not converge; file left unchanged" if out.source == source else \
            "fixes did not converge within the round limit"
    if out.source != source:
        res.changed = True
        if diff:
            res.diff = unified_diff(display, source, out.source)
        elif fix and path is not None:
            try:
                atomic_write(path, out.source, source)
            except OSError as exc:
                return FileOutcome(display, out.initial, error=f"cannot write: {exc.strerror or exc}")
    res.new_source = out.source
    return res


# ---------------------------------------------------------------------------------
# many files: cache, process pool, stable order
# ---------------------------------------------------------------------------------

def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _portable(outcome: FileOutcome) -> FileOutcome:
    """Drop the CST node replacements of fixes (they stay behind in the worker, and
    would cost more to pickle than the file did to lint)."""
    for d in outcome.diagnostics:
        if d.fix is not None and d.fix.replacements:
            d.fix = dataclasses.replace(d.fix, replacements={})
    return outcome


_WORKER: dict = {}


def _init_worker(fix: bool, diff: bool) -> None:
    _WORKER.update(fix=fix, diff=diff)


def _run_chunk(chunk: list) -> list:
    fix, diff = _WORKER["fix"], _WORKER["diff"]
    out = []
    for i, path, display, source, s in chunk:
        if source is None:
            o = process_file(path, display, s, fix=fix, diff=diff)
        else:
            o = process_source(source, path, display, s, fix=fix, diff=diff)
        out.append((i, _portable(o)))
    return out


def _chunks(work: list, workers: int) -> list:
    """Largest files first, alone; small files grouped: about 8 chunks per worker."""
    def size(item) -> int:
        if item[3] is not None:
            return len(item[3])
        try:
            return os.path.getsize(item[1])
        except OSError:
            return 0

    sized = sorted(((size(w), w) for w in work), key=lambda p: -p[0])
    target = max(1, sum(s for s, _ in sized) // (workers * 8))
    chunks, cur, cur_size = [], [], 0
    for s, w in sized:
        cur.append(w)
        cur_size += s
        if cur_size >= target:
            chunks.append(cur)
            cur, cur_size = [], 0
    if cur:
        chunks.append(cur)
    return chunks


def _pool_context():
    import multiprocessing

    # fork: workers start in milliseconds with libcst and the rules already imported
    if "fork" in multiprocessing.get_all_start_methods() and sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def run_files(files: list[tuple[str, str]], settings: Settings, *, fix: bool = False, diff: bool = False,
              jobs: Optional[int] = None, cache=None, settings_for=None) -> list[FileOutcome]:
    """Process ``(path, display)`` pairs; outcomes come back in the order given, whatever
    the order in which they finish. ``cache`` (a :class:`devlint.cache.Cache`) serves
    unchanged files without parsing; ``jobs`` > 1 lints the rest in a process pool.
    ``settings_for(path)`` gives a file its own settings (per-file ignores, baseline)."""
    from devlint.engine import _prefilter

    jobs = default_jobs() if not jobs or jobs < 1 else jobs
    lint_only = not (fix or diff)
    outcomes: list = [None] * len(files)
    keys: dict[int, str] = {}
    own: dict[int, str] = {}  # index -> the file's settings key, when not the run's
    work = []  # (index, path, display, source or None, settings)
    for i, (path, display) in enumerate(files):
        s = settings_for(path) if settings_for is not None else settings
        if s is not settings:
            own[i] = s.key()
        if not lint_only and cache is None:
            work.append((i, path, display, None, s))
            continue
        try:
            source = read_bytes(path)
        except OSError as exc:
            outcomes[i] = FileOutcome(display, error=f"cannot read: {exc.strerror or exc}")
            continue
        if not _prefilter(s.rules(), source):
            # nothing to parse: cheaper than a cache lookup or a trip to a worker
            outcomes[i] = process_source(source, path, display, s, fix=fix, diff=diff)
            continue
        if cache is not None:
            keys[i] = cache.key(display, source, own.get(i, ""))
            hit = cache.get(keys[i], display)
            if hit is not None:
                from devlint.engine import applicable

                if lint_only:
                    outcomes[i] = FileOutcome(display, hit)
                    continue
                if not any(applicable(d.fix, s) for d in hit):
                    # nothing --fix/--diff would change: the cached result stands
                    outcomes[i] = FileOutcome(display, hit, new_source=source)
                    continue
        if jobs == 1:
            # one process: lint as we go (never holds more than one file)
            outcomes[i] = (process_source(source, path, display, s, fix=fix, diff=diff) if lint_only
                           else process_file(path, display, s, fix=fix, diff=diff))
            _store(cache, keys.get(i), outcomes[i], display, lint_only, own.get(i, ""))
            continue
        work.append((i, path, display, source if lint_only else None, s))

    workers = min(jobs, len(work))
    if workers == 1:
        for i, path, display, source, s in work:
            outcomes[i] = (process_file(path, display, s, fix=fix, diff=diff) if source is None
                           else process_source(source, path, display, s, fix=fix, diff=diff))
    elif workers > 1:
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        chunks = _chunks(work, workers)
        with ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=_pool_context(),
                                 initializer=_init_worker, initargs=(fix, diff)) as pool:
            futures = [(pool.submit(_run_chunk, c), c) for c in chunks]
            for fut, chunk in futures:
                try:
                    for i, o in fut.result():
                        outcomes[i] = o
                except BrokenProcessPool:
                    for i, _path, display, _src, _s in chunk:
                        outcomes[i] = FileOutcome(
                            display, error="a worker process died while linting this file "
                                           "(rerun with --jobs 1 to see why)")

    for i, _path, display, _src, _s in work:
        _store(cache, keys.get(i), outcomes[i], display, lint_only, own.get(i, ""))
    return outcomes


def _store(cache, key: Optional[str], o: FileOutcome, display: str, lint_only: bool,
           settings_key: str = "") -> None:
    if cache is None or key is None or o.error is not None or o.changed:
        return
    if not lint_only and (o.new_source is None or cache.key(display, o.new_source, settings_key) != key):
        return  # the file changed between our read and the fixer's
    cache.put(key, o.diagnostics)
