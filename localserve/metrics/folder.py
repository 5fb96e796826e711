"""The multiprocess folder of a serve with replicas: made fresh, checked, and told of replicas that exited."""

from __future__ import annotations

import os
from collections.abc import Mapping
from glob import glob

from prometheus_client import multiprocess as _multiprocess

from localserve.errors import ConfigError

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def check_multiprocess_dir(directory: str, environment: Mapping[str, str]) -> None:
    """Refuse a metrics folder that prometheus_client was not told of: ``environment`` is the process's, at start."""
    if environment.get(MULTIPROC_ENV) != directory:
        raise ConfigError(
            f"The metrics folder {directory!r} needs {MULTIPROC_ENV}={directory} in the process's environment "
            f"before prometheus_client is imported (got {environment.get(MULTIPROC_ENV)!r}); the supervisor sets "
            "it when it spawns a replica."
        )


def prepare_metrics_dir(directory: str) -> None:
    """Create ``directory`` for the replicas' metrics, removing files of an earlier run."""
    os.makedirs(directory, exist_ok=True)
    for path in glob(os.path.join(directory, "*.db")):
        os.remove(path)


def mark_process_dead(pid: int, directory: str) -> None:
    """Tell the metrics that replica ``pid`` has exited: its in-flight and queue gauges stop counting.

    Its counters and histograms stay: the requests it answered did happen.
    """
    _multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
