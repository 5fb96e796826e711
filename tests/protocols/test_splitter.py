"""kind: TrafficSplitter through the real app: weights, the shadow copy, the served-by header, the figures."""

from __future__ import annotations

import logging
import math
import random

from tests.conftest import wait_until

NAMED = """
class PythonPredictor:
    def __init__(self, config):
        self.name = config["name"]

    def predict(self, payload):
        return {"api": self.name, "payload": payload}
"""

SHADOW = """
import threading

entered = threading.Event()
release = threading.Event()
payloads = []

class PythonPredictor:
    def __init__(self, config):
        pass

    def predict(self, payload, headers):
        payloads.append((payload, headers.get("x-request-id")))
        entered.set()
        assert release.wait(120)  # the bound only catches a hang
        raise RuntimeError("the shadow model is broken")
"""


def config(weights: dict[str, int], shadow: str = "", extra: str = "") -> str:
    apis = "".join(
        f"- name: {name}\n  kind: RealtimeAPI\n  predictor: {{type: python, path: named.py, config: {{name: {name}}}}}\n"
        for name in weights
    )
    if shadow:
        apis += f"- name: rec\n  kind: RealtimeAPI\n  predictor: {{type: python, path: shadow.py}}\n{extra}"
    splits = "".join(f"    - {{name: {name}, weight: {w}}}\n" for name, w in weights.items())
    if shadow:
        splits += f"    - {{name: rec, {shadow}, shadow: true}}\n"
    return apis + f"- name: split\n  kind: TrafficSplitter\n  apis:\n{splits}"


def splitter_project(make_project, weights: dict[str, int], shadow: str = "", extra: str = ""):
    return make_project({"cortex.yaml": config(weights, shadow, extra), "named.py": NAMED, "shadow.py": SHADOW})


def binomial_bound(n: int, p: float, alpha: float) -> int:
    """The smallest k with P(|X - np| >= k) <= alpha for X ~ Binomial(n, p), from the exact tails (math.comb).

    A correct router draws each request's API independently with probability p, so its count X is
    Binomial(n, p) and |X - np| >= k happens with probability at most alpha: the test below fails a
    correct router less than once in 1/alpha runs. A router with the wrong weights (say 50/50 for
    30/70, or the weights swapped) is off by far more than k at n = 1,000 (k is 72 for p = 0.3).
    """
    pmf = [math.comb(n, x) * p**x * (1 - p) ** (n - x) for x in range(n + 1)]
    mean = n * p
    for k in range(n + 1):
        if sum(q for x, q in enumerate(pmf) if abs(x - mean) >= k) <= alpha:
            return k
    return n + 1


def test_requests_follow_the_weights_within_a_binomial_bound(serve, make_project) -> None:
    project = splitter_project(make_project, {"a": 30, "b": 70})
    n = 1000
    bound = binomial_bound(n, 0.3, 1e-6)
    assert 60 < bound < 90  # the exact tail at n=1000, p=0.3: what the assertion below allows
    with serve(project) as client:
        served = [client.post("/split", json=i).headers["x-localserve-api"] for i in range(n)]
        count_a = served.count("a")
        assert served.count("b") == n - count_a
        assert abs(count_a - 300) < bound, (count_a, bound)
        # The figures per target are the same counts, in /stats and /metrics.
        entry = client.get("/split/stats").json()
        assert entry["targets"] == {
            "a": {"weight": 30, "requests": {"2xx": count_a, "4xx": 0, "5xx": 0}},
            "b": {"weight": 70, "requests": {"2xx": n - count_a, "4xx": 0, "5xx": 0}},
        }
        assert entry["requests"] == {"2xx": n, "4xx": 0, "5xx": 0}
        metrics = client.get("/metrics").text
        assert f'localserve_splitter_requests_total{{code="200",splitter="split",target="a"}} {count_a}.0' in metrics
        # ... and each request was one of its API's requests, counted by the engine.
        stats = {e["api"]: e for e in client.get("/stats").json()}
        assert (stats["a"]["requests"]["2xx"], stats["b"]["requests"]["2xx"]) == (count_a, n - count_a)


def test_the_answer_names_the_api_and_the_body_is_that_apis(serve, make_project) -> None:
    project = splitter_project(make_project, {"a": 0, "b": 100})
    with serve(project) as client:
        response = client.post("/split/predict", json={"x": 1}, headers={"X-Request-ID": "r1"})
        assert response.status_code == 200
        assert response.json() == {"api": "b", "payload": {"x": 1}}
        assert (response.headers["x-localserve-api"], response.headers["x-request-id"]) == ("b", "r1")
        # A bad body is the chosen API's 400, still naming it.
        bad = client.post("/split", content=b"{", headers={"Content-Type": "application/json"})
        assert (bad.status_code, bad.headers["x-localserve-api"]) == (400, "b")
        assert client.get("/split").json() == {
            "name": "split",
            "kind": "TrafficSplitter",
            "apis": [{"name": "a", "weight": 0, "shadow": False}, {"name": "b", "weight": 100, "shadow": False}],
        }
        refused = client.put("/split/predict")
        assert (refused.status_code, refused.headers["allow"]) == (405, "POST, OPTIONS")
        assert client.get("/split/stats").json()["targets"]["b"]["requests"]["4xx"] == 1


