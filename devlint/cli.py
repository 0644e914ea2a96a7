"""The command line: `devlint [check] [PATHS]`, `devlint rules`, `devlint rule CODE`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from devlint import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
# `full` (the default, like ruff's): each finding with its source line and carets under it;
# `concise` (also `text`, its name before `full` existed): one line per finding
OUTPUT_FORMATS = ["full", "concise", "text", "json", "json-lines", "sarif", "github"]
PARSE_ERROR = "DL000"


class _DefaultToCheck(click.Group):
    """`devlint PATHS` means `devlint check PATHS` (ruff's convention); a word that is
    neither a command nor an existing path is a mistyped command (`devlint chekc`)."""

    def parse_args(self, ctx, args):
        if ctx.resilient_parsing:  # shell completion: `devlint <TAB>` offers the commands
            if args and args[0] not in self.commands and args[0] not in ("--version", "--help", "-h"):
                args = ["check", *args]
            return super().parse_args(ctx, args)
        if not args or (args[0] not in self.commands and args[0] not in ("--version", "--help", "-h")):
            if args and _looks_like_command(args[0]):
                _unknown_command(args[0], self.commands)
            args = ["check", *args]
        return super().parse_args(ctx, args)

    def format_options(self, ctx, formatter):
        super().format_options(ctx, formatter)
        # `devlint [PATHS]` runs `check`: its options are the ones users look for here
        records = [p.get_help_record(ctx) for p in check.get_params(ctx)]
        with formatter.section("Check options (devlint [check] [OPTIONS] [PATHS])"):
            formatter.write_dl([r for r in records if r is not None and not r[0].startswith("-h,")])

    def invoke(self, ctx):
        # SIGINT/SIGTERM/SIGHUP end the run between files (a file being written is
        # finished first, see runner.atomic_write): one line, exit 2, no traceback.
        previous = _install_interrupt_handlers()
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            name = getattr(exc, "signal_name", "SIGINT")
            click.echo(f"devlint: error: interrupted ({name}); files already fixed are complete, "
                       "the others are unchanged", err=True)
            sys.exit(EXIT_ERROR)
        except ImportError as exc:
            from devlint.libcst_compat import LibcstIncompatible

            if not isinstance(exc, LibcstIncompatible):
                raise
            click.echo(f"devlint: error: {exc}", err=True)
            sys.exit(EXIT_ERROR)
        finally:
            import signal

            for sig, old in previous.items():
                signal.signal(sig, old)


def _looks_like_command(word: str) -> bool:
    """A bare word (no path separator, no suffix, no option) that names no existing path."""
    return word[:1].isalpha() and word.replace("-", "_").isidentifier() and not os.path.exists(word)


def _unknown_command(word: str, commands) -> None:
    import difflib

    close = difflib.get_close_matches(word, sorted(commands), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise click.UsageError(f"unknown command {word!r}{hint} (commands: {', '.join(sorted(commands))}; "
                           f"no file or directory is named {word!r})")


class _Interrupted(KeyboardInterrupt):
    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def _install_interrupt_handlers() -> dict:
    import signal
    import threading

    previous: dict = {}
    if threading.current_thread() is not threading.main_thread():
        return previous

    def handler(signum, _frame):
        raise _Interrupted(signal.Signals(signum).name)

    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            previous[sig] = signal.signal(sig, handler)
    return previous


def _fail(message: str) -> None:
    click.echo(f"devlint: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


@click.group(cls=_DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="devlint")
def main() -> None:
    """devlint: find and fix PyTorch device-placement bugs."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fix", is_flag=True, help="Apply safe fixes in place.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply (with --fix/--diff) or count unsafe fixes.")
@click.option("--diff", is_flag=True, help="Print the diff of the fixes and write nothing.")
@click.option("--select", multiple=True, help="Rule codes, prefixes (DL00) or ALL; replaces the default set.")
@click.option("--extend-select", multiple=True, help="Add rules to the selection.")
@click.option("--ignore", multiple=True, help="Remove rules from the selection.")
@click.option("--show-fixes", is_flag=True, help="With --fix: list the fixes applied, per file and rule.")
@click.option("--output-format", type=click.Choice(OUTPUT_FORMATS), default="full", show_default=True,
              help="full: each finding with its source line; concise: one line per finding.")
@click.option("--statistics", is_flag=True,
              help="Print the number of findings per rule, and the total, instead of each finding.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Colour the text output and diffs (auto: on a terminal, unless NO_COLOR is set; "
                   "FORCE_COLOR forces it).")
