"""The handler as the ABEJA Platform calls it, in this test process: python -m pytest handlers_examples/json_tax"""

from pathlib import Path

import localserve.testing

PROJECT = Path(__file__).parent


def test_adds_the_tax():
    with localserve.testing.client(PROJECT, handler="main:handler") as client:
        response = client.post("/", json={"total_without_tax": 100})
    assert response.status_code == 200
    assert response.json() == {"total": 108.0}


def test_a_missing_total_is_a_400(localserve_client):  # the fixture closes the client after the test
    client = localserve_client(PROJECT, handler="main:handler")
    response = client.post("/", json={"total": 100})
    assert response.status_code == 400
    assert response.json() == {"message": "total_without_tax is need"}
