"""``--async-store``: the job store URL given on the command line, applied to every AsyncAPI of a config."""

from __future__ import annotations

from dataclasses import replace

from localserve.config import ServeConfig
from localserve.errors import ConfigError

SCHEMES = ("sqlite", "redis", "rediss", "unix")


def with_async_store(config: ServeConfig, url: str) -> ServeConfig:
    """``config`` with ``async_store: url`` on each AsyncAPI (the flag wins over the file)."""
    if url.partition("://")[0].lower() not in SCHEMES or "://" not in url:
        raise ConfigError(f"Invalid --async-store {url!r}; expected redis://HOST:PORT/DB or sqlite:///ABSOLUTE/PATH.")
    if not any(api.is_async for api in config.apis):
        raise ConfigError(f"--async-store {url!r} is given, but {config.source} has no 'kind: AsyncAPI' API.")
    apis = tuple(replace(api, async_store=url) if api.is_async else api for api in config.apis)
    return replace(config, apis=apis)
