"""What ``--grpc-port`` needs installed, decided from the packages' metadata before grpcio or protobuf is imported.

``inference_pb2`` is protobuf 5.26.1 code with no version check of its own (generators before 5.27 wrote none):
an older protobuf would load it, outside protobuf's cross-version guarantee (a runtime may be newer than the code
it loads, never older), and fail later in ways nobody can read. So ``serve --grpc-port`` and ``check
--grpc-port`` refuse it in one line. The minimums are pyproject.toml's ``grpc`` extra (a test holds them equal).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib.util import find_spec

MINIMUM = {"grpcio": "1.65.5", "protobuf": "5.26.1"}
_MODULES = {"grpcio": "grpc", "protobuf": "google.protobuf"}
UNKNOWN = "unknown"  # importable, but without a distribution's metadata (a vendored copy): not refused


def installed_versions() -> dict[str, str | None]:
    """Each package of ``MINIMUM``: its installed version, ``UNKNOWN``, or None when it cannot be imported."""
    # Here, not at the top: the metadata machinery is a few milliseconds of every start, needed with --grpc-port only.
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for name, module in _MODULES.items():
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            try:
                found[name] = UNKNOWN if find_spec(module) is not None else None
            except ModuleNotFoundError:  # google itself is missing
                found[name] = None
    return found


def grpc_problem(installed: Mapping[str, str | None]) -> str | None:
    """The one line that refuses ``--grpc-port`` with these versions installed, or None when they serve it."""
    missing = [name for name in MINIMUM if installed.get(name) is None]
    if missing:
        which = " and ".join(missing) + (", which are" if len(missing) > 1 else ", which is")
        return f"--grpc-port needs {which} not installed: pip install 'localserve[grpc]'."
    old = [name for name, least in MINIMUM.items() if _release(installed[name]) < _release(least)]
    if not old:
        return None
    needs = " and ".join(f"{name} >= {MINIMUM[name]}" for name in old)
    has = " and ".join(f"{name} {installed[name]}" for name in old) if len(old) > 1 else installed[old[0]]
    upgrade = " ".join(f"'{name}>={MINIMUM[name]}'" for name in old)
    return f"--grpc-port needs {needs}; this environment has {has}: pip install -U {upgrade}"


def _release(text: str | None) -> tuple[int, ...]:
    """``"5.26.1"`` → ``(5, 26, 1)``; a pre-release counts as its release, ``UNKNOWN`` as new enough."""
    match = re.match(r"\d+(?:\.\d+)*", text or "")
    if match is None:
        return (999,)
    return tuple(int(part) for part in match.group().split("."))
