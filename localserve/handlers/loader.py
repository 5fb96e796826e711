"""Import user code ("module:function", or a file of the project) with precise errors."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from localserve.errors import HandlerLoadError
from localserve.messages.error_text import install_hint


def load_attr(spec: str, project: Path, *, what: str = "Handler") -> Any:
    """Import ``module:attr`` with the project first on sys.path; every failure is a HandlerLoadError."""
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise HandlerLoadError(f'{what} "{spec}" must look like "<module>:<function>", e.g. "main:handler".')
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
            raise HandlerLoadError(
                f'Could not import module "{module_name}" for {what.lower()} "{spec}": no {module_name.replace(".", "/")}.py '
                f"(or package) in the project directory {project}."
            ) from None
        raise _user_error(exc, module_name, missing=exc.name) from None
    except BaseException as exc:  # sys.exit() at import (argparse, say) must not end the server
        if _interrupted(exc):
            raise
        raise _user_error(exc, module_name) from None
    return _get_attr(module, attr_path, spec, what)


def load_file(path: str, project: Path, *, api: str, what: str) -> ModuleType:
    """Import a project file (``handler.py``, ``predictor.py``) as a module."""
    file = (project / path).resolve()
    if not file.is_file():
        raise HandlerLoadError(
            f"{what} file {path!r} of api {api!r} does not exist in the project directory {project}."
        )
    if file.suffix != ".py":
        raise HandlerLoadError(f"{what} file {path!r} of api {api!r} must be a Python file (.py).")
    name = file.stem
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) != str(file):
        name = f"_localserve_{api.replace('-', '_')}_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise HandlerLoadError(f"{what} file {path!r} of api {api!r} cannot be imported.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        if _interrupted(exc):
            raise
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        raise _user_error(exc, path, missing=missing) from None
    return module


def _get_attr(module: ModuleType, attr_path: str, spec: str, what: str) -> Any:
    target: Any = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            import difflib  # lazy: only for an error's suggestion; a few milliseconds of every start otherwise

            names = [n for n in dir(target) if not n.startswith("_")]
            close = difflib.get_close_matches(part, names, n=1)
            hint = f' Did you mean "{close[0]}"?' if close else ""
            raise HandlerLoadError(f'{what} "{spec}": module "{module.__name__}" has no attribute "{part}".{hint}')
        target = getattr(target, part)
    return target


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl-C (a KeyboardInterrupt on the main thread), which must stop the command; on an
    API's thread, where models load, a KeyboardInterrupt can only be the user code's own."""
    return isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread()


def _user_error(exc: BaseException, where: str, *, missing: str | None = None) -> HandlerLoadError:
    """The user's own exception, shown as theirs (with the frames of their code only); ``missing``: the
    module it did not find, whose package is named (as ``check`` names it)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename]
    location = f" ({Path(frames[-1].filename).name}, line {frames[-1].lineno})" if frames else ""
    if isinstance(exc, SyntaxError) and exc.filename:
        location = f" ({Path(exc.filename).name}, line {exc.lineno})"
    details = "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(exc))
    hint = f"; {install_hint(missing)}" if missing else ""
    return HandlerLoadError(f"Importing {where!r} failed{location}: {type(exc).__name__}: {exc}{hint}", details=details)


def positional_count(func: Callable[..., Any]) -> tuple[int, bool]:
    """(number of positional parameters, accepts *args) of a callable, ignoring a bound self."""
    params = inspect.signature(func).parameters.values()
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    return len(positional), varargs


def parameter_names(func: Callable[..., Any]) -> list[str]:
    """The names of ``func``'s parameters, without ``*args`` and ``**kwargs``."""
    return [
        p.name for p in inspect.signature(func).parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
