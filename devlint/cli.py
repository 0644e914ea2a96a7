"""The command line: `devlint [check] [PATHS]`, `devlint rules`, `devlint rule CODE`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from devlint import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
OUTPUT_FORMATS = ["text", "json", "json-lines", "sarif", "github"]


class _DefaultToCheck(click.Group):
    """`devlint PATHS` means `devlint check PATHS` (ruff's convention)."""

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("--version", "--help", "-h")):
            args = ["check", *args]
        return super().parse_args(ctx, args)

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
        finally:
            import signal

            for sig, old in previous.items():
                signal.signal(sig, old)


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
@click.option("--output-format", type=click.Choice(OUTPUT_FORMATS), default="text", show_default=True)
@click.option("--statistics", is_flag=True, help="Print the number of findings per rule instead of each finding.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--device-name", default=None,
              help="Name of the device variable fixes insert (config: device-name; default: device).")
@click.option("--fix-style", type=click.Choice(["cuda", "accelerator"]), default=None,
              help="Form of the inserted device variable (config: fix-style; default: cuda).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="Use this devlint.toml / pyproject.toml instead of searching for one.")
@click.option("--isolated", is_flag=True, help="Ignore all configuration files.")
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
def check(paths, fix, unsafe_fixes, diff, select, extend_select, ignore, output_format, statistics,
          exit_zero, device_name, fix_style, config_file, isolated, exclude, extend_exclude, force_exclude,
          add_noqa, baseline, write_baseline, jobs, cache_dir, no_cache, stdin_filename) -> None:
    """Lint PATHS (files or directories; default: the current directory)."""
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
        codes = registry.resolve(conf.select, conf.extend_select, conf.ignore)
        if select:
            codes = registry.resolve(registry.split_codes(select))
        codes = (codes | registry.resolve([], registry.split_codes(extend_select))) \
            - registry.resolve([], registry.split_codes(ignore))
    except registry.SelectionError as exc:
        _fail(str(exc))
    device_name = device_name or conf.device_name or "device"
    fix_style = fix_style or conf.fix_style or "cuda"
    if not device_name.isidentifier():
        _fail(f"--device-name {device_name!r} is not a Python identifier")
    base = Settings(select=frozenset(codes), unsafe_fixes=unsafe_fixes, fix_style=fix_style,
                    device_name=device_name)
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
        return dataclasses.replace(base, select=base.select - ignored, baseline=bl)

    out_stream = click.get_text_stream("stdout")
    fmt_args = dict(fix=fix and not diff, diff=diff, unsafe=unsafe_fixes, color=sys.stdout.isatty(),
                    root=_repo_root(), select=sorted(base.select))

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
    outcomes = run_files([(f, display_path(f)) for f in files], base, fix=fix and not diff, diff=diff,
                         jobs=jobs, cache=cache, settings_for=settings_for)
    for o in outcomes:
        if o.error:
            click.echo(f"devlint: error: {o.display_error()}", err=True)
    errors = [str(e) for e in path_errors] + [o.display_error() for o in outcomes if o.error]

    if write_baseline:
        _write_baseline(baseline, files, outcomes, baseline_key)
        sys.exit(EXIT_ERROR if errors else EXIT_CLEAN)

    if statistics:
        print_statistics(outcomes, out_stream, output_format in ("json", "json-lines"), unsafe_fixes)
    else:
        FORMATS[output_format](outcomes, out_stream, errors=errors, **fmt_args)
    if errors:
        sys.exit(EXIT_ERROR)
    remaining = any(o.diagnostics for o in outcomes) or (diff and any(o.changed for o in outcomes))
    sys.exit(EXIT_FINDINGS if remaining and not exit_zero else EXIT_CLEAN)


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

    source = click.get_binary_stream("stdin").read()
    if settings is None:  # excluded by config (--force-exclude): pass the source through untouched
        if fix and not diff:
            click.get_binary_stream("stdout").write(source)
        sys.exit(EXIT_CLEAN)
    settings = settings_for(name)
    if name.endswith(".ipynb"):
        from devlint.notebook import process_notebook_source
        o = process_notebook_source(source, None, name, settings, fix=fix or diff, diff=diff)
    else:
        o = process_source(source, None, name, settings, fix=fix or diff, diff=diff)
    if o.error:
        click.echo(f"devlint: error: {o.display_error()}", err=True)
    if fix and not diff:
        # the fixed source goes to stdout (what editors read back); findings to stderr
        click.get_binary_stream("stdout").write(o.new_source if o.new_source is not None else source)
        sys.stdout.flush()
        stream, fmt = click.get_text_stream("stderr"), "text"
    else:
        stream, fmt = click.get_text_stream("stdout"), output_format
    if statistics:
        print_statistics([o], stream, fmt in ("json", "json-lines"), fmt_args["unsafe"])
    else:
        FORMATS[fmt]([o], stream, errors=[o.display_error()] if o.error else [], **fmt_args)
    if o.error:
        sys.exit(EXIT_ERROR)
    remaining = bool(o.diagnostics) or (diff and o.changed)
    sys.exit(EXIT_FINDINGS if remaining and not exit_zero else EXIT_CLEAN)


def _add_noqa(files, settings_for) -> None:
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
def list_rules() -> None:
    """List every rule with its code, name and whether it is on by default."""
    from devlint.catalogue import META, RULES

    for r in (*RULES, *META):
        state = "on " if r.default_enabled else "off"
        click.echo(f"{r.code}  {state}  {r.name:<32} {r.summary}")


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
