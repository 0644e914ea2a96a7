"""Runs the engine over files: read bytes, lint or fix, write back atomically."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import os
import signal
import stat
import sys
import threading
import traceback
from dataclasses import dataclass, field
from typing import Optional

from devlint.diagnostic import Diagnostic
from devlint.catalogue import cpython_parses, prefiltered
from devlint.fsutil import staged
from devlint.settings import Settings, applicable, with_project


@dataclass
class FileOutcome:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: Optional[str] = None  # a one-line problem: the file could not be linted or written
    fixed: int = 0
    fixes: dict = field(default_factory=dict)  # code -> findings of it fixed
    diff: str = ""
    changed: bool = False
    new_source: Optional[bytes] = None  # the fixed source, when fixing

    def display_error(self) -> str:
        return f"{self.path}: {self.error}"


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


_DEFERRED = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, n))


@contextlib.contextmanager
def _signals_deferred():
    """Hold SIGINT/SIGTERM/SIGHUP/SIGQUIT while a file is swapped in, so that an interrupt
    lands before or after the rename, never between writing and cleaning up."""
    can = hasattr(signal, "pthread_sigmask") and threading.current_thread() is threading.main_thread()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED) if can else None
    try:
        yield
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def atomic_write(path: str, data: bytes, expected_old: bytes) -> None:
    """Write ``data`` over ``path`` via a temporary file in the same directory and a rename,
    keeping the permission bits (and the owner, where allowed); refuse when the file changed
    since it was read. A symlink is written through (the link stays a link); a file with
    several hard links is refused (a rename would split them)."""
    real = os.path.realpath(path)
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        raise OSError("not a regular file; not overwritten")
    if st.st_nlink > 1:
        raise OSError(f"the file has {st.st_nlink} hard links and a rewrite would split them; not overwritten")
    d = os.path.dirname(real)
    with _signals_deferred(), staged(d, data, prefix=".devlint-", suffix=".tmp", fsync=True) as tmp:
        os.chmod(tmp, st.st_mode & 0o7777)
        if hasattr(os, "chown") and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
            try:
                os.chown(tmp, st.st_uid, st.st_gid)
            except OSError:
                pass  # not allowed: the fixed file belongs to whoever ran devlint
        # the last moment before the swap: was the file edited since it was read?
        now = os.stat(real)
        if (now.st_mtime_ns, now.st_size, now.st_ino) != (st.st_mtime_ns, st.st_size, st.st_ino) \
                or read_bytes(real) != expected_old:
            raise OSError("file changed on disk while devlint was fixing it; not overwritten")
        os.replace(tmp, real)


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    a = old.decode("utf-8", "replace").splitlines(keepends=True)
    b = new.decode("utf-8", "replace").splitlines(keepends=True)
    import difflib  # only --diff needs it (~13 ms to import)
    return "".join(difflib.unified_diff(a, b, f"a/{path.lstrip('/')}", f"b/{path.lstrip('/')}"))


def process_file(path: str, display: str, settings: Settings, fix: bool = False,
                 diff: bool = False) -> FileOutcome:
    try:
        source = read_bytes(path)
    except OSError as exc:
        return FileOutcome(display, error=f"cannot read: {exc.strerror or exc}")
    return process_source(source, path, display, settings, fix=fix, diff=diff)


# Deeply nested expressions (long `a + b + ...` chains, `x.f().f()...`) exhaust Python's
# default recursion limit in LibCST's visitors; such a file is retried once on a thread
# with a large stack and a higher limit.
DEEP_RECURSION_LIMIT = 6_000
DEEP_STACK_SIZE = 512 * 1024 * 1024
_deep_lock = threading.Lock()


def _run_deep(fn, *args):
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = exc

    with _deep_lock:
        old_limit = sys.getrecursionlimit()
        old_stack = threading.stack_size()
        try:
            try:
                threading.stack_size(DEEP_STACK_SIZE)
            except (ValueError, RuntimeError):  # the platform refuses: stay within the default
                raise _TooDeep() from None
            sys.setrecursionlimit(max(old_limit, DEEP_RECURSION_LIMIT))
            t = threading.Thread(target=target, name="devlint-deep", daemon=True)
            t.start()
            t.join()
        finally:
            threading.stack_size(old_stack)
            sys.setrecursionlimit(old_limit)
    if "error" in box:
        raise box["error"]
    return box["value"]


class _TooDeep(Exception):
    pass


def _analyse(fn, *args):
    try:
        return fn(*args)
    except RecursionError:
        pass
    try:
        return _run_deep(fn, *args)
    except RecursionError:
        raise _TooDeep() from None


def _internal_error(exc: BaseException) -> str:
    """One line for a bug in devlint itself, naming the innermost devlint frame."""
    where = ""
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        fn = frame.f_code.co_filename
        parts = fn.replace(os.sep, "/").split("/")
        if len(parts) >= 2 and parts[-2] in ("devlint", "rules"):
            where = f" at {parts[-2]}/{parts[-1]}:{lineno}"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"internal error ({type(exc).__name__}{': ' + text[:200] if text else ''}{where}); " \
           "file left unchanged; please report this devlint bug"


def process_source(source: bytes, path: Optional[str], display: str, settings: Settings,
                   fix: bool = False, diff: bool = False) -> FileOutcome:
    """Lint or fix one file's bytes; ``path`` is where a fix is written (None: nowhere).
    Never raises for a problem with this one file: the problem becomes the outcome's
    one-line ``error`` and the file is left as it was."""
    if path is not None and path.endswith(".ipynb"):
        return process_notebook_source(source, path, display, settings, fix=fix, diff=diff)
    settings = with_project(settings, path, source)
    from devlint.libcst_compat import require

    require()  # an unsupported LibCST stops the run (one line), not each file
    try:
        # LibCST and the rules are imported here, by the first file that needs parsing
        from devlint.engine import fix_source, lint_source

        if not (fix or diff):
            return FileOutcome(display, _analyse(lint_source, source, display, settings).diagnostics)
        out = _analyse(fix_source, source, display, settings)
    except _TooDeep:
        return FileOutcome(display, error="too deeply nested to analyse; file left unchanged")
    except MemoryError:
        return FileOutcome(display, error="out of memory while analysing; file left unchanged")
    except Exception as exc:  # noqa: BLE001 - one bad file (or rule bug) must not end the run
        if os.environ.get("DEVLINT_DEBUG"):
            raise
        return FileOutcome(display, error=_internal_error(exc))
    res = FileOutcome(display, out.remaining, fixed=out.fixed, fixes=out.fixed_codes)
    if out.problem:
        res.error = out.problem
    elif not out.converged:
        res.error = "fixes did not converge; file left unchanged"
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


def process_notebook_source(raw: bytes, path: Optional[str], display: str, settings, fix: bool = False,
                            diff: bool = False):
    """Lint (and fix) a notebook's bytes: its code cells as one module (devlint.notebook
    does the format; this does the linting, fixing and writing)."""
    from devlint.notebook import Notebook, NotebookError

    try:
        nb = Notebook(raw)
    except NotebookError as exc:
        return FileOutcome(display, error=str(exc))
    if not nb.python_kernel or not nb.code:
        return FileOutcome(display, new_source=raw)
    settings = with_project(settings, path, None)  # the index reads the notebook's code cells
    out = process_source(nb.python, None, display, settings, fix=fix or diff, diff=False)
    out.diagnostics = [nb.map_diagnostic(d) for d in out.diagnostics]
    out.diff = ""
    if out.error or not out.changed:
        out.changed = False
        out.new_source = raw
        return out
    try:
        changed = nb.new_sources(out.new_source)
        if diff:
            out.diff = nb.cell_diff(display, changed)
        new_raw = nb.render(changed)
    except NotebookError as exc:
        first = process_source(nb.python, None, display, settings)  # the findings as they stand
        return FileOutcome(display, [nb.map_diagnostic(d) for d in first.diagnostics], error=str(exc),
                           new_source=raw)
    out.changed = bool(changed)
    out.new_source = new_raw
    if fix and not diff and path is not None and changed:
        try:
            atomic_write(path, new_raw, raw)
        except OSError as exc:
            first = process_source(nb.python, None, display, settings)
            return FileOutcome(display, [nb.map_diagnostic(d) for d in first.diagnostics],
                               error=f"cannot write: {exc.strerror or exc}", new_source=raw)
    return out


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
    # Ctrl-C reaches the whole process group: the parent handles it (and stops handing out
    # work); a worker finishes the file it is on instead of dying with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()


def _die_with_parent() -> None:
    """A worker must never outlive devlint (a killed hook would leave it running, holding
    the caller's pipes open): on Linux the kernel kills it when the parent dies; elsewhere
    a daemon thread watches the parent."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, signal.SIGKILL, 0, 0, 0) == 0:  # PR_SET_PDEATHSIG
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)
            return
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        import time

        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="devlint-parent-watch", daemon=True).start()


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
              jobs: Optional[int] = None, cache=None, settings_for=None, progress=None) -> list[FileOutcome]:
    """Process ``(path, display)`` pairs; outcomes come back in the order given, whatever
    the order in which they finish. ``cache`` (a :class:`devlint.cache.Cache`) serves
    unchanged files without parsing; ``jobs`` > 1 lints the rest in a process pool.
    ``settings_for(path)`` gives a file its own settings (per-file ignores, baseline).
    ``progress(done)`` is told how many files are done, now and then."""
    from devlint.project import one_run

    with one_run():  # the project's directory listings are checked once per run, not per file
        return _run_files(files, settings, fix=fix, diff=diff, jobs=jobs, cache=cache,
                          settings_for=settings_for, progress=progress)


