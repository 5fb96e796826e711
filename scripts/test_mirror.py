"""Modules of localserve/ without a test file at the mirrored path, and the figure.

    python scripts/test_mirror.py            # lists the modules without one, then "mirrored: N of M"
    python scripts/test_mirror.py --quiet    # the figure only

``localserve/a/b.py`` is mirrored by ``tests/a/test_b.py``. ``__init__.py`` and generated code are not
counted; a module that holds no behaviour worth a file of its own (a Protocol, a table of names, a
re-export) is named in NO_BEHAVIOUR with why. Exits 1 when an entry of NO_BEHAVIOUR is stale (the
module is gone, or it has a test file after all), so the list stays small and true.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "localserve"
TESTS = REPO / "tests"
GENERATED = ("_pb2.py", "_pb2_grpc.py", "_pb2.pyi")
# path relative to localserve/: why the module has no test file of its own.
NO_BEHAVIOUR: dict[str, str] = {
    "__main__.py": "`python -m localserve`: one call to cli.main (tests/cli/test_cli.py runs the CLI)",
    "engine/ports.py": "Protocols the engine owns; mypy checks that the doors meet them",
    "server/site.py": "a Protocol that server.app.App meets; mypy checks it",
    "logs/trace_ids.py": "one ContextVar; tests/tracing/test_spans.py reads it through the log lines",
    "logs/context.py": "two ContextVars and a holder; tests/logs/test_formatters.py reads them through the log lines",
    "metrics/names.py": "a table of metric family names",
    "metrics/buckets.py": "two tuples of histogram bucket bounds; tests/metrics/test_tallies.py counts into them",
}


def test_path(module: Path) -> Path:
    """The mirrored test file of ``module`` (a path under localserve/)."""
    relative = module.relative_to(PACKAGE)
    return TESTS.joinpath(*relative.parts[:-1], f"test_{relative.name}")


def modules() -> list[Path]:
    """The modules that count: every .py under localserve/ but __init__.py and generated code."""
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "__init__.py" and not path.name.endswith(GENERATED)
    ]


def unmirrored() -> tuple[list[str], int, list[str]]:
    """(modules without a mirrored test file and not excused, how many count, stale NO_BEHAVIOUR entries)."""
    counted = modules()
    names = {path.relative_to(PACKAGE).as_posix(): path for path in counted}
    missing = [name for name, path in names.items() if name not in NO_BEHAVIOUR and not test_path(path).is_file()]
    stale = [
        f"{name}: {'no such module' if name not in names else 'has ' + str(test_path(names[name]).relative_to(REPO))}"
        for name in NO_BEHAVIOUR
        if name not in names or test_path(names[name]).is_file()
    ]
    return missing, len(counted), stale


def main(argv: list[str]) -> int:
    missing, total, stale = unmirrored()
    if "--quiet" not in argv:
        for name in missing:
            print(f"localserve/{name}: no {test_path(PACKAGE / name).relative_to(REPO)}")
    for line in stale:
        print(f"stale NO_BEHAVIOUR entry: {line}")
    mirrored = sum(test_path(path).is_file() for path in modules())
    excused = total - mirrored - len(missing)
    print(
        f"mirrored: {mirrored} of {total} modules have a test file at the mirrored path; "
        f"{excused} hold no behaviour of their own; {len(missing)} have none"
    )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
