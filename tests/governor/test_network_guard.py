"""The network guard: non-loopback access is an error; loopback only when the test asks."""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from jevqueue.errors import NetworkAccessError, UsageError
from jevqueue.testing.network import NetworkGuard, is_loopback_host

# TEST-NET-1 (RFC 5737): never routed, so even a broken guard could not leak a packet.
UNROUTABLE = ("192.0.2.1", 80)


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def loopback_server() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_the_suite_runs_under_the_guard(no_network: NetworkGuard) -> None:
    assert no_network.installed
    assert "connect" in vars(socket.socket)  # wrapped on the class, over the C method


def test_a_connection_to_another_machine_is_an_error(no_network: NetworkGuard) -> None:
    with pytest.raises(NetworkAccessError, match=r"192\.0\.2\.1:80 is blocked") as caught:
        socket.create_connection(UNROUTABLE, timeout=1)
    assert isinstance(caught.value, UsageError)
    assert caught.value.address == "192.0.2.1:80"
    with (
        socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock,
        pytest.raises(NetworkAccessError),
    ):
        sock.connect_ex(("2001:db8::1", 443, 0, 0))
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock,
        pytest.raises(NetworkAccessError),
    ):
        sock.sendto(b"x", ("192.0.2.1", 53))
    assert len(no_network.take_blocked()) == 3


def test_a_dns_lookup_of_a_remote_name_is_an_error(no_network: NetworkGuard) -> None:
    with pytest.raises(NetworkAccessError, match=r"name lookup of 'example\.com'"):
        socket.getaddrinfo("example.com", 443)
    with pytest.raises(NetworkAccessError):
        socket.gethostbyname("example.org")
    with pytest.raises(NetworkAccessError):
        socket.gethostbyaddr("192.0.2.1")
    with pytest.raises(NetworkAccessError):
        urllib.request.urlopen("http://example.com/", timeout=1)
    no_network.take_blocked()
    # IP literals and local names ask no name server
    assert socket.getaddrinfo("127.0.0.1", 80)
    assert socket.getaddrinfo("localhost", 80)
    assert socket.getaddrinfo(None, 80)


def test_loopback_is_refused_without_the_marker(
    no_network: NetworkGuard, loopback_server: str
) -> None:
    with pytest.raises(NetworkAccessError, match="network_allowed"):
        urllib.request.urlopen(loopback_server, timeout=5)
    no_network.take_blocked()


@pytest.mark.network_allowed
def test_loopback_is_allowed_with_the_marker(
    no_network: NetworkGuard, loopback_server: str
) -> None:
    with urllib.request.urlopen(loopback_server, timeout=5) as response:
        assert response.read() == b"hello"
    with pytest.raises(NetworkAccessError):  # only loopback
        socket.create_connection(UNROUTABLE, timeout=1)
    no_network.take_blocked()


def test_loopback_is_allowed_with_the_fixture(
    allow_loopback: NetworkGuard, loopback_server: str
) -> None:
    with urllib.request.urlopen(loopback_server, timeout=5) as response:
        assert response.read() == b"hello"


def test_unix_sockets_are_always_allowed() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"x")
        assert right.recv(1) == b"x"


def test_the_guard_restores_the_socket_module() -> None:
    before = (socket.socket.connect, socket.getaddrinfo)
    guard = NetworkGuard()
    with guard:
        assert socket.getaddrinfo is not before[1]
        with pytest.raises(RuntimeError, match="already installed"):
            guard.install()
    assert (socket.socket.connect, socket.getaddrinfo) == before
    assert not guard.installed


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", True),
        ("localhost", True),
        ("api.localhost", True),
        ("10.0.0.1", False),
        ("192.168.1.1", False),
        ("8.8.8.8", False),
        ("example.com", False),
        ("localhost.example.com", False),
        (None, False),
    ],
)
def test_is_loopback_host(host: object, expected: bool) -> None:
    assert is_loopback_host(host) is expected


def test_a_swallowed_attempt_still_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest
        pytest_plugins = ["jevqueue.testing.pytest_plugin"]

        @pytest.fixture(autouse=True)
        def _guard(no_network):
            yield
        """
    )
    pytester.makepyfile(
        """
        import socket

        def test_swallows():
            try:
                socket.create_connection(("192.0.2.1", 80), timeout=1)
            except Exception:
                pass

        def test_clean():
            assert True
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*reached for the network 1 time(s)*"])
