"""``api-<name>`` host names: which hosts name an API, the resolver that answers them with this machine
(port 8888 becoming the server's), and requests routed by their ``Host``."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from localserve.project.compat import hosts
from localserve.project.compat.hosts import api_name_of, install_api_hosts, route_by_host


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("api-iris", "iris"),
        ("api-iris:8888", "iris"),
        (b"API-Iris.", "iris"),
        ("api-my-model-2", "my-model-2"),
        ("api--x", None),
        ("api-x-", None),
        ("iris", None),
        ("api-iris.example.com", None),
        ("[::1]:8888", None),
        (None, None),
    ],
)
def test_the_api_a_host_names(host: str | bytes | None, name: str | None) -> None:
    assert api_name_of(host) == name


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's resolver as it was, after the test."""
    monkeypatch.setattr(socket, "getaddrinfo", socket.getaddrinfo)
    monkeypatch.setattr(hosts, "_resolver", hosts._resolver)


@pytest.mark.usefixtures("resolver")
def test_a_known_api_resolves_to_this_machine_and_8888_to_its_server() -> None:
    install_api_hosts(lambda name: 4242 if name == "iris" else None)
    [(*_, (address, port))] = socket.getaddrinfo("api-iris", 8888, socket.AF_INET, socket.SOCK_STREAM)
    assert (address, port) == ("127.0.0.1", 4242)
    [(*_, (_, other))] = socket.getaddrinfo("api-iris", 9000, socket.AF_INET, socket.SOCK_STREAM)
    assert other == 9000  # another port is left as asked
    [(*_, (_, none))] = socket.getaddrinfo("api-iris", None, socket.AF_INET, socket.SOCK_STREAM)
    assert none == 4242
    with pytest.raises(socket.gaierror):  # a host that names no API resolves as usual (.invalid: nowhere)
        socket.getaddrinfo("api-unknown-to-all.invalid", 8888)
    [(*_, (loopback, _))] = socket.getaddrinfo("localhost", 80, socket.AF_INET, socket.SOCK_STREAM)
    assert loopback == "127.0.0.1"


def scope(host: bytes, path: str = "/") -> dict[str, Any]:
    return {"type": "http", "path": path, "raw_path": path.encode(), "headers": [(b"host", host)]}


def test_a_request_to_an_api_host_is_routed_to_its_predict_path() -> None:
    routed = route_by_host(scope(b"api-iris:8888"), frozenset({"iris"}))
    assert (routed["path"], routed["raw_path"]) == ("/iris/predict", b"/iris/predict")
    unknown = scope(b"api-other")
    assert route_by_host(unknown, frozenset({"iris"})) is unknown
    plain = scope(b"localhost:8080")
    assert route_by_host(plain, frozenset({"iris"})) is plain
