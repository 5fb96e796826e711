"""The platforms' surroundings that seed code relies on, recreated on one machine.

- ``context``: ``Project``, the one context that makes all of them for the process that serves (``run``, ``serve``) and
  undoes them on exit; ``enter_replica`` is a replica's share.
- ``mnt``: the project at ``/mnt/project`` (Cortex 0.8-0.9 docs, *Request handlers*).
- ``view``: the project as the platform packaged it (Cortex 0.25-0.33 docs, *Predictors*).
- ``hosts``: ``http://api-<name>:8888`` reaches API ``<name>`` of this server.
- ``platform``: the ABEJA environment variables with local values (ABEJA Platform docs, *Model handler function for
  19.04+*), ``dependencies.sh``.
- ``imports``: ``check``'s probe of each API's imports, in a subprocess.

``cortex_internal.lib.log.logger`` (Cortex 0.25-0.33 docs, *Predictors*) is a top-level package of this distribution.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from localserve.project.compat.mnt import install_redirect

__all__ = ["enter_replica"]


def enter_replica(project: Path, workdir: Path | None, mnt_mode: str) -> None:
    """In a replica process (spawned, so it inherits the mount namespace but not Python patches):
    the working directory, sys.path and, when the parent fell back to it, the /mnt/project redirection."""
    where = workdir or project
    os.chdir(where)
    if str(where) not in sys.path[:1]:
        sys.path.insert(0, str(where))
    if mnt_mode == "redirect":
        install_redirect(where)
