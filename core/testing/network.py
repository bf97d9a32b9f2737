"""A network guard for tests: reaching for the network becomes a loud error.

While a :class:`NetworkGuard` is installed, every ``socket`` connection to an Internet
address and every name lookup of a non-local host raises
:class:`~jevqueue.errors.NetworkAccessError`. Loopback connections (``127.0.0.0/8``,
``::1``, ``localhost``) are refused too, unless the guard allows them: a test that starts
its own server on 127.0.0.1 asks for that explicitly. Unix sockets are always allowed;
they never leave the machine.

The guard also keeps a list of every blocked attempt, so that code which swallows the
error (a retry loop, a telemetry thread) is still caught: the pytest plugin
(:mod:`jevqueue.testing.pytest_plugin`) fails the test when the list is not empty.

It patches the Python ``socket`` module: ``socket.socket.connect``/``connect_ex``/
``sendto``, ``getaddrinfo``, ``gethostbyname``, ``gethostbyname_ex`` and
``gethostbyaddr``. That covers ``http.client``, ``urllib``, ``httpx``, ``requests`` and
``asyncio``; native code that opens its own sockets is outside its reach.

Example:
    >>> from jevqueue.testing.network import NetworkGuard
    >>> with NetworkGuard() as guard:  # doctest: +SKIP
    ...     socket.create_connection(("example.com", 443))  # raises NetworkAccessError
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from jevqueue.errors import NetworkAccessError

__all__ = ["LOCAL_NAMES", "NetworkGuard", "is_loopback_host"]

LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
"""Host names that resolve to this machine without asking a name server."""

_INET_FAMILIES = frozenset({socket.AF_INET, socket.AF_INET6})


def is_loopback_host(host: Any) -> bool:
    """True for a loopback or unspecified IP address, or a name of this machine.

    ``0.0.0.0`` and ``::`` count as loopback: connecting to them reaches this machine.
    """
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    text = host.strip("[]").split("%", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        lowered = text.lower().rstrip(".")
        return lowered in LOCAL_NAMES or lowered.endswith(".localhost")
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def _describe(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return repr(address)


class NetworkGuard:
    """Makes network access from the current process an error while installed.

    Args:
        allow_loopback: Let connections to this machine through (a server the test
            started on 127.0.0.1). Everything else stays blocked.

    Attributes:
        allow_loopback: Whether loopback connections are let through right now.
        blocked: A description of every blocked attempt, oldest first.

    Use it as a context manager, or call :meth:`install` and :meth:`uninstall`. Guards
    nest: an inner guard adds its rules on top of an outer one until it is uninstalled.
    """

    def __init__(self, *, allow_loopback: bool = False) -> None:
        self.allow_loopback = allow_loopback
        self.blocked: list[str] = []
        self._lock = threading.Lock()
        self._originals: dict[tuple[Any, str], Any] | None = None

    # --- install / uninstall -------------------------------------------------------

    @property
    def installed(self) -> bool:
        """Whether the guard is in force."""
        return self._originals is not None

    def install(self) -> NetworkGuard:
        """Put the guard in force; returns the guard.

        Raises:
            RuntimeError: The guard is already installed.
        """
        if self._originals is not None:
            raise RuntimeError("this NetworkGuard is already installed; uninstall it first")
        targets: list[tuple[Any, str, Callable[[Any], Any]]] = [
            (socket.socket, "connect", self._wrap_connect),
            (socket.socket, "connect_ex", self._wrap_connect),
            (socket.socket, "sendto", self._wrap_sendto),
            (socket, "getaddrinfo", self._wrap_lookup),
            (socket, "gethostbyname", self._wrap_lookup),
            (socket, "gethostbyname_ex", self._wrap_lookup),
            (socket, "gethostbyaddr", self._wrap_reverse_lookup),
        ]
        originals: dict[tuple[Any, str], Any] = {}
        for owner, name, wrap in targets:
            original = getattr(owner, name)
            originals[(owner, name)] = original
            setattr(owner, name, wrap(original))
        self._originals = originals
        return self

    def uninstall(self) -> None:
        """Restore the functions the guard replaced (a no-op when not installed)."""
        if self._originals is None:
            return
        for (owner, name), original in self._originals.items():
            setattr(owner, name, original)
        self._originals = None

    def __enter__(self) -> NetworkGuard:
        return self.install()

    def __exit__(self, *exc_info: object) -> None:
        self.uninstall()

    @contextmanager
    def loopback_allowed(self) -> Iterator[NetworkGuard]:
        """Within the block, let loopback connections through."""
        previous = self.allow_loopback
        self.allow_loopback = True
        try:
            yield self
        finally:
            self.allow_loopback = previous

    def take_blocked(self) -> list[str]:
        """Return the blocked attempts recorded so far and forget them."""
        with self._lock:
            taken, self.blocked = self.blocked, []
        return taken

    # --- the checks ----------------------------------------------------------------

    def _refuse(self, what: str, address: str, hint: str) -> NetworkAccessError:
        with self._lock:
            self.blocked.append(what)
        return NetworkAccessError(
            f"{what} is blocked: tests never reach the network. {hint}", address=address
        )

    def check_connect(self, family: int, address: Any) -> None:
        """Raise unless a socket of ``family`` may connect to ``address``.

        Raises:
            NetworkAccessError: The address is on another machine, or is this machine and
                loopback is not allowed.
        """
        if family not in _INET_FAMILIES or not isinstance(address, tuple) or not address:
            return  # Unix sockets and the like never leave the machine
        host = address[0]
        where = _describe(address)
        if is_loopback_host(host):
            if self.allow_loopback:
                return
            raise self._refuse(
                f"a loopback connection to {where}",
                where,
                "If the test talks to a server it started on 127.0.0.1, mark it "
                "@pytest.mark.network_allowed (or use the allow_loopback fixture).",
            )
        raise self._refuse(
            f"a connection to {where}",
            where,
            "Fake the provider instead (jevqueue.testing.ScriptedModel, httpx.MockTransport) "
            "or start a server on 127.0.0.1 and mark the test @pytest.mark.network_allowed.",
        )

    def check_lookup(self, host: Any) -> None:
        """Raise when looking up ``host`` would ask a name server.

        IP literals and local names need no name server and pass; so does ``None`` (the
        lookup a server does to bind).

        Raises:
            NetworkAccessError: ``host`` is a name of another machine.
        """
        if host is None:
            return
        text = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
        if not text or _is_ip_literal(text) or is_loopback_host(text):
            return
        raise self._refuse(
            f"a name lookup of {text!r}",
            text,
            "Tests must not depend on DNS: use 127.0.0.1 and a server the test starts, or "
            "fake the transport.",
        )

    # --- the wrappers ----------------------------------------------------------------

    def _wrap_connect(self, original: Callable[..., Any]) -> Callable[..., Any]:
        guard = self

        def connect(sock: socket.socket, address: Any, /) -> Any:
            guard.check_connect(sock.family, address)
            return original(sock, address)

        return connect

    def _wrap_sendto(self, original: Callable[..., Any]) -> Callable[..., Any]:
        guard = self

        def sendto(sock: socket.socket, data: Any, *args: Any) -> Any:
            if args:
                guard.check_connect(sock.family, args[-1])
            return original(sock, data, *args)

        return sendto

    def _wrap_lookup(self, original: Callable[..., Any]) -> Callable[..., Any]:
        guard = self

        def lookup(*args: Any, **kwargs: Any) -> Any:
            guard.check_lookup(args[0] if args else kwargs.get("host"))
            return original(*args, **kwargs)

        lookup.__name__ = getattr(original, "__name__", "lookup")
        lookup.__doc__ = getattr(original, "__doc__", None)
        return lookup

    def _wrap_reverse_lookup(self, original: Callable[..., Any]) -> Callable[..., Any]:
        guard = self

        def gethostbyaddr(ip_address: Any, /) -> Any:
            # A reverse lookup asks a name server even for an IP literal.
            if not is_loopback_host(ip_address):
                raise guard._refuse(
                    f"a reverse name lookup of {ip_address!r}",
                    str(ip_address),
                    "Tests must not depend on DNS.",
                )
            return original(ip_address)

        return gethostbyaddr
