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
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--device-name", default="device", show_default=True,
              help="Name of the device variable fixes insert.")
@click.option("--fix-style", type=click.Choice(["cuda", "accelerator"]), default="cuda", show_default=True,
              help="Form of the inserted device variable.")
def check(paths, fix, unsafe_fixes, diff, select, extend_select, ignore, output_format, exit_zero,
          device_name, fix_style) -> None:
    """Lint PATHS (files or directories; default: the current directory)."""
    from devlint import registry
    from devlint.discovery import discover, display_path
    from devlint.engine import Settings
    from devlint.output import FORMATS
    from devlint.runner import process_file

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
        click.echo(f"devlint: {'warning' if err.warning else 'error'}: {err}", err=True)
    path_errors = [e for e in path_errors if not e.warning]
    outcomes = []
    for f in files:
        o = process_file(f, display_path(f), settings, fix=fix and not diff, diff=diff)
        if o.error:
            click.echo(f"devlint: error: {o.display_error()}", err=True)
        outcomes.append(o)
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
