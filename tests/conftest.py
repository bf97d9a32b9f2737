"""Suite-wide setup: no test reaches the network.

Every test runs under the network guard of ``jevqueue.testing.pytest_plugin``: a connection
to another machine, or a name lookup of one, fails the test. A test that talks to a server
it started on 127.0.0.1 is marked ``@pytest.mark.network_allowed``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from jevqueue.testing.network import NetworkGuard

pytest_plugins = ["jevqueue.testing.pytest_plugin", "pytester"]


@pytest.fixture(autouse=True)
def _network_guard(no_network: NetworkGuard) -> Iterator[NetworkGuard]:
    yield no_network
