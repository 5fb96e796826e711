"""One gRPC call as the engine sees it: the status code its span records, and its request id."""

from __future__ import annotations

import re
from typing import Any

import grpc

from localserve.errors import NotFound, RequestError
from localserve.protocols.v2.grpc.call import answered, request_id_of_call


def code(status: int, error: BaseException | None = None) -> grpc.StatusCode:
    number = answered(status, error)["rpc.grpc.status_code"]
    return next(c for c in grpc.StatusCode if c.value[0] == number)


def test_the_span_records_the_grpc_code_the_caller_got() -> None:
    assert code(200) == grpc.StatusCode.OK
    assert code(404) == grpc.StatusCode.NOT_FOUND
    assert code(503) == grpc.StatusCode.UNAVAILABLE
    assert code(500) == grpc.StatusCode.INTERNAL
    assert code(418) == grpc.StatusCode.INVALID_ARGUMENT  # any other 4xx: the request's fault
    assert code(400, RequestError("bad")) == grpc.StatusCode.INVALID_ARGUMENT
    assert code(500, NotFound("no such model")) == grpc.StatusCode.NOT_FOUND  # the error decides, not the status


class Context:
    """What ``request_id_of_call`` reads of grpc's servicer context: the call's metadata."""

    def __init__(self, metadata: Any) -> None:
        self.metadata = metadata

    def invocation_metadata(self) -> Any:
        return self.metadata


def test_the_callers_request_id_is_kept_and_a_missing_or_bad_one_replaced() -> None:
    assert request_id_of_call(Context((("user-agent", "x"), ("x-request-id", "mine-1")))) == "mine-1"  # type: ignore[arg-type]
    made = [request_id_of_call(Context(m)) for m in (None, (("x-request-id", "bad id\x01"),))]  # type: ignore[arg-type]
    assert all(re.fullmatch(r"[0-9a-f]{32}", rid) for rid in made) and made[0] != made[1]
