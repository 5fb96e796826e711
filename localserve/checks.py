"""``localserve check``: validate a project's config and files without loading any model."""

from __future__ import annotations

from collections.abc import Iterator

from localserve.config import ServeConfig
from localserve.errors import ConfigError


def check_project(config: ServeConfig) -> Iterator[str]:
    """Yield one line per API; raise ConfigError at the first missing file."""
    for api in config.apis:
        where = f"{config.source}: api {api.name!r}"
        files = []
        if api.request_handler:
            files.append(("request_handler", api.request_handler))
        if api.predictor:
            files.append(("path in 'predictor'", api.predictor.path))
        if api.handler:
            module = api.handler.partition(":")[0].replace(".", "/")
            if not (config.project / f"{module}.py").is_file() and not (config.project / module).is_dir():
                raise ConfigError(
                    f"{where}: handler module {module}.py is not in the project directory {config.project}."
                )
        location = api.model_location
        if location and "://" not in location:
            files.append(("model", location))
        for key, path in files:
            if not (config.project / path).exists():
                raise ConfigError(f"{where}: {key} {path!r} does not exist in the project directory {config.project}.")
        if api.handler:
            desc = f"ABEJA handler {api.handler}"
        elif api.predictor:
            desc = f"{api.predictor.class_name} in {api.predictor.path}"
            desc += f" with {api.model_format} model {api.model_location}" if api.model_location else ""
        else:
            desc = f"{api.model_format} model {api.model}"
            desc += f" with request handler {api.request_handler}" if api.request_handler else ""
        yield f"ok  {api.name}: {desc}"
    yield f"{config.source}: {len(config.apis)} API(s) valid."