@click.option("-q", "--quiet", is_flag=True,
              help="Print the findings (or diffs) only: no summary, no progress.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--device-name", default=None,
              help="Name of the device variable fixes insert (config: device-name; default: device).")
@click.option("--fix-style", type=click.Choice(["cuda", "accelerator"]), default=None,
              help="Form of the inserted device variable (config: fix-style; default: cuda).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Use this devlint.toml / pyproject.toml instead of searching for one.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
@click.option("--project-root", type=click.Path(file_okay=False, exists=True), default=None,
              help="The project's root for facts read across files [default: the configuration's directory, "
                   "else the nearest directory with .git or pyproject.toml].")
@click.option("--exclude", multiple=True, help="Globs to exclude (replaces the config's `exclude`).")
@click.option("--extend-exclude", multiple=True, help="More globs to exclude.")
@click.option("--force-exclude", is_flag=True,
              help="Apply excludes and .gitignore to paths passed explicitly too (for pre-commit).")
@click.option("--add-noqa", is_flag=True, help="Append `# noqa: CODE` to every line with a finding.")
@click.option("--baseline", type=click.Path(dir_okay=False),
              help="Hide findings recorded in this baseline file (path + code + line text).")
@click.option("--write-baseline", is_flag=True, help="Write the current findings to the --baseline file.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0,
              help="Worker processes (default 0: one per CPU; 1: no pool).")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Where lint results are cached [default: .devlint_cache, or $DEVLINT_CACHE_DIR].")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache.")
@click.option("--stdin-filename", default=None,
              help="Read the source from stdin, linted as this path (with --fix: fixed source to stdout).")
