"""pytest plugin: the network guard as fixtures.

Enable it in the top-level ``conftest.py`` and make it apply to every test::

    pytest_plugins = ["jevqueue.testing.pytest_plugin"]

    @pytest.fixture(autouse=True)
    def _no_network(no_network):
        yield

Fixtures:

``no_network``
    For the test's duration, any connection to another machine and any name lookup of a
    non-local host raises :class:`~jevqueue.errors.NetworkAccessError`; loopback
    connections are refused as well unless the test is marked
    ``@pytest.mark.network_allowed``. Attempts that the code under test swallowed still
    fail the test at teardown. Yields the :class:`~jevqueue.testing.network.NetworkGuard`;
    a test that provokes a blocked attempt on purpose calls ``no_network.take_blocked()``.
``allow_loopback``
    Lets loopback connections through for one test (the same as the marker).
``jevqueue_network_guard``
    The session-wide guard underneath: installed once, so that background threads are
    guarded between tests as well.

Marker: ``network_allowed`` — the test talks to a server it started on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from jevqueue.testing.network import NetworkGuard

__all__ = ["allow_loopback", "jevqueue_network_guard", "no_network", "pytest_configure"]

MARKER = "network_allowed"


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``network_allowed`` marker."""
    config.addinivalue_line(
        "markers", f"{MARKER}: the test talks to a server it started on 127.0.0.1 (loopback only)"
    )


@pytest.fixture(scope="session")
def jevqueue_network_guard() -> Iterator[NetworkGuard]:
    """The guard, installed for the rest of the session once a test asks for it."""
    guard = NetworkGuard().install()
    try:
        yield guard
    finally:
        guard.uninstall()


@pytest.fixture
def no_network(
    request: pytest.FixtureRequest, jevqueue_network_guard: NetworkGuard
) -> Iterator[NetworkGuard]:
    """Network access is an error for this test; loopback only with ``network_allowed``."""
    guard = jevqueue_network_guard
    guard.take_blocked()  # what happened between tests belongs to no test
    previous = guard.allow_loopback
    guard.allow_loopback = request.node.get_closest_marker(MARKER) is not None
    try:
        yield guard
    finally:
        guard.allow_loopback = previous
    blocked = guard.take_blocked()
    if blocked:
        listed = "\n  ".join(blocked)
        pytest.fail(
            f"the test reached for the network {len(blocked)} time(s), and the code under test "
            f"swallowed the error:\n  {listed}\nTests never reach the network: fake the "
            "provider, or start a server on 127.0.0.1 and mark the test "
            f"@pytest.mark.{MARKER}.",
            pytrace=False,
        )


@pytest.fixture
def allow_loopback(no_network: NetworkGuard) -> Iterator[NetworkGuard]:
    """Let loopback connections through for this test (a server it started on 127.0.0.1)."""
    with no_network.loopback_allowed():
        yield no_network
