"""mkdocs hooks: the reference pages generated from the code at build time (mkdocs.yml, ``hooks:``).

Each page is made by a module of this folder from what the package itself uses (the click commands, the
config schema, the OpenAPI builders, the .proto, the Prometheus registry, the error classes), so the
reference cannot drift from the code: ``mkdocs build --strict`` remakes it every time.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the generators beside this file
sys.path.insert(0, str(HERE.parent.parent))  # the repository (localserve, when run from a checkout)

import cli_page  # noqa: E402
import config_page  # noqa: E402
import errors_page  # noqa: E402
import grpc_page  # noqa: E402
import http_page  # noqa: E402
import metrics_page  # noqa: E402

PAGES = {
    "reference/cli.md": cli_page.render,
    "reference/environment.md": cli_page.render_environment,
    "reference/config.md": config_page.render,
    "reference/http-api.md": http_page.render,
    "reference/grpc.md": grpc_page.render,
    "reference/metrics.md": metrics_page.render,
    "reference/errors.md": errors_page.render,
}


def on_files(files: Any, config: Any) -> Any:
    """Add each generated page to the site (mkdocs 1.6: ``File.generated``)."""
    from mkdocs.structure.files import File

    for uri, render in PAGES.items():
        files.append(File.generated(config, uri, content=render()))
    files.append(File.generated(config, "reference/openapi.json", content=http_page.render_json()))
    return files
