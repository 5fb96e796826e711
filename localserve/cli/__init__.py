"""The ``localserve`` command: flags in, calls out. Errors become click exceptions here only.

Every flag can also come from the environment (``--port`` from ``LOCALSERVE_PORT``; the command line wins), and
``--help`` names each variable: ``conventions``.
"""

from __future__ import annotations

import click

from localserve import __version__
from localserve.cli.conventions import ENV_PREFIX, read_flags_from_environment
from localserve.cli.run import run
from localserve.cli.serving import serve
from localserve.cli.tools import check, export, get


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


for command in (run, serve, check, get, export):
    main.add_command(command)
read_flags_from_environment(main)

__all__ = ["main"]
