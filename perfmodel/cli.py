"""The ``perfmodel`` command line: one click group; :class:`PerfmodelError` is caught once, here."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from . import __version__
from .errors import PerfmodelError, suggestion

__all__ = ["main", "cli"]

#: (module under perfmodel.commands, command name) of every sub-command, in help order.
COMMANDS = (
    ("plan", "plan"),
    ("predict", "predict"),
    ("explain", "explain"),
    ("scale", "scale"),
    ("compare", "compare"),
    ("validate", "validate"),
    ("calibrate", "calibrate"),
    ("measure", "measure"),
    ("export", "export"),
    ("partition", "partition"),
    ("inspect", "models"),
    ("inspect", "show"),
    ("inspect", "hardware"),
)


class _Group(click.Group):
    """Loads each sub-command's module only when it is used (fast start-up)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for _, name in COMMANDS]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        for mod, cmd in COMMANDS:
            if cmd == name:
                module = importlib.import_module(f"perfmodel.commands.{mod}")
                command = getattr(module, cmd.replace("-", "_") + "_cmd")
                assert isinstance(command, click.Command)
                return command
        return None

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            hint = suggestion(name, self.list_commands(ctx))
            ctx.fail(f"No such command '{name}'." + (f" {hint[0].upper()}{hint[1:]}" if hint else ""))
        found, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            _refuse_repeats(command, click.Context(command, parent=ctx, info_name=found), rest)
        return found, command, rest


def _refuse_repeats(command: click.Command, ctx: click.Context, args: list[str]) -> None:
    """A usage error for a one-value option given twice: click keeps the last silently (``compare -H a
    -H b`` priced b alone), so the user learns which options take a comma list or repeat."""
    _, _, order = command.make_parser(ctx).parse_args(args=list(args))
    seen: set[str] = set()
    for param in order:
        if not isinstance(param, click.Option) or param.multiple or param.count or param.is_flag:
            continue
        if param.name in seen:
            flag = max(param.opts, key=len)
            ctx.fail(f"option '{flag}' given twice; it takes one value")
        seen.add(str(param.name))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="perfmodel")
@click.option("--debug", is_flag=True, help="Show the full traceback on errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """perfmodel: how to split the training of a deep network over GPUs, and how fast it runs.

    \b
    Start with:   perfmodel plan resnet50 --gpus 8
    Price a plan: perfmodel predict resnet50 --gpus 8 --strategy dp=8 --batch-per-gpu 256
    Units: seconds, bytes, FLOP/s in JSON; human units (ms, GiB) in tables, named in headers.
    """
    ctx.obj = {"debug": debug}


def main(argv: list[str] | None = None) -> None:
    """Entry point: exit 1 for bad data, 2 for usage errors, a one-line message, no traceback."""
    args = sys.argv[1:] if argv is None else argv
    # --debug is a flag of the group; accept it anywhere on the line (before "--")
    end = args.index("--") if "--" in args else len(args)
    debug = "--debug" in args[:end]
    if debug:
        args = ["--debug"] + [a for i, a in enumerate(args) if not (i < end and a == "--debug")]
    try:
        cli.main(args=args, prog_name="perfmodel", standalone_mode=False)
    except PerfmodelError as e:
        if debug:
            raise
        click.echo(f"error: {' '.join(str(e).splitlines())}", err=True)
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as e:
        if debug:
            raise
        ctx = getattr(e, "ctx", None)
        if type(e).__name__ == "NoArgsIsHelpError" and ctx is not None:  # bare `perfmodel`: help
            click.echo(ctx.get_help())
            sys.exit(0)
        click.echo(f"error: {_one_line(e)}", err=True)
        sys.exit(e.exit_code)
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(1)
    except OSError as e:
        if debug:
            raise
        click.echo(f"error: {e.strerror or e}: {getattr(e, 'filename', '') or ''}".rstrip(": "), err=True)
        sys.exit(1)
    sys.exit(0)


def _one_line(e: click.ClickException) -> str:
    """Click's message on one line; a usage error points at the command's --help."""
    text = " ".join(e.format_message().split())
    if isinstance(e, click.UsageError):
        where = e.ctx.command_path if e.ctx is not None else "perfmodel"
        text += f" (see '{where} --help')"
    return text


if __name__ == "__main__":  # pragma: no cover
    main()
