"""The ``localserve`` command: flags in, calls out. Errors become click exceptions here only.

Every flag can also come from the environment: ``--port`` from ``LOCALSERVE_PORT``,
``--max-body-size`` from ``LOCALSERVE_MAX_BODY_SIZE`` (the flag's long name, upper-cased, after
``LOCALSERVE_``; a flag given on the command line wins). ``--help`` names each variable.
"""

from __future__ import annotations

import click

from localserve import __version__
from localserve.cli.run import run
from localserve.cli.serving import serve
from localserve.cli.tools import check, export, get

ENV_PREFIX = "LOCALSERVE"


@click.group(
    context_settings={
        "help_option_names": ["-h", "--help"],
        "max_content_width": 110,
        "auto_envvar_prefix": ENV_PREFIX,
    }
)
@click.version_option(__version__, prog_name="localserve")
def main() -> None:
    """Run ABEJA Platform and Cortex model handlers on your own machine, as the platform would."""


def envvar_of(option: click.Option) -> str:
    """``--max-body-size`` -> ``LOCALSERVE_MAX_BODY_SIZE``: named after the flag, not the Python parameter.

    click's own ``auto_envvar_prefix`` would name it after the parameter and the subcommand
    (``LOCALSERVE_SERVE_CONFIG_FILE``); uvicorn's and our users' expectation is ``LOCALSERVE_CONFIG``.
    """
    longest = max((name for name in option.opts if name.startswith("--")), key=len)
    return f"{ENV_PREFIX}_{longest[2:].replace('-', '_').upper()}"


def read_flags_from_environment(command: click.Command) -> None:
    """Give every option of ``command`` (and its subcommands) its ``LOCALSERVE_*`` variable, shown in --help."""
    for param in command.params:
        if isinstance(param, click.Option) and not param.is_eager and any(o.startswith("--") for o in param.opts):
            if param.envvar is None:
                param.envvar = envvar_of(param)
            param.show_envvar = True
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            read_flags_from_environment(sub)


for command in (run, serve, check, get, export):
    main.add_command(command)
read_flags_from_environment(main)

__all__ = ["main"]
