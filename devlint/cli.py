"""The command line: `devlint [check] [PATHS]`, `devlint rules`, `devlint rule CODE`."""

from __future__ import annotations

import sys

import click

from devlint import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _DefaultToCheck(click.Group):
    """`devlint PATHS` means `devlint check PATHS` (ruff's convention)."""

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("--version", "--help", "-h")):
            args = ["check", *args]
        return super().parse_args(ctx, args)


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
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--device-name", default="device", show_default=True,
              help="Name of the device variable fixes insert.")
@click.option("--fix-style", type=click.Choice(["cuda", "accelerator"]), default="cuda", show_default=True,
              help="Form of the inserted device variable.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0,
              help="Worker processes (default 0: one per CPU; 1: no pool).")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Where lint results are cached [default: .devlint_cache, or $DEVLINT_CACHE_DIR].")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache.")
def check(paths, fix, unsafe_fixes, diff, select, extend_select, ignore, output_format, exit_zero,
          device_name, fix_style, jobs, cache_dir, no_cache) -> None:
    """Lint PATHS (files or directories; default: the current directory)."""
    from devlint import registry
    from devlint.discovery import discover, display_path
    from devlint.engine import Settings
    from devlint.output import FORMATS
    from devlint.runner import run_files

    try:
        codes = registry.resolve(
            registry.split_codes(select) if select else None,
            registry.split_codes(extend_select),
            registry.split_codes(ignore),
        )
    except registry.SelectionError as exc:
        _fail(str(exc))
    if not device_name.isidentifier():
        _fail(f"--device-name {device_name!r} is not a Python identifier")
    settings = Settings(select=codes, unsafe_fixes=unsafe_fixes, fix_style=fix_style, device_name=device_name)
    files, path_errors = discover(list(paths) or ["."])
    for err in path_errors:
        click.echo(f"devlint: error: {err}", err=True)
    cache = None
    if not no_cache:
        from devlint.cache import Cache, default_dir

        cache = Cache(cache_dir or default_dir(), settings.key())
    outcomes = run_files([(f, display_path(f)) for f in files], settings, fix=fix and not diff, diff=diff,
                         jobs=jobs, cache=cache)
    for o in outcomes:
        if o.error:
            click.echo(f"devlint: error: {o.display_error()}", err=True)
    FORMATS[output_format](outcomes, click.get_text_stream("stdout"), fix=fix and not diff, diff=diff,
                           unsafe=unsafe_fixes, color=sys.stdout.isatty())
    if path_errors or any(o.error for o in outcomes):
        sys.exit(EXIT_ERROR)
    remaining = any(o.diagnostics for o in outcomes) or (diff and any(o.changed for o in outcomes))
    sys.exit(EXIT_FINDINGS if remaining and not exit_zero else EXIT_CLEAN)


@main.command("rules")
def list_rules() -> None:
    """List every rule with its code, name and whether it is on by default."""
    from devlint.registry import all_rules

    for r in all_rules():
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