def test_a_seeded_rng_routes_the_same_way_twice(serve, make_project) -> None:
    project = splitter_project(make_project, {"a": 50, "b": 50})
    runs = []
    for _ in range(2):
        with serve(project) as client:
            client.app.splitters.rng = random.Random(7)  # the test hook: routing is reproducible
            runs.append([client.post("/split", json=0).headers["x-localserve-api"] for _ in range(40)])
    assert runs[0] == runs[1] and {"a", "b"} == set(runs[0])


def test_a_shadow_that_raises_never_reaches_the_client(serve, make_project, caplog) -> None:
    project = splitter_project(make_project, {"a": 100}, shadow="weight: 100")
    caplog.set_level(logging.ERROR, logger="localserve")
    with serve(project) as client:
        import shadow

        response = client.post("/split", json={"x": 2}, headers={"X-Request-ID": "r-7"})
        # The client has its whole answer while the shadow's copy is still held inside the shadow API.
        assert (response.status_code, response.json()) == (200, {"api": "a", "payload": {"x": 2}})
        assert shadow.entered.wait(60)
        assert shadow.payloads == [({"x": 2}, "r-7")]
        shadow.release.set()
        client.portal.call(client.app.splitters.drain)  # the copy is done (it raised)
        entry = client.get("/split/stats").json()
        assert entry["shadow"] == {"api": "rec", "weight": 100, "answered": 0, "failed": 1, "dropped": 0}
        assert entry["requests"] == {"2xx": 1, "4xx": 0, "5xx": 0}
        rec = next(e for e in client.get("/stats").json() if e["api"] == "rec")
        assert rec["requests"] == {"2xx": 0, "4xx": 0, "5xx": 1}
    failed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("request r-7 to api 'rec'")]
    assert len(failed) == 1  # logged as any failed request of the shadow API, with its traceback
    assert failed[0].startswith(
        "request r-7 to api 'rec' failed: PythonPredictor.predict raised RuntimeError: the shadow model is broken\n"
        "Traceback"
    )


def test_a_shadow_that_cannot_admit_the_copy_drops_it_not_the_client(serve, make_project) -> None:
    project = splitter_project(make_project, {"a": 100}, shadow="weight: 100", extra="  max_queue: 1\n")
    with serve(project) as client:
        import shadow

        assert client.post("/split", json=1).status_code == 200
        assert shadow.entered.wait(60)  # the first copy holds the shadow's one thread
        assert client.post("/split", json=2).status_code == 200
        wait_until(lambda: client.app.apis["rec"].pipeline.queue.depth == 1, "the second copy queued")
        third = client.post("/split", json=3)
        assert (third.status_code, third.json()) == (200, {"api": "a", "payload": 3})
        wait_until(lambda: client.get("/split/stats").json()["shadow"]["dropped"] == 1, "the third copy dropped")
        shadow.release.set()
        client.portal.call(client.app.splitters.drain)
        assert client.get("/split/stats").json()["shadow"] == {
            "api": "rec",
            "weight": 100,
            "answered": 0,
            "failed": 2,
            "dropped": 1,
        }
        assert [p for p, _ in shadow.payloads] == [1, 2]


def test_a_shadow_of_weight_0_gets_no_copy_as_on_cortex(serve, make_project) -> None:
    project = splitter_project(make_project, {"a": 100}, shadow="weight: 0")
    with serve(project) as client:
        for i in range(20):
            assert client.post("/split", json=i).status_code == 200
        client.portal.call(client.app.splitters.drain)
        import shadow

        assert shadow.payloads == []
        assert client.get("/split/stats").json()["shadow"]["failed"] == 0


def test_get_shows_the_targets_and_the_shadow(serve, make_project) -> None:
    from localserve.cli.get_tables import render_get

    project = splitter_project(make_project, {"a": 0, "b": 100}, shadow="weight: 0")
    with serve(project) as client:
        for i in range(3):
            client.post("/split", json=i)
        client.post("/split", content=b"{", headers={"Content-Type": "application/json"})
        text = render_get(client.get("/stats").json(), "split")
    assert text == (
        "api    status  2xx  4xx  5xx  mean  p50  p99\n"
        "split  ready     3    1    0     -    -    -\n"
        "\n"
        "split: TrafficSplitter\n"
        "target  weight  2xx  4xx  5xx   share\n"
        "a            0    0    0    0    0.0%\n"
        "b          100    3    1    0  100.0%\n"
        "shadow rec (0% copied): answered 0, failed 0, dropped 0"
    )


def test_api_host_of_a_splitter_reaches_the_splitter(serve, make_project) -> None:
    import socket

    from localserve.project.compat.hosts import serve_api_hosts

    project = splitter_project(make_project, {"a": 100})
    with serve(project) as client:
        previous = socket.getaddrinfo
        try:
            names = serve_api_hosts(client.app.config, 45678, None, lambda: None)
            assert socket.getaddrinfo("api-split", 8888, type=socket.SOCK_STREAM)[0][4] == ("127.0.0.1", 45678)
        finally:
            socket.getaddrinfo = previous  # type: ignore[assignment]
        assert names == {"a", "split"}
        client.app.host_names = names
        response = client.post("/predict", json=1, headers={"Host": "api-split:8888"})
        assert (response.json(), response.headers["x-localserve-api"]) == ({"api": "a", "payload": 1}, "a")
