"""The ``localserve`` command: flags in, calls out. Errors become click exceptions here only."""

from __future__ import annotations

import click

from localserve import __version__
from localserve.cli.serving import run, serve
from localserve.cli.tools import check, export, get


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="localserve")
def main() -> None:
    """Run ABEJA Platform and Cortex model handlers on your own machine, as the platform would."""


for command in (run, serve, check, get, export):
    main.add_command(command)

__all__ = ["main"]