def _run_files(files: list[tuple[str, str]], settings: Settings, *, fix: bool, diff: bool,
               jobs: Optional[int], cache, settings_for, progress) -> list[FileOutcome]:
    jobs = default_jobs() if not jobs or jobs < 1 else jobs
    lint_only = not (fix or diff)
    # Many files, no cache, several workers: reading and prefiltering happen in the workers,
    # so the pool starts at once instead of after a serial pass over every file.
    defer_reads = cache is None and jobs > 1 and len(files) > 4 * jobs
    outcomes: list = [None] * len(files)
    keys: dict[int, str] = {}
    own: dict[int, str] = {}  # index -> the file's settings key, when not the run's
    work = []  # (index, path, display, source or None, settings)
    for i, (path, display) in enumerate(files):
        if progress is not None:
            progress(i - len(work))  # every file before this one is done, or waits in `work`
        s = settings_for(path) if settings_for is not None else settings
        if s is not settings:
            own[i] = s.key()
        if cache is None and (not lint_only or defer_reads):
            work.append((i, path, display, None, s))  # the worker reads it
            continue
        try:
            source = read_bytes(path)
        except OSError as exc:
            outcomes[i] = FileOutcome(display, error=f"cannot read: {exc.strerror or exc}")
            continue
        if not prefiltered(s.infos(), source) and not path.endswith(".ipynb") \
                and (not s.parse_errors or cpython_parses(source)):
            # no selected rule can report on this file and it parses (else DL000): nothing
            # to parse with LibCST, nor to import (cheaper than a cache lookup or a worker)
            outcomes[i] = FileOutcome(display, [], new_source=None if lint_only else source)
            continue
        if cache is not None:
            s = with_project(s, path, source if not path.endswith(".ipynb") else None)  # before the key
            if s.project:
                own[i] = s.key()
            keys[i] = cache.key(display, source, own.get(i, ""))
            hit = cache.get(keys[i], display)
            if hit is not None:
                if lint_only:
                    outcomes[i] = FileOutcome(display, hit)
                    continue
                if not any(applicable(d.fix, s) for d in hit):
                    # nothing --fix/--diff would change: the cached result stands
                    outcomes[i] = FileOutcome(display, hit, new_source=source)
                    continue
        if jobs == 1:
            # one process: lint as we go (never holds more than one file)
            _freeze_imports()
            outcomes[i] = (process_source(source, path, display, s, fix=fix, diff=diff) if lint_only
                           else process_file(path, display, s, fix=fix, diff=diff))
            _store(cache, keys.get(i), outcomes[i], display, lint_only, own.get(i, ""))
            continue
        work.append((i, path, display, source if lint_only else None, s))

    workers = min(jobs, len(work))
    done = len(files) - len(work)
    if workers == 1:
        _freeze_imports()
        for i, path, display, source, s in work:
            outcomes[i] = (process_file(path, display, s, fix=fix, diff=diff) if source is None
                           else process_source(source, path, display, s, fix=fix, diff=diff))
            done += 1
            if progress is not None:
                progress(done)
    elif workers > 1:
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        from devlint import registry

        from devlint.libcst_compat import require

        require()
        importlib.import_module("devlint.engine")  # before the fork: workers start warm
        registry.all_rules()
        gc.freeze()  # the workers' collector never walks (and so never copies) the parent's objects
        chunks = _chunks(work, workers)
        pool = ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=_pool_context(),
                                   initializer=_init_worker, initargs=(fix, diff))
        try:
            futures = [(pool.submit(_run_chunk, c), c) for c in chunks]
            for fut, chunk in futures:
                try:
                    for i, o in fut.result():
                        outcomes[i] = o
                    done += len(chunk)
                    if progress is not None:
                        progress(done)
                except BrokenProcessPool:
                    for i, _path, display, _src, _s in chunk:
                        outcomes[i] = FileOutcome(
                            display, error="a worker process died while linting this file "
                                           "(rerun with --jobs 1 to see why)")
        except BaseException:
            # interrupted: no new chunk starts; the running ones finish their current
            # files (each written atomically), then the workers exit
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        finally:
            gc.unfreeze()
        pool.shutdown(wait=True)

    for i, _path, display, _src, _s in work:
        _store(cache, keys.get(i), outcomes[i], display, lint_only, own.get(i, ""))
    return outcomes


_frozen = False


def _freeze_imports() -> None:
    """Before the first file a run lints in this process: import LibCST and the rules, then
    move everything alive to the collector's permanent generation. The collections that
    every parse triggers then never walk the imported modules again (~a third of the
    collector's time over a large run). Once per process: later objects stay collectable."""
    global _frozen
    if _frozen:
        return
    from devlint import registry

    importlib.import_module("devlint.engine")
    registry.all_rules()
    gc.freeze()
    _frozen = True


def _store(cache, key: Optional[str], o: FileOutcome, display: str, lint_only: bool,
           settings_key: str = "") -> None:
    if cache is None or key is None or o.error is not None or o.changed:
        return
    if not lint_only and (o.new_source is None or cache.key(display, o.new_source, settings_key) != key):
        return  # the file changed between our read and the fixer's
    cache.put(key, o.diagnostics)
