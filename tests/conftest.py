"""Suite-wide setup: no test reaches the network, and none writes outside its temp dirs.

Every test runs under the network guard of ``jevqueue.testing.pytest_plugin``: a connection
to another machine, or a name lookup of one, fails the test. A test that talks to a server
it started on 127.0.0.1 is marked ``@pytest.mark.network_allowed``. Durable state that
defaults to the user's home (the consumed-approval store) goes to a temp dir instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from jevqueue.testing.network import NetworkGuard

pytest_plugins = ["jevqueue.testing.pytest_plugin", "pytester"]


@pytest.fixture(autouse=True)
def _network_guard(no_network: NetworkGuard) -> Iterator[NetworkGuard]:
    yield no_network


@pytest.fixture(autouse=True, scope="session")
def _state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    patch = pytest.MonkeyPatch()
    patch.setenv("JEVQUEUE_STATE_DIR", str(tmp_path_factory.mktemp("jevqueue-state")))
    yield
    patch.undo()
