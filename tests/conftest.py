"""Suite-wide setup: no test reaches the network, and none writes outside its temp dirs.

Every test runs under the network guard of ``jevqueue.testing.pytest_plugin``: a connection
to another machine, or a name lookup of one, fails the test. A test that talks to a server
it started on 127.0.0.1 is marked ``@pytest.mark.network_allowed``. Durable state that
defaults to the user's home (the consumed-approval store) goes to a temp dir instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from jevqueue.testing.network import NetworkGuard

pytest_plugins = ["jevqueue.testing.pytest_plugin", "pytester"]

# Property tests under CI draw the same examples on every run (a fixed seed, no example
# database): a run is red only for a real bug, never by the draw. An example a local run
# finds goes into the test as an @example, so CI replays it too. (The small venvs that
# run only one plugin's tests have no hypothesis, and no property test.)
try:
    from hypothesis import settings
except ImportError:  # pragma: no cover - .venv-hermes, .venv-mcp2
    pass
else:
    settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
    if os.environ.get("CI") == "true":
        settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _network_guard(no_network: NetworkGuard) -> Iterator[NetworkGuard]:
    yield no_network


@pytest.fixture(autouse=True, scope="session")
def _state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    patch = pytest.MonkeyPatch()
    patch.setenv("JEVQUEUE_STATE_DIR", str(tmp_path_factory.mktemp("jevqueue-state")))
    yield
    patch.undo()


# --- PostgreSQL ---------------------------------------------------------------------------
# One real server per test session, started on first use on a free loopback port with a
# throwaway data directory; each test gets a schema of its own in it. Where the server or
# the driver is missing, the tests that need it skip on a developer's machine and fail under
# CI (CI=true), where `make test` installs both.


def _postgres_unavailable(reason: str) -> None:
    import os

    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"PostgreSQL tests cannot run under CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server(jevqueue_network_guard: NetworkGuard) -> Iterator[object]:
    """The session's real PostgreSQL server (a :class:`TemporaryPostgres`)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _postgres_unavailable('psycopg is not installed: pip install "jevqueue[postgres]"')
    from jevqueue.testing.postgres_server import TemporaryPostgres, find_postgres_bindir

    if find_postgres_bindir() is None:
        _postgres_unavailable(
            "no PostgreSQL server binaries: apt-get install postgresql (make test does)"
        )
    # A folder of its own under the system temp dir: the server runs as another user, who
    # cannot enter pytest's private temp folders.
    server = TemporaryPostgres()
    try:
        with jevqueue_network_guard.loopback_allowed():  # it listens on 127.0.0.1 only
            server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def postgres_schema(postgres_server: object) -> Iterator[tuple[str, str]]:
    """``(url, schema)``: a freshly migrated jevqueue schema on the session's server."""
    import uuid

    import psycopg
    from jevqueue.db import migrate

    url: str = postgres_server.url  # type: ignore[attr-defined]
    schema = "t_" + uuid.uuid4().hex[:16]
    migrate(url, schema=schema)
    yield url, schema
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
