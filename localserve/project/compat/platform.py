"""The platforms' environment: ABEJA's variables with local values (ABEJA Platform docs, *Model handler function for 19.04+*), and ``dependencies.sh``."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from localserve.errors import ProjectError
from localserve.project.directory import stderr_for_children

log = logging.getLogger("localserve")

# ABEJA Platform set these in the handler's environment (ABEJA Platform docs, *Model handler function for 19.04+*); localserve gives each a
# recognisable local value unless the user (environment, .env or --environment) sets it.
ABEJA_LOCAL_VALUES = {
    "ABEJA_ORGANIZATION_ID": "0000000000000",
    "ABEJA_MODEL_ID": "0000000000000",
    "ABEJA_MODEL_VERSION_ID": "0000000000000",
    "ABEJA_DEPLOYMENT_ID": "0000000000000",
    "ABEJA_SERVICE_ID": "0000000000000",
    "TRAINING_JOB_DEFINITION_NAME": "local",
    "TRAINING_JOB_ID": "0000000000000",
}
DEPENDENCIES_SCRIPT = "dependencies.sh"


def run_dependencies_script(project: Path, *, allowed: bool) -> None:
    """Cortex ran ``dependencies.sh`` (system packages) before installing requirements.txt.

    Locally it changes the machine, so it runs only when ``allowed`` (``--system-deps``; the Docker
    image passes it); otherwise a warning names the file at every start.
    """
    script = project / DEPENDENCIES_SCRIPT
    if not script.is_file():
        return
    if not allowed:
        log.warning(
            "%s is not run: it installs system packages, which localserve does only with --system-deps "
            "(the Docker image passes it); install what it lists yourself, or pass --system-deps",
            script,
        )
        return
    log.info("running %s", script)
    try:
        # its output goes to stderr: stdout carries `run`'s response body
        done = subprocess.run(["bash", str(script)], cwd=project, stdout=stderr_for_children(), check=False, text=True)
    except OSError as exc:
        raise ProjectError(f"Could not run {DEPENDENCIES_SCRIPT}: {exc}.") from None
    if done.stdout:  # stderr is not a file (click's CliRunner): the output comes once the script has ended
        sys.stderr.write(done.stdout)
    if done.returncode != 0:
        raise ProjectError(
            f"{DEPENDENCIES_SCRIPT} exited with status {done.returncode}; fix the script (its output is above) "
            "or start without --system-deps."
        )
