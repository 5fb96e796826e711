"""A model version as requests name it: a whole number of ASCII digits, the same rule on every route and folder."""

from __future__ import annotations

from localserve.errors import RequestError
from localserve.messages.error_text import short_repr

LATEST = ("latest", "highest")  # Cortex's names of a model's highest version
MAX_VERSION_DIGITS = 18  # a version is a signed 64-bit number in Triton's protocol; more digits are no version


def whole_number(text: str) -> int | None:
    """``text`` as a version number: ASCII digits only (``str.isdigit`` also takes ``²`` and other scripts' digits,
    which ``int`` refuses), at most ``MAX_VERSION_DIGITS`` of them; None for anything else."""
    if text.isascii() and text.isdigit() and len(text) <= MAX_VERSION_DIGITS:
        return int(text)
    return None


def not_a_version(version: object) -> RequestError:
    """The 400 for a model_version that is neither a whole number nor ``latest``."""
    return RequestError(
        f"model_version must be a whole number (at most {MAX_VERSION_DIGITS} digits) or 'latest' (or 'highest'); "
        f"got {short_repr(version)}."
    )
