"""schemathesis hooks for tests/server/test_openapi_fuzz.py (``SCHEMATHESIS_HOOKS``): positive data acceptance,
but for the one rule of the V2 infer requests that JSON Schema cannot state."""

from __future__ import annotations

import re
from typing import Any

import schemathesis

# A V2 input's element count must be the product of its 'shape', a relation between two values of the request
# that no JSON Schema keyword expresses: a schema-valid request may break it, and the server says so (400).
SHAPE_AND_DATA = re.compile(r"^Input '[^']+' has shape \[[0-9, ]*\], which holds \d+ elements?, but its data has \d+")
ACCEPTED = {401, 403, 404, 409, 429}  # schemathesis' own positive_data_acceptance's, but 5xx (not_a_server_error's)


@schemathesis.check
def positive_data_accepted(ctx: Any, response: Any, case: Any) -> bool | None:
    """schemathesis' positive_data_acceptance, allowing only the V2 shape-and-data 400 for a valid request."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    if response.request.method.upper() != case.operation.method.upper():  # a probe of an undeclared method
        return None
    status = response.status_code
    if status < 400 or status in ACCEPTED or status >= 500:
        return None
    if status == 400 and case.operation.path.endswith("/infer") and SHAPE_AND_DATA.match(response.json()["error"]):
        return None
    raise AssertionError(f"Valid data should have been accepted; got {status}: {response.text[:300]}")
