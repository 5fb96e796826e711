"""The API key (``--api-key``): every request but the health probes carries ``Authorization: Bearer <key>`` or
gets a 401 saying what was missing; two Authorization headers are a 400. Through the real app, in-process."""

from __future__ import annotations

import localserve.testing
from tests.test_guards import CONFIG, NAN_PREDICTOR


def test_api_key(make_project) -> None:
    project = make_project({"predictor.py": NAN_PREDICTOR, "cortex.yaml": CONFIG})
    with localserve.testing.client(project, api_key="s3cret") as client:  # the app as served: behind the key
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200
        missing = client.post("/p", json={}, headers={"X-Request-ID": "k-1"})
        assert (missing.status_code, missing.headers["www-authenticate"], missing.json()) == (
            401,
            'Bearer realm="localserve"',
            {
                "error": "Unauthorized: this server requires 'Authorization: Bearer <key>' (--api-key); "
                "no Authorization header.",
                "request_id": "k-1",
            },
        )
        wrong = client.get("/metrics", headers={"Authorization": "Bearer s3cre"})
        assert (wrong.status_code, wrong.json()["error"]) == (
            401,
            "Unauthorized: the key is wrong or not a Bearer token; "
            "expected 'Authorization: Bearer <key>' with the server's --api-key.",
        )
        good = client.post("/p", json={}, headers={"Authorization": "bearer s3cret"})
        assert (good.status_code, good.json()) == (200, {"ok": 1.5, "bad": [None, None]})
        # Two Authorization headers, in either order: neither is taken.
        for pair in (
            [("Authorization", "Bearer s3cret"), ("Authorization", "Bearer x")],
            [("Authorization", "Bearer x"), ("Authorization", "Bearer s3cret")],
        ):
            twice = client.post("/p", json={}, headers=pair)
            assert (twice.status_code, twice.json()["error"]) == (
                400,
                "The request has 2 Authorization headers; send one.",
            )
        for probe in ("/healthz", "/health_check", "/v2/health/live", "/v2/health/ready"):
            assert client.get(probe).status_code == 200, probe
        assert client.get("/v2").status_code == 401  # the rest of V2 is not a probe
