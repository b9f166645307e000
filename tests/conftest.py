"""Shared by every test folder: this file's folder is put on ``sys.path`` by pytest (rootdir
conftest, prepend import mode), so tests import the helpers here (``corpora``) by name."""

from __future__ import annotations

import pytest

from raycluster import ray_cluster  # noqa: F401  (the session's Ray cluster, a fixture)

RAY_TEST_TIMEOUT_S = 300
"""A ``ray`` test may be the one that starts the session's cluster (~20 s idle, far more on
a loaded machine): its timeout covers that, not only its own work."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("ray") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(RAY_TEST_TIMEOUT_S))
