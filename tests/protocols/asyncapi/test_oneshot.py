"""``localserve run`` on an AsyncAPI: the job a submit would have stored, and what is printed when it fails."""

from __future__ import annotations

import json
import re

from localserve.errors import RequestError
from localserve.protocols.asyncapi.oneshot import job_failed, one_shot_job


def test_the_one_shot_job_is_what_a_submit_stores_without_credentials() -> None:
    headers = [("Content-Type", "application/json"), ("Authorization", "Bearer s"), ("X-Team", "a")]
    headers.append(("Proxy-Authorization", "Basic t"))
    job = one_shot_job(headers, b'{"x": 1}', "a=1&b=two")
    assert re.fullmatch(r"[0-9a-f]{32}", job.id)
    assert job.payload == b'{"x": 1}'
    assert job.meta == {
        "content_type": "application/json",
        "query_params": {"a": "1", "b": "two"},
        "headers": {"content-type": "application/json", "x-team": "a"},
    }
    assert one_shot_job([], b"").meta["content_type"] == ""  # no content type sent


def test_a_failed_job_prints_its_status_and_an_error_naming_the_job() -> None:
    job = one_shot_job([], b"not json")
    status, headers, body = job_failed(RequestError("The body is not JSON.", status_code=400), job)
    assert (status, headers) == (400, [("content-type", "application/json")])
    error = json.loads(body)
    assert error["error"] == "The body is not JSON."
    assert job.id in body.decode()