def check(paths, fix, unsafe_fixes, diff, show_fixes, select, extend_select, ignore, output_format, statistics,
          color, quiet, exit_zero, device_name, fix_style, config_file, isolated, project_root, exclude,
          extend_exclude, force_exclude, add_noqa, baseline, write_baseline, jobs, cache_dir, no_cache,
          stdin_filename) -> None:
    """Lint PATHS (files or directories; default: the current directory; `-`: stdin)."""
    import dataclasses

    from devlint import config as cfg
    from devlint import registry
    from devlint.discovery import discover, display_path
    from devlint.settings import Settings
    from devlint.output import FORMATS
    from devlint.output import statistics as print_statistics
    from devlint.runner import run_files

    if write_baseline and not baseline:
        _fail("--write-baseline needs --baseline FILE")
    if sum(map(bool, (fix or diff, add_noqa, write_baseline))) > 1:
        _fail("--fix/--diff, --add-noqa and --write-baseline cannot be combined")
    if "-" in paths:  # `devlint check -`: the source comes from stdin (ruff's convention)
        if len(paths) > 1:
            _fail("`-` reads one source from stdin: pass no other PATHS")
        paths, stdin_filename = (), stdin_filename or "-"
    if stdin_filename is not None and (paths or add_noqa or write_baseline):
        _fail("--stdin-filename reads one source from stdin: pass no PATHS, --add-noqa or --write-baseline")
    # configuration: --isolated, --config PATH, or the nearest config above the first path
    try:
        if isolated:
            conf = cfg.Config()
        elif config_file:
            conf = cfg.load_config(config_file)
        else:
            start = stdin_filename or (paths[0] if paths else ".")
            found = cfg.find_config(start)
            conf = cfg.load_config(found) if found else cfg.Config()
    except cfg.ConfigError as exc:
        _fail(str(exc))
    try:
        codes = conf.codes()
        if select:
            codes = registry.resolve(registry.split_codes(select))
        cli_ignored = registry.resolve([], registry.split_codes(ignore))
        codes = (codes | registry.resolve([], registry.split_codes(extend_select))) - cli_ignored
        # DL000 (the file does not parse) is reported unless ignored by its exact code
        parse_errors = PARSE_ERROR not in cli_ignored and (
            PARSE_ERROR not in registry.resolve([], conf.ignore) or PARSE_ERROR in codes)
    except registry.SelectionError as exc:
        _fail(str(exc))
    device_name = device_name or conf.device_name or "device"
    fix_style = fix_style or conf.fix_style or "cuda"
    if not device_name.isidentifier():
        _fail(f"--device-name {device_name!r} is not a Python identifier")
    from devlint.cache import default_dir

    base = Settings(select=frozenset(codes), unsafe_fixes=unsafe_fixes, fix_style=fix_style,
                    device_name=device_name, parse_errors=parse_errors,
                    project_root=(os.path.abspath(project_root) if project_root
                                  else str(conf.root) if conf.path is not None else None),
                    # summaries are kept beside lint results; a --fix/--diff run caches nothing
                    project_cache=None if no_cache or fix or diff else os.path.abspath(cache_dir or default_dir()))
    patterns = (tuple(exclude) if exclude else conf.exclude) + conf.extend_exclude + tuple(extend_exclude)
    path_filter = cfg.PathFilter(conf.root, patterns, conf.respect_gitignore)
    per_file = cfg.PerFileIgnores(conf.root, conf.per_file_ignores)
    baseline_dir = os.path.dirname(os.path.abspath(baseline)) if baseline else None
    known: dict = {}
    if baseline and not write_baseline:
        from devlint.suppression import BaselineError, read_baseline
        try:
            known = read_baseline(baseline)
        except BaselineError as exc:
            _fail(str(exc))

    def baseline_key(path: str) -> str:
        return Path(os.path.relpath(os.path.abspath(path), baseline_dir)).as_posix()

    def settings_for(path: str) -> Settings:
        ignored = per_file.codes_for(path)
        bl = known.get(baseline_key(path), frozenset()) if known else frozenset()
        if not ignored and not bl:
            return base
        return dataclasses.replace(base, select=base.select - ignored, baseline=bl,
                                   parse_errors=base.parse_errors and PARSE_ERROR not in ignored)

    out_stream = sys.stdout
    fmt_args = dict(fix=fix and not diff, diff=diff, unsafe=unsafe_fixes, color=_use_color(color, sys.stdout),
                    root=_repo_root(), select=sorted(base.select), quiet=quiet, show_fixes=show_fixes)

    if stdin_filename is not None:
        _check_stdin(stdin_filename, base if not force_exclude or not path_filter.excluded(
            stdin_filename, ancestors=True) else None, settings_for, fix, diff, output_format, statistics,
            exit_zero, fmt_args)
        return

    # paths: explicit ones are linted unless --force-exclude says otherwise
    explicit = list(paths) or ["."]
    if force_exclude and paths:
        explicit = [p for p in paths if not path_filter.excluded(p, os.path.isdir(p), ancestors=True)]
    files, path_errors = discover(explicit, skip=path_filter.excluded) if explicit else ([], [])
    for err in path_errors:
        click.echo(f"devlint: {'warning' if err.warning else 'error'}: {err}", err=True)
    path_errors = [e for e in path_errors if not e.warning]

    if add_noqa:
        _add_noqa(files, settings_for)
        sys.exit(EXIT_ERROR if path_errors else EXIT_CLEAN)

    cache = None
    if not no_cache:
        from devlint.cache import Cache, default_dir

        cache = Cache(cache_dir or default_dir(), base.key())
    pairs = [(f, display_path(f)) for f in files]
    progress = None if quiet or len(files) < 2 or not _isatty(sys.stderr) else _progress(len(files))
    try:
        outcomes = run_files(pairs, base, fix=fix and not diff, diff=diff, jobs=jobs, cache=cache,
                             settings_for=settings_for, progress=progress)
    finally:
        if progress is not None:
            progress.done()
    for o in outcomes:
        if o.error:
            click.echo(f"devlint: error: {o.display_error()}", err=True)
    errors = [str(e) for e in path_errors] + [o.display_error() for o in outcomes if o.error]

    if write_baseline:
        _write_baseline(baseline, files, outcomes, baseline_key)
        sys.exit(EXIT_ERROR if errors else EXIT_CLEAN)

    if statistics:
        print_statistics(outcomes, out_stream, output_format in ("json", "json-lines"), unsafe_fixes,
                         quiet=quiet, errors=errors)
    else:
        real = dict((d, f) for f, d in pairs)
        FORMATS[output_format](outcomes, out_stream, errors=errors, sources=_source_lines(real), **fmt_args)
    if errors:
        sys.exit(EXIT_ERROR)
    remaining = any(o.diagnostics for o in outcomes) or (diff and any(o.changed for o in outcomes))
    sys.exit(EXIT_FINDINGS if remaining and not exit_zero else EXIT_CLEAN)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _use_color(choice: str, stream) -> bool:
    """--color always/never; auto: NO_COLOR (any value) turns colour off, FORCE_COLOR (any
    value) on, else colour on a terminal only (https://no-color.org, force-color.org)."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return _isatty(stream)


class _progress:
    """`devlint: 120/4000 files` on stderr, for runs long enough to wonder (a terminal
    only; never in a pipe, a log or a pre-commit hook's captured output)."""

    DELAY, EVERY = 0.5, 0.1  # seconds before the first line, between updates

    def __init__(self, total: int) -> None:
        import time

        self.total, self.clock = total, time.monotonic
        self.start = self.last = self.clock()
        self.shown = False

    def __call__(self, done: int) -> None:
        now = self.clock()
        if now - self.start < self.DELAY or now - self.last < self.EVERY:
            return
        self.last, self.shown = now, True
        sys.stderr.write(f"\rdevlint: {done}/{self.total} files")
        sys.stderr.flush()

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _source_lines(real: dict):
    """For the full output format: (display path, notebook cell or None) -> source lines,
    read again from disk (after --fix: the fixed file the findings refer to)."""
    def read(display: str, cell):
        from devlint.runner import read_bytes

        try:
            raw = read_bytes(real.get(display, display))
        except OSError:
            return None
        if cell is not None:
            from devlint.notebook import Notebook, NotebookError

            try:
                return _cell_lines(Notebook(raw), cell - 1)
            except (NotebookError, IndexError):
                return None
        return raw.decode("utf-8", "replace").splitlines()
    return read


def _repo_root() -> Path:
    """The git work tree holding the working directory (else the working directory):
    SARIF URIs are relative to it."""
    cwd = Path.cwd().absolute()
    for d in (cwd, *cwd.parents):
        if (d / ".git").exists():
            return d
    return cwd


def _check_stdin(name, settings, settings_for, fix, diff, output_format, statistics, exit_zero, fmt_args):
    from devlint.output import FORMATS
    from devlint.output import statistics as print_statistics
    from devlint.runner import process_source

    source = sys.stdin.buffer.read()
    if settings is None:  # excluded by config (--force-exclude): pass the source through untouched
        if fix and not diff:
            sys.stdout.buffer.write(source)
        sys.exit(EXIT_CLEAN)
    settings = settings_for(name)
    if name.endswith(".ipynb"):
        from devlint.runner import process_notebook_source
        o = process_notebook_source(source, None, name, settings, fix=fix or diff, diff=diff)
    else:
        o = process_source(source, None, name, settings, fix=fix or diff, diff=diff)
    if o.error:
        click.echo(f"devlint: error: {o.display_error()}", err=True)
    if fix and not diff:
        # the fixed source goes to stdout (what editors read back); findings to stderr
        sys.stdout.flush()
        sys.stdout.buffer.write(o.new_source if o.new_source is not None else source)
        sys.stdout.flush()
        stream, fmt = sys.stderr, "concise"
    else:
        stream, fmt = sys.stdout, output_format
    text = (o.new_source if fix and not diff and o.new_source is not None else source)

    def lines(_display, cell):
        if cell is not None:
            from devlint.notebook import Notebook, NotebookError
            try:
                return _cell_lines(Notebook(text), cell - 1)
            except (NotebookError, IndexError):
                return None
        return text.decode("utf-8", "replace").splitlines()

    if statistics:
        print_statistics([o], stream, fmt in ("json", "json-lines"), fmt_args["unsafe"],
                         quiet=fmt_args["quiet"])
    else:
        FORMATS[fmt]([o], stream, errors=[o.display_error()] if o.error else [], sources=lines, **fmt_args)
    if o.error:
        sys.exit(EXIT_ERROR)
    remaining = bool(o.diagnostics) or (diff and o.changed)
    sys.exit(EXIT_FINDINGS if remaining and not exit_zero else EXIT_CLEAN)


def _add_noqa(files, settings_for) -> None:
    from devlint.libcst_compat import require

    require()
    from devlint.discovery import display_path
    from devlint.engine import lint_source
    from devlint.runner import atomic_write, read_bytes
    from devlint.suppression import add_noqa

    added = skipped = 0
    for f in files:
        display = display_path(f)
        try:
            raw = read_bytes(f)
        except OSError as exc:
            click.echo(f"devlint: error: {display}: cannot read: {exc.strerror or exc}", err=True)
            continue
        nb = None
        source = raw
        if f.endswith(".ipynb"):
            from devlint.notebook import Notebook, NotebookError
            try:
                nb = Notebook(raw)
            except NotebookError as exc:
                click.echo(f"devlint: error: {display}: {exc}", err=True)
                continue
            if not nb.python_kernel or not nb.code:
                continue
            source = nb.python
        diags = lint_source(source, display, settings_for(f)).diagnostics
        new, n, k = add_noqa(source, diags)
        skipped += k
        if k:
            click.echo(f"devlint: warning: {display}: {k} finding(s) are on lines that end inside a "
                       f"string or a continuation; no `# noqa` added there", err=True)
        if new == source:
            continue
        try:
            if nb is not None:
                new = nb.render(nb.new_sources(new))
            atomic_write(f, new, raw)
        except (OSError, ValueError) as exc:
            click.echo(f"devlint: error: {display}: not written: {exc}", err=True)
            continue
        added += n
    click.echo(f"Added `# noqa` to {added} line{'s' if added != 1 else ''}."
               + (f" {skipped} finding(s) could not be suppressed inline." if skipped else ""))


def _write_baseline(path, files, outcomes, key) -> None:
    from devlint.runner import read_bytes
    from devlint.suppression import baseline_entries, write_baseline

    entries = []
    for f, o in zip(files, outcomes):
        if not o.diagnostics:
            continue
        raw = read_bytes(f)
        if f.endswith(".ipynb"):
            from devlint.notebook import Notebook
            nb = Notebook(raw)
            for d in o.diagnostics:
                entries.extend(baseline_entries(key(f), _cell_lines(nb, d.cell - 1), [d]))
        else:
            entries.extend(baseline_entries(key(f), raw.decode("utf-8", "replace").splitlines(), o.diagnostics))
    write_baseline(path, entries)
    click.echo(f"Wrote {len(entries)} finding{'s' if len(entries) != 1 else ''} to baseline {path}.")


def _cell_lines(nb, idx) -> list[str]:
    from devlint.notebook import _source_text

    return _source_text(nb.cells[idx]).splitlines()


@main.command("rules")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def list_rules(output_format) -> None:
    """List every code: name, on by default or not, what --fix can do, summary."""
    import json

    from devlint.catalogue import META, PARSE_ERROR_INFO, RULES
    from devlint.registry import rule_by_code

    rows = []
    for r in (PARSE_ERROR_INFO, *RULES, *META):
        cls = rule_by_code(r.code)
        rows.append({"code": r.code, "name": r.name, "default": r.default_enabled,
                     "fix": _fix_kind(cls), "summary": r.summary, "docs": f"devlint rule {r.code}"})
    if output_format == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{'code':<6} {'on':<3} {'fix':<11} {'name':<32} summary")
    for row in rows:
        click.echo(f"{row['code']:<6} {'on' if row['default'] else 'off':<3} {row['fix']:<11} "
                   f"{row['name']:<32} {row['summary']}")


def _fix_kind(cls) -> str:
    """What --fix can do for a rule, from its documented examples: `safe`, `unsafe` (needs
    --unsafe-fixes), `safe/unsafe` (depends on the case) or `none`."""
    kinds = {"unsafe" if ex.unsafe else "safe" for ex in getattr(cls, "INVALID", ()) if ex.fixed is not None}
    return "/".join(k for k in ("safe", "unsafe") if k in kinds) or "none"


@main.command("rule")
@click.argument("code")
def show_rule(code: str) -> None:
    """Print one rule's documentation."""
    from devlint.registry import rule_by_code

    r = rule_by_code(code)
    if r is None:
        _fail(f"unknown rule {code!r} (see `devlint rules`)")
    default = "on by default" if r.default_enabled else "off by default (select it to enable)"
    click.echo(f"# {r.code} {r.name}\n\n{r.summary} ({default}).\n\n{r.docs()}")


@main.command("clean")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="The cache to remove [default: .devlint_cache, or $DEVLINT_CACHE_DIR].")
def clean_cache(cache_dir) -> None:
    """Remove the lint-result cache."""
    from devlint.cache import clean, default_dir

    path = cache_dir or default_dir()
    try:
        removed = clean(path)
    except (ValueError, OSError) as exc:
        _fail(str(exc))
    click.echo(f"Removed {path}" if removed else f"No cache at {path}")


# --- `devlint server`: the language server (devlint/server.py; pygls is the `lsp` extra) ---
@main.command("server")
def lsp_server() -> None:
    """Run the language server (LSP) on stdin/stdout (needs `pip install "devlint[lsp]"`)."""
    from devlint.server import serve

    serve()
