"""The conventions every command follows: each flag also a ``LOCALSERVE_*`` variable, and ``-h``.

``--max-body-size`` comes from ``LOCALSERVE_MAX_BODY_SIZE`` (the long name, upper-cased, after ``LOCALSERVE_``; the
command line wins; a repeatable flag takes values separated by spaces), set in one place,
``read_flags_from_environment``, for every option of every command (uvicorn's ``auto_envvar_prefix``, named after the
flag); ``--help`` names each. Only ``--help`` and ``--version`` have none (``env_exempt``).

``-h`` is ``--handler`` in the commands that take one (``run``, ``serve``, ``check``), as in ABEJA's ``abeja model
run-local -h main:handler``, with help at ``--help`` (``handler_command``); elsewhere ``-h`` is help.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

__all__ = ["ENV_PREFIX", "HandlerCommand", "env_exempt", "envvar_of", "handler_command", "read_flags_from_environment"]

ENV_PREFIX = "LOCALSERVE"


def env_exempt(option: click.Parameter) -> bool:
    """``--help`` and ``--version``: eager options that act at once and give the command no value."""
    return option.is_eager and not option.expose_value


def envvar_of(option: click.Option) -> str:
    """``--max-body-size`` -> ``LOCALSERVE_MAX_BODY_SIZE``: named after the flag, not the Python parameter.

    click's own ``auto_envvar_prefix`` would name it after the parameter and the subcommand
    (``LOCALSERVE_SERVE_CONFIG_FILE``); uvicorn's and our users' expectation is ``LOCALSERVE_CONFIG``.
    """
    longest = max((name for name in option.opts if name.startswith("--")), key=len)
    return f"{ENV_PREFIX}_{longest[2:].replace('-', '_').upper()}"


def read_flags_from_environment(command: click.Command) -> None:
    """Give every option of ``command`` (and its subcommands) its ``LOCALSERVE_*`` variable, shown in --help.

    An option may add other names (``--forwarded-allow-ips`` also reads uvicorn's ``FORWARDED_ALLOW_IPS``);
    its ``LOCALSERVE_*`` name is always among them, first.
    """
    for param in command.params:
        if not isinstance(param, click.Option) or env_exempt(param):
            continue
        ours = envvar_of(param)
        others = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or [])
        param.envvar = ours if not others or others == [ours] else [ours, *(n for n in others if n != ours)]
        param.show_envvar = True
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            read_flags_from_environment(sub)


class HandlerCommand(click.Command):
    """A command where ``-h`` is ``--handler``: a bare ``-h`` says so, instead of click's "requires an argument"."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.BadOptionUsage as exc:
            if exc.option_name not in ("-h", "--handler"):
                raise
            raise click.UsageError(
                f"{exc.option_name} is --handler here and needs the handler, e.g. "
                f"`localserve {ctx.info_name} -h main:handler`; for help, use --help.",
                ctx,
            ) from None


def handler_command() -> Callable[[Callable[..., Any]], HandlerCommand]:
    """``@click.command()`` for a command with ``--handler``: ``-h`` is it, help is ``--help``."""
    return click.command(cls=HandlerCommand, context_settings={"help_option_names": ["--help"]})
