"""The client's ``notifications/cancelled`` on ``mcp`` 1.x, applied by the relay.

The 1.x SDK cancels a request through the cancel scope of its ``RequestResponder``, and
finds the request by id from the moment it is read until its answer has been written. A
cancel that lands after the handler returned, while the answer waits to be written (a
``ping`` and its cancel read together; an answer behind a slow client), raises the
cancellation in ``respond()``, outside the handler. ``RequestResponder.__exit__`` drops
the scope's word that the cancellation was its own (it calls
``self._cancel_scope.__exit__(...)`` and returns ``None``), so the ``CancelledError``
leaves ``with responder:``, the server's task group takes it for a failed task and
cancels itself, ``Server.run`` returns, and the connection answers nothing more.

So no cancel reaches the SDK. :class:`Cancellations` sits on the session's streams: it
notes each request as it is read and each answer as it is written, and runs each handler
in a cancel scope of its own. A cancel for a request whose handler has not returned stops
the handler (or keeps it from starting), and the request goes unanswered, as the
specification asks and mcp 2.x does. A cancel for anything else is dropped: a request
already answered or whose handler has returned (its answer goes out), an id never sent,
a ``requestId`` that is no id. Ids are matched as mcp 2.x matches them (``"7"`` is 7).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from jevqueue.plugins.mcp._framework import types
from mcp.shared.exceptions import McpError

__all__ = ["Cancellations"]

_CANCELLED = types.ErrorData(code=0, message="Request cancelled")
"""What a cancelled handler ends with; never written (the request goes unanswered)."""


def _key(request_id: object) -> str | int | None:
    """A request id as mcp 2.x correlates a cancel with it (``as_request_id``,
    ``coerce_request_id``): a string or an integer, never a bool (``true`` would be 1),
    and a string of an integer the same as that integer."""
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            return request_id
    return request_id


def _root(item: Any) -> Any:
    """The JSON-RPC message in a stream item (``None`` for a parse error)."""
    return getattr(getattr(item, "message", None), "root", None)


class Cancellations:
    """The requests of one client that a cancel can still reach, by request id."""

    def __init__(self) -> None:
        self._open: dict[str | int, anyio.CancelScope] = {}
        self._unanswered: set[str | int] = set()

    def receiving(self, stream: Any) -> ObjectReceiveStream[Any]:
        """``stream`` without cancels: each is applied here instead."""
        return _Received(stream, self)

    def sending(self, stream: Any) -> ObjectSendStream[Any]:
        """``stream`` without the answers of cancelled requests."""
        return _Sent(stream, self)

    def handling(
        self, handler: Callable[[Any], Awaitable[Any]], request_id: Callable[[], str | int]
    ) -> Callable[[Any], Awaitable[Any]]:
        """``handler``, stopped by a cancel of the request it handles (``request_id()``)."""

        async def handle(request: Any) -> Any:
            with self._running(request_id()) as scope:
                if not scope.cancel_called:  # cancelled before it started: it never starts
                    return await handler(request)
            raise McpError(_CANCELLED)

        return handle

    @contextmanager
    def _running(self, request_id: str | int) -> Iterator[anyio.CancelScope]:
        """The scope a cancel stops the handler in, absorbing that cancellation."""
        key = _key(request_id)
        scope = self._open.get(key) if key is not None else None
        if scope is None:  # not read through receiving(): no cancel reaches it
            scope = anyio.CancelScope()
        try:
            with scope:
                yield scope
        finally:
            if key is not None and self._open.get(key) is scope:  # a later cancel is too late
                del self._open[key]

    def _read(self, item: Any) -> bool:
        """Note a request; apply a cancel. False: the SDK does not see ``item``."""
        root = _root(item)
        if isinstance(root, types.JSONRPCRequest):
            key = _key(root.id)
            if key is not None:
                self._open[key] = anyio.CancelScope()
        elif isinstance(root, types.JSONRPCNotification) and (
            root.method == "notifications/cancelled"
        ):
            params = root.params if isinstance(root.params, dict) else {}
            key = _key(params.get("requestId"))
            if key is not None and key in self._open and not self._open[key].cancel_called:
                self._open[key].cancel()
                self._unanswered.add(key)
            return False
        return True

    def _written(self, item: Any) -> bool:
        """Forget an answered request. False: it was cancelled, and its answer is dropped."""
        root = _root(item)
        if not isinstance(root, types.JSONRPCResponse | types.JSONRPCError):
            return True
        key = _key(root.id)
        if key is not None:
            self._open.pop(key, None)  # answered without a handler: refused, or initialize
        if key in self._unanswered:
            self._unanswered.discard(key)
            return False
        return True


class _Received(ObjectReceiveStream[Any]):
    def __init__(self, stream: Any, cancellations: Cancellations) -> None:
        self._stream = stream
        self._cancellations = cancellations

    async def receive(self) -> Any:
        while True:
            item = await self._stream.receive()
            if self._cancellations._read(item):
                return item

    async def aclose(self) -> None:
        await self._stream.aclose()


class _Sent(ObjectSendStream[Any]):
    def __init__(self, stream: Any, cancellations: Cancellations) -> None:
        self._stream = stream
        self._cancellations = cancellations

    async def send(self, item: Any) -> None:
        if self._cancellations._written(item):
            await self._stream.send(item)

    async def aclose(self) -> None:
        await self._stream.aclose()
