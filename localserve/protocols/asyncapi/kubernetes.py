"""What ``export kubernetes`` adds to an AsyncAPI's Deployment: the shared job store, as a setting of the pod."""

from __future__ import annotations

from typing import Any

from localserve.config import ApiConfig
from localserve.errors import ConfigError
from localserve.protocols.asyncapi.store import with_project

STORE_ENV = "LOCALSERVE_ASYNC_STORE"


def async_container_settings(api: ApiConfig, project: str) -> tuple[list[str], list[dict[str, Any]]]:
    """Extra ``args`` and ``env`` of the container: ``--async-store $(LOCALSERVE_ASYNC_STORE)`` and its value.

    Pods come and go, each with its own disk, so a cluster's AsyncAPI needs a store they share (Redis), its URL an
    environment setting easy to point at a Secret. ``project`` (the export's ``--name``) names the project in the
    store's keys, since every pod's project folder is /mnt/project.
    """
    if not api.is_async:
        return [], []
    url = api.async_store
    if url is None or url.partition("://")[0].lower() == "sqlite":
        raise ConfigError(
            f"api {api.name!r} is 'kind: AsyncAPI': its pods need a job store they share, but "
            f"{'it has none' if url is None else repr(url) + ' is a file on one pod'}; pass --async-store "
            "redis://HOST:PORT/DB (or set 'async_store' in the config)."
        )
    return ["--async-store", f"$({STORE_ENV})"], [{"name": STORE_ENV, "value": with_project(url, project)}]
