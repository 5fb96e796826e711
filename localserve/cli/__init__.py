"""The ``localserve`` command: flags in, calls out. Errors become click exceptions here only.

Every flag can also come from the environment (``--port`` from ``LOCALSERVE_PORT``; the command line wins), and
``--help`` names each variable: ``conventions``.

Each subcommand's module is imported when that command runs (click's documented lazy group), so ``localserve serve``
does not import what ``run``, ``check``, ``get`` and ``export`` need.
"""

from __future__ import annotations

import importlib

import click

from localserve import __version__
from localserve.cli.conventions import ENV_PREFIX, read_flags_from_environment

#: Each subcommand: the module that defines it and its name there.
SUBCOMMANDS = {
    "check": ("localserve.cli.tools", "check"),
    "export": ("localserve.cli.tools", "export"),
    "get": ("localserve.cli.tools", "get"),
    "run": ("localserve.cli.run", "run"),
    "serve": ("localserve.cli.serving", "serve"),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use, each given its ``LOCALSERVE_*`` variables then."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *SUBCOMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in SUBCOMMANDS:
            module, name = SUBCOMMANDS[cmd_name]
            command: click.Command = getattr(importlib.import_module(module), name)
            read_flags_from_environment(command)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=LazyGroup,
    context_settings={
        "help_option_names": ["-h", "--help"],
        "max_content_width": 110,
        "auto_envvar_prefix": ENV_PREFIX,
    },
)
@click.version_option(__version__, prog_name="localserve")
def main() -> None:
    """Run ABEJA Platform and Cortex model handlers on your own machine, as the platform would."""


read_flags_from_environment(main)

__all__ = ["main"]
