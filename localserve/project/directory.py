"""The project directory: cwd and sys.path, .env, requirements installed into a cached folder."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from localserve.errors import ConfigError, ProjectError

log = logging.getLogger("localserve")
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TRAINING_RESULT_DIR = "abejainc_training_result"


def parse_environment(items: Iterable[str]) -> dict[str, str]:
    """``--environment KEY:VALUE`` options -> a dict (split at the first colon)."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition(":")
        if not sep:
            raise ConfigError(f"Invalid --environment {item!r}: expected KEY:VALUE, e.g. ABEJA_TRAINING_RESULT_DIR:.")
        if not ENV_KEY_RE.match(key):
            raise ConfigError(
                f"Invalid --environment {item!r}: the key {key!r} must match [A-Za-z_][A-Za-z0-9_]* "
                "(letters, digits and underscores, not starting with a digit)."
            )
        result[key] = value
    return result


def read_dotenv(path: Path) -> dict[str, str]:
    """``VARIABLE=value`` lines of a .env file, read by python-dotenv.

    Comments (``A=1 # note``), quotes, ``export`` and ``${VAR}`` expansion work as in the shell;
    a line that is not ``VARIABLE=value`` is a ConfigError naming the file and line.
    """
    import io

    from dotenv import dotenv_values
    from dotenv.parser import parse_stream

    text = path.read_text(encoding="utf-8")
    for binding in parse_stream(io.StringIO(text)):
        if binding.error or (binding.key is not None and binding.value is None):
            raise ConfigError(
                f"{path.name}, line {binding.original.line}: expected VARIABLE=value, "
                f"got {binding.original.string.rstrip(chr(10))!r}."
            )
    values = dotenv_values(stream=io.StringIO(text), interpolate=True)
    return {key: value for key, value in values.items() if value is not None}


def enter_project(
    project: Path,
    environment: Mapping[str, str],
    defaults: Mapping[str, str] | None = None,
    *,
    dotenv: Path | None = None,
) -> None:
    """Make ``project`` the working directory and first on sys.path; export .env, then ``environment``.

    Order of precedence, lowest first: ``defaults`` (only when unset), .env, ``--environment``.
    ``dotenv`` is the .env file to read (default: the one in ``project``).
    """
    project = project.resolve()
    os.chdir(project)
    if str(project) not in sys.path[:1]:
        sys.path.insert(0, str(project))
    dotenv = dotenv if dotenv is not None else project / ".env"
    values = dict(read_dotenv(dotenv)) if dotenv.is_file() else {}
    values.update(environment)
    for key, value in (defaults or {}).items():
        if key not in values and key not in os.environ:
            values[key] = value
    os.environ.update(values)


def requirements_spec(project: Path) -> tuple[str, list[str]] | None:
    """(file name, pip arguments) for the project's requirements.txt or Pipfile; None when it has neither."""
    req = project / "requirements.txt"
    if req.is_file():
        return "requirements.txt", ["-r", str(req)]
    pipfile = project / "Pipfile"
    if pipfile.is_file():
        return "Pipfile", pipfile_requirements(pipfile)
    return None


# PEP 508 marker variables that Pipfile accepts as keys: pywinusb = {version = "*", sys_platform = "== 'win32'"}
PIPFILE_MARKER_KEYS = (
    *("os_name", "sys_platform", "platform_machine", "platform_python_implementation", "platform_release"),
    *("platform_system", "platform_version", "python_version", "python_full_version", "implementation_name"),
    "implementation_version",
)
PIPFILE_KEYS = ("version", "extras", "markers", "path", "editable", "git", "ref", "file", *PIPFILE_MARKER_KEYS)


def pipfile_requirements(pipfile: Path) -> list[str]:
    """The [packages] of a Pipfile as pip requirement strings: versions, extras, markers, paths, git and file URLs.

    ``index`` (a package from another [[source]]) is refused with an error naming the package.
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # the `tomli` dependency (pyproject.toml); mypy checks the branch of the Python it runs for
        import tomli as tomllib
    try:
        data = tomllib.loads(pipfile.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProjectError(f"Pipfile is not valid TOML: {exc}.") from None
    _warn_python_version(pipfile, data.get("requires") or {})
    return [_pipfile_requirement(pipfile, name, spec) for name, spec in (data.get("packages") or {}).items()]


_warned_pipfiles: set[Path] = set()


def _warn_python_version(pipfile: Path, requires: dict[str, object]) -> None:
    """Warn once when the Pipfile's ``[requires]`` asks for another Python than the one running (not enforced)."""
    key = "python_full_version" if "python_full_version" in requires else "python_version"
    current = ".".join(map(str, sys.version_info[: 3 if key == "python_full_version" else 2]))
    if key in requires and str(requires[key]) != current and pipfile not in _warned_pipfiles:
        _warned_pipfiles.add(pipfile)
        log.warning(
            "Pipfile: [requires] %s = %r, but localserve runs Python %s: the packages are installed for it "
            "(pipenv would refuse; localserve does not switch Pythons)", key, requires[key], current
        )  # fmt: skip


