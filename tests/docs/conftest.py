"""The site, built once per test process for the tests of this folder that read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.site import build


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("site"))
