"""``localserve check``: import each API's user modules in a fresh Python, and name what is missing.

Cortex's images came with boto3, msgpack, numpy, requests and dill (Cortex 0.8-0.11 docs, *Request handlers*), and code
that relied on them fails locally unless they are installed. The probe enters the project as ``run`` would (working
directory, sys.path, .env, the cached requirements, the /mnt/project redirection) in a subprocess, so nothing the
modules do at import touches ``check``.

Run as ``python -m localserve.checks.probe SPEC_JSON``; prints one JSON result per module.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from localserve.config import PredictorConfig, ServeConfig
from localserve.config.schema import ModelsConfig
from localserve.errors import HandlerLoadError
from localserve.handlers.abeja import inspect_handler
from localserve.handlers.loader import load_attr, load_file
from localserve.handlers.predictor import inspect_predictor
from localserve.handlers.request_handler import inspect_hooks
from localserve.messages.error_text import CORTEX_PREINSTALLED as CORTEX_PREINSTALLED  # moved there; re-exported
from localserve.messages.error_text import PACKAGES as PACKAGES
from localserve.messages.error_text import install_hint
from localserve.messages.error_text import package_for as package_for
from localserve.project.compat.mnt import install_redirect
from localserve.project.directory import enter_project

PROBE_TIMEOUT = 300.0


def user_modules(config: ServeConfig) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(api, how, target, what serve looks for in it) per module to import: ("iris", "file", "predictor.py",
    {"predictor": {...}}) or ("tax", "module", "main", {"handler": "main:handler"})."""
    modules: list[tuple[str, str, str, dict[str, Any]]] = []
    for api in config.apis:
        if api.handler:
            modules.append((api.name, "module", api.handler.partition(":")[0], {"handler": api.handler}))
        if api.request_handler:
            modules.append((api.name, "file", api.request_handler, {"request_handler": api.request_handler}))
        if api.predictor:
            multi = api.predictor.models is not None  # python_client and load_model (multi_model_reloading)
            predictor = {"type": api.predictor.type, "path": api.predictor.path, "multi_model": multi}
            modules.append((api.name, "file", api.predictor.path, {"predictor": predictor}))
    return modules


def probe_imports(config: ServeConfig, cached_env: Path | None) -> list[dict[str, Any]]:
    """Import every user module of ``config`` in a subprocess; one result dict per module."""
    spec = {
        "project": str(config.project),
        "env": str(cached_env) if cached_env is not None else None,
        "python_paths": [
            str(config.project / api.predictor.python_path)
            for api in config.apis
            if api.predictor is not None and api.predictor.python_path
        ],
        "modules": user_modules(config),
    }
    done = subprocess.run(
        [sys.executable, "-m", "localserve.checks.probe", json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT,
        cwd=config.project,
        check=False,
    )
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 and not results:
        results.append({"api": "", "target": "", "error": f"the import probe failed: {done.stderr.strip()[-500:]}"})
    return results


def requirement_names(project: Path) -> set[str]:
    """Normalised names of the packages the project's requirements.txt lists (installed at start)."""
    path = project / "requirements.txt"
    if not path.is_file():
        return set()
    names = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
        if match:
            names.add(_normalise(match.group(1)))
    return names


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _main(spec: dict[str, Any]) -> None:  # pragma: no cover - runs in the subprocess
    project = Path(spec["project"])
    enter_project(project, {})  # the working directory, sys.path and .env, as the Project context makes them
    for folder in spec["python_paths"]:
        sys.path.insert(1, folder)
    if spec["env"]:
        sys.path.insert(1, spec["env"])
    install_redirect(project)
    devnull = open(os.devnull, "w")  # noqa: SIM115  (stdout for user prints until the process ends)
    real_stdout, sys.stdout = sys.stdout, devnull
    for api, how, target, wanted in spec["modules"]:
        real_stdout.write(json.dumps(_probe(api, how, target, wanted, project)) + "\n")
        real_stdout.flush()


def _probe(
    api: str, how: str, target: str, wanted: dict[str, Any], project: Path
) -> dict[str, Any]:  # pragma: no cover
    """Import one user module and inspect it as ``serve`` would: the result line for ``check``."""
    import importlib
    import traceback

    result: dict[str, Any] = {"api": api, "target": target}
    try:
        if how == "module":
            module = importlib.import_module(target)
        else:
            module = load_file(target, project, api=api, what="module")
        _inspect(module, wanted, project)
    except HandlerLoadError as exc:  # what serve refuses in the module, short of running the predictor's __init__
        result["refused"] = str(exc)
    except ModuleNotFoundError as exc:
        result["missing"] = exc.name
    except Exception as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, ModuleNotFoundError):
            result["missing"] = cause.name
        else:
            result["error"] = f"{type(exc).__name__}: {exc}"
            result["details"] = traceback.format_exc(limit=-3)
    except SystemExit as exc:
        result["error"] = f"SystemExit: {exc}"
    if result.get("missing"):  # told here, where the project's imports are: the nearest installed module
        result["hint"] = install_hint(result["missing"])
    return result


def _inspect(module: Any, wanted: dict[str, Any], project: Path) -> None:  # pragma: no cover - in the subprocess
    """What ``serve`` checks in the imported ``module`` before it calls user code: the same functions decide."""
    if "handler" in wanted:
        inspect_handler(load_attr(wanted["handler"], project), wanted["handler"])
    elif "request_handler" in wanted:
        inspect_hooks(module, wanted["request_handler"])
    else:
        spec = dict(wanted["predictor"])
        models = ModelsConfig() if spec.pop("multi_model", False) else None
        inspect_predictor(module, PredictorConfig(**spec, models=models))


if __name__ == "__main__":  # pragma: no cover
    _main(json.loads(sys.argv[1]))