def _pipfile_requirement(pipfile: Path, name: str, spec: object) -> str:
    where = f"Pipfile: [packages] {name}"
    if isinstance(spec, str):
        return name if spec == "*" else f"{name}{spec}"
    if not isinstance(spec, dict):
        raise ProjectError(f"{where}: expected a version string or a table, got {spec!r}.")
    unknown = [key for key in spec if key not in PIPFILE_KEYS]
    if unknown:
        extra = " (packages from another [[source]] are not supported; install it with pip yourself)"
        raise ProjectError(
            f"{where}: localserve cannot install a package with {unknown[0]!r}"
            + (extra if unknown[0] == "index" else "")
            + f"; the keys it understands: {', '.join(PIPFILE_KEYS[:8])} and PEP 508 marker names."
        )
    extras = spec.get("extras") or []
    if not isinstance(extras, list) or not all(isinstance(e, str) for e in extras):
        raise ProjectError(f"{where}: 'extras' must be a list of names, got {extras!r}.")
    named = f"{name}[{','.join(extras)}]" if extras else name
    if isinstance(spec.get("path"), str):
        location = str((pipfile.parent / spec["path"]).resolve())
        requirement = f"{named} @ file://{location}" if extras else location
    elif isinstance(spec.get("git"), str):
        ref = f"@{spec['ref']}" if isinstance(spec.get("ref"), str) else ""
        url = spec["git"] if spec["git"].startswith("git+") else f"git+{spec['git']}"
        requirement = f"{named} @ {url}{ref}"
    elif isinstance(spec.get("file"), str):
        requirement = f"{named} @ {spec['file']}"
    else:
        version = spec.get("version", "*")
        if not isinstance(version, str):
            raise ProjectError(f"{where}: 'version' must be a string like '==1.0' or '*', got {version!r}.")
        requirement = named if version == "*" else f"{named}{version}"
    markers = [spec["markers"]] if isinstance(spec.get("markers"), str) else []
    markers += [f"{key} {spec[key]}" for key in PIPFILE_MARKER_KEYS if isinstance(spec.get(key), str)]
    if markers:
        requirement += " ; " + " and ".join(f"({m})" if len(markers) > 1 else m for m in markers)
    return requirement


def _requirements_target(project: Path, cache: Path) -> tuple[str, list[str], Path] | None:
    spec = requirements_spec(project)
    if spec is None:
        return None
    name, args = spec
    source = (project / name).read_bytes()
    key = hashlib.sha256(source + sys.version.encode() + "\0".join(args[2:] if name == "Pipfile" else []).encode())
    return name, args, cache / "envs" / key.hexdigest()[:24]


def cached_requirements(project: Path, cache: Path) -> Path | None:
    """The folder under ``cache`` where the project's requirements are already installed, if they are."""
    found = _requirements_target(project, cache)
    if found is None or not (found[2] / ".complete").is_file():
        return None
    return found[2]


def install_requirements(project: Path, cache: Path, *, quiet: bool = False) -> Path | None:
    """Install requirements.txt (or a Pipfile) into ``<cache>/envs/<hash>`` once; put it on sys.path.

    The folder is keyed by the file's content and the Python version, so a second start with the
    same requirements installs nothing.
    """
    found = _requirements_target(project, cache)
    if found is None:
        return None
    name, args, target = found
    if not (target / ".complete").is_file():
        _pip_install(name, args, target, quiet=quiet, cwd=project)
    else:
        log.info("%s: already installed in %s", name, target)
    _activate(target)
    return target


def activate_requirements(target: Path) -> None:
    """Put an installed requirements folder on sys.path and PYTHONPATH again (``serve --reload``)."""
    _activate(target)


def _activate(target: Path) -> None:
    if str(target) not in sys.path:
        sys.path.insert(1, str(target))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(target) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(target), *paths])


def _pip_install(name: str, args: list[str], target: Path, *, quiet: bool, cwd: Path) -> None:
    if not args:
        target.mkdir(parents=True, exist_ok=True)
        (target / ".complete").write_text("")
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".installing-", dir=target.parent))
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--target", str(staging), *args]
    log.info("installing %s into %s", name, target)
    try:
        proc = subprocess.run(
            command,
            cwd=cwd,
            stdout=subprocess.PIPE if quiet else stderr_for_children(),
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ProjectError(f"Could not run pip to install {name}: {exc}.") from None
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        stderr = proc.stderr or ""
        raise ProjectError(f"Installing {name} failed: {_pip_failure(stderr)}\n{stderr.strip()[-2000:]}")
    if not quiet:
        sys.stderr.write((proc.stdout or "") + (proc.stderr or ""))
    (staging / ".complete").write_text(" ".join(args))
    try:
        staging.rename(target)
    except OSError:  # another process finished the same install first
        shutil.rmtree(staging, ignore_errors=True)


def stderr_for_children() -> Any:
    """Where a child process's output goes: our stderr (stdout carries `run`'s body), or a pipe.

    A pipe when stderr is not a file (click's ``CliRunner`` in a test): its output is then written
    to stderr once the child has ended.
    """
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.PIPE
    return sys.stderr


def _pip_failure(stderr: str) -> str:
    for pattern in (
        r"No matching distribution found for (\S+)",
        r"Could not find a version that satisfies the requirement (\S+)",
        r"Failed to build (\S+)",
        r"Failed building wheel for (\S+)",
        r"ERROR: Invalid requirement: '?([^'\n]+)'?",
        r"ERROR: Could not open requirements file: (.+)",
    ):
        match = re.search(pattern, stderr)
        if match:
            return f"pip could not install the package {match.group(1)!r}."
    return "pip exited with an error (see its output below)."
