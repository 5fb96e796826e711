"""What a client is told of an error: its message (cut at a length, or hidden with ``--hide-errors``), the
server's paths left out, and the one JSON body of every error response."""

from __future__ import annotations

import json
import os
import re
import reprlib
import sys
from pathlib import Path
from typing import Any

HIDDEN_ERROR = "Internal error: the server log has the details under this request id (--hide-errors)."
MAX_ERROR_CHARS = 10_000  # of an error's message sent to the client


def error_message(exc: Exception, hide_errors: bool) -> str:
    """What a client is told of an error: its message (cut at ``MAX_ERROR_CHARS``), or with ``--hide-errors``
    nothing of a 500's text."""
    if hide_errors and getattr(exc, "status_code", 500) == 500:
        return HIDDEN_ERROR
    text = str(exc)
    if len(text) > MAX_ERROR_CHARS:  # a handler raising with a 10 MB message would answer 10 MB
        text = f"{text[:MAX_ERROR_CHARS]}... ({len(text) - MAX_ERROR_CHARS:,} more characters cut)"
    return text


_REPR = reprlib.Repr()
_REPR.maxlevel = 3  # a value 1,000 levels deep is shown to 3, never recursed through (a RecursionError)
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = _REPR.maxfrozenset = 8
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 400  # cut below, to the message's own length


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` for a message naming what a client sent: at most ``limit`` characters, and containers
    shown a few levels and items deep, so that no value, however deep, makes the message fail."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/])(?:/[^\s'\"/:,;()]+)+/(?=[^\s'\"/:,;()])")


def without_paths(text: str, project: Path) -> str:
    """``text`` for clients: paths inside the project made relative, other absolute folders dropped.

    Model and handler load failures name files; the log keeps the full paths, what a client
    sees (503 bodies, /readyz) does not disclose the server's layout.
    """
    text = text.replace(f"{project}{os.sep}", "").replace(str(project), ".")
    return _ABSOLUTE_PATH.sub("", text)


def error_body(message: str, request_id: str) -> bytes:
    """The JSON body of every error response: ``{"error": message, "request_id": ...}``.

    A message may hold lone surrogates (an exception naming a file whose name is not UTF-8, made
    by ``os.fsdecode``): UTF-8 cannot carry them, so such a body is written with JSON's escapes.
    """
    document = {"error": message, "request_id": request_id}
    try:
        return json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(document).encode("ascii")


# Module name -> the package that provides it, where they differ.
PACKAGES = {
    "PIL": "Pillow",
    "cv2": "opencv-python",
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
    "skimage": "scikit-image",
    "bs4": "beautifulsoup4",
    "google.protobuf": "protobuf",
    "dateutil": "python-dateutil",
}
CORTEX_PREINSTALLED = ("boto3", "msgpack", "numpy", "requests", "dill")


def package_for(module: str) -> str:
    """The pip package that provides ``module`` (its top-level name unless known to differ)."""
    if module in PACKAGES:
        return PACKAGES[module]
    top = module.split(".")[0]
    return PACKAGES.get(top, top)


def install_hint(module: str) -> str:
    """What to do about ``module`` not being installed (``check`` and ``serve`` say the same). A package is named
    only where the name is known here; otherwise the nearest installed module: a misspelt import is more likely
    than a package of that very name, and advising to install an unverified name invites typosquatting."""
    top = module.split(".")[0]
    installed = installed_modules()
    if top in installed and top != module:
        return f"{top!r} is importable, but it has no module {module!r}"
    package = package_for(module)
    if package in CORTEX_PREINSTALLED:
        return f"pip install 'localserve[cortex]' (Cortex had {package} pre-installed)"
    if module in PACKAGES or top in PACKAGES:
        return f"pip install {package}, or add it to requirements.txt"
    import difflib  # lazy: only for an error's suggestion; a few milliseconds of every start otherwise

    nearest = difflib.get_close_matches(top, sorted(installed), n=1, cutoff=0.8)
    guess = f"did you mean {nearest[0]!r} (installed)? If not, " if nearest else ""
    return f"{guess}add the package that provides {top!r} to requirements.txt (check its name on PyPI first)"


def installed_modules() -> set[str]:
    """The top-level modules this Python can import: built in, standard library, and on ``sys.path``."""
    import pkgutil

    found = set(sys.builtin_module_names) | set(sys.stdlib_module_names)
    found.update(info.name for info in pkgutil.iter_modules())
    return {name for name in found if not name.startswith("_")}
