"""``localserve check``: refuse what ``serve`` refuses at load, without loading a model or creating a predictor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from localserve.checks.probe import probe_imports, requirement_names
from localserve.config import ApiConfig, ServeConfig
from localserve.errors import ConfigError, ModelLoadError
from localserve.messages.error_text import install_hint, package_for
from localserve.project.compat.platform import DEPENDENCIES_SCRIPT
from localserve.project.compat.view import excluded_files
from localserve.project.directory import cached_requirements
from localserve.protocols.v2.grpc.versions import grpc_problem, installed_versions
from localserve.runtimes import require_runtime


def check_project(config: ServeConfig, cache: Path, *, grpc: bool = False) -> Iterator[str]:
    """Yield one line per API, ``ok`` only for an API nothing below refuses; raise ConfigError at the first missing
    file, or at the end with what the imports found. ``grpc``: also as ``serve --grpc-port`` would."""
    if grpc:
        yield _check_grpc()
    for api in config.apis:
        _check_files(config, api)
        _check_model(config, api)
    notes, problems = _surroundings(config, cache)  # before any "ok": an API whose code fails is not ok
    for api in config.apis:
        if api.name not in problems:
            yield f"ok  {api.name}: {_summary(api)}"
    for splitter in config.splitters:
        apis = ", ".join(f"{t.name} {t.weight}%" + (" (shadow)" if t.shadow else "") for t in splitter.apis)
        yield f"ok  {splitter.name}: TrafficSplitter to {apis}"
    yield from notes
    if problems:
        raise ConfigError("\n".join(line for lines in problems.values() for line in lines))
    yield f"{config.source}: {len(config.apis)} API(s) valid."


def _check_files(config: ServeConfig, api: ApiConfig) -> None:
    """The API's handler module, request handler, predictor file and local model exist in the project."""
    where = f"{config.source}: api {api.name!r}"
    files = []
    if api.request_handler:
        files.append(("request_handler", api.request_handler))
    if api.predictor:
        files.append(("path in 'predictor'", api.predictor.path))
    if api.handler:
        module = api.handler.partition(":")[0].replace(".", "/")
        if not (config.project / f"{module}.py").is_file() and not (config.project / module).is_dir():
            raise ConfigError(f"{where}: handler module {module}.py is not in the project directory {config.project}.")
    location = api.model_location
    if location and "://" not in location:
        files.append(("model", location))
    for key, path in files:
        if not (config.project / path).exists():
            raise ConfigError(f"{where}: {key} {path!r} does not exist in the project directory {config.project}.")


def _check_model(config: ServeConfig, api: ApiConfig) -> None:
    """What loading the API's model would refuse, short of loading it: the runtime installed (the one function that
    serve asks), and for a local SavedModel folder its signatures (read from saved_model.pb, as loading decides)."""
    if api.model_format is None or api.model_location is None:
        return
    where = f"{config.source}: api {api.name!r}"
    try:
        require_runtime(api.model_format)
        path = config.project / api.model_location
        if api.model_format == "tensorflow" and "://" not in api.model_location and path.is_dir():
            from localserve.runtimes.tensorflow import inspect_saved_model  # lazy: tensorflow

            # A TensorFlowPredictor may name the signature in each call; a request handler API runs one.
            inspect_saved_model(path, api.tf_signature_key, needs_signature=api.predictor is None)
    except ModelLoadError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _check_grpc() -> str:
    """What ``serve --grpc-port`` refuses before it loads anything: grpcio or protobuf missing or too old."""
    installed = installed_versions()
    problem = grpc_problem(installed)
    if problem:
        raise ConfigError(problem)
    return f"ok  gRPC (--grpc-port): grpcio {installed['grpcio']}, protobuf {installed['protobuf']}"


def _summary(api: ApiConfig) -> str:
    """What the API serves, in one line (and how an AsyncAPI is used)."""
    if api.handler:
        desc = f"ABEJA handler {api.handler}"
    elif api.predictor:
        desc = f"{api.predictor.class_name} in {api.predictor.path}"
        desc += f" with {api.model_format} model {api.model_location}" if api.model_location else ""
    else:
        desc = f"{api.model_format} model {api.model}"
        desc += f" with request handler {api.request_handler}" if api.request_handler else ""
    if api.is_async:
        store = api.async_store or "SQLite in the cache folder"
        desc += f" (kind: AsyncAPI: POST /{api.name} submits a job, GET /{api.name}/<id> polls it; jobs in {store})"
    return desc


def _surroundings(config: ServeConfig, cache: Path) -> tuple[list[str], dict[str, list[str]]]:
    """What user code will not find as it did on the platform: notes (excluded files, dependencies.sh), and the
    problems of each API's imports (API name -> lines)."""

    notes: list[str] = []
    problems: dict[str, list[str]] = {}

    if config.config_file is not None:
        excluded = excluded_files(config.project, config.config_file)
        if excluded:
            notes.append(f"not packaged (user code cannot read them; --raw-project to allow): {', '.join(excluded)}")
    if (config.project / DEPENDENCIES_SCRIPT).is_file():
        notes.append(f"{DEPENDENCIES_SCRIPT}: runs at start only with --system-deps (the Docker image passes it)")
    cached = cached_requirements(config.project, cache)
    listed = requirement_names(config.project) if cached is None else set()
    for result in probe_imports(config, cached):
        found = problems.setdefault(result["api"], [])
        where = f"{config.source}: api {result['api']!r}: {result['target']}"
        missing = result.get("missing")
        if missing:
            package = package_for(missing)
            if package.lower().replace("_", "-") in listed:
                notes.append(
                    f"{where} imports {missing!r}: requirements.txt lists {package}, installed at the first start"
                )
            else:
                hint = result.get("hint") or install_hint(missing)
                found.append(f"{where} imports {missing!r}, which is not installed; {hint}.")
        elif result.get("refused"):
            found.append(f"{config.source}: api {result['api']!r}: {result['refused']}")
        elif result.get("error"):
            found.append(f"{where}: importing it failed: {result['error']}")
    return notes, {api: lines for api, lines in problems.items() if lines}
