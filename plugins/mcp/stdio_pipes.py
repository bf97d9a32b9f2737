"""The proxy's stdin and stdout as asyncio pipes, for the SDK's ``stdio_server``.

The SDK reads stdin and writes stdout through worker threads (``anyio.wrap_file``): three
thread round trips per ``tools/call`` on the client's side of the proxy, and a read that
no cancellation interrupts. When both are pipes or sockets (as when a client starts the
proxy), the event loop can read and write them itself; ``stdio_server`` accepts such
streams in both majors (an async iterator of lines, and ``write`` / ``flush``). Anything
else — a terminal, a file — keeps the SDK's own way.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["stdio_pipes"]

# A message is one line; the file contents a tool returns can make it large.
_LINE_LIMIT = 256 * 1024 * 1024


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _Lines:
    """``async for line in stdin``: decoded lines until end of input."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Output:
    """``await stdout.write(text)`` and ``await stdout.flush()`` on a pipe."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


@asynccontextmanager
async def stdio_pipes() -> AsyncIterator[tuple[Any, Any] | None]:
    """Yield ``(stdin, stdout)`` for ``stdio_server``, or ``None`` to use the SDK's own."""
    if not (_is_pipe(0) and _is_pipe(1)):
        yield None
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LINE_LIMIT, loop=loop)
    # Duplicates, so closing the transports never closes fds 0 and 1 themselves.
    source = os.fdopen(os.dup(0), "rb", buffering=0)
    sink = os.fdopen(os.dup(1), "wb", buffering=0)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), source
    )
    write_transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop=loop), sink
    )
    writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
    try:
        yield _Lines(reader), _Output(writer)
    finally:
        read_transport.close()
        write_transport.close()
