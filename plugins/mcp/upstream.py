"""The real MCP server behind the proxy: a command spoken to over stdio, or a URL.

:func:`connect_upstream` starts (or reaches) it, runs the ``initialize`` handshake, and
watches its stream: when the upstream exits or the connection drops, ``ended`` is set, so
the proxy can report it and stop instead of serving a dead server.

:attr:`Upstream.origin` names who serves the proxy's tools: the upstream's name and a
hash of its command line (and working directory) or URL. The proxy puts it on every tool
declaration (``ToolSpec.origin``), so it is part of every action digest: an approval of
one upstream's call never authorises the same call on another upstream.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
from jevqueue.errors import ConfigurationError
from jevqueue.plugins.mcp._framework import ClientSession, StdioServerParameters, stdio_client

__all__ = ["Upstream", "UpstreamConnection", "connect_upstream"]

_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class Upstream:
    """Where the governed server is: ``Upstream.stdio(cmd, *args)`` or ``Upstream.http(url)``.

    Attributes:
        command: the program and its arguments, for a server spoken to over stdio.
        url: the streamable HTTP endpoint, for a remote server.
        env: extra environment variables for the command (the SDK's safe defaults plus
            these; the proxy's own environment is not passed on wholesale).
        cwd: the command's working directory.
        name: what the operator calls this upstream (letters, digits, ``._-``; at most 64).
            Default: the program's file name, or the URL's host.
    """

    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if bool(self.command) == bool(self.url):
            raise ConfigurationError(
                "an upstream is either a command (Upstream.stdio('npx', ...)) or a URL "
                "(Upstream.http('https://...')), exactly one of them"
            )
        if self.command and not all(isinstance(part, str) and part for part in self.command):
            raise ConfigurationError("the upstream command must be non-empty strings")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"the upstream URL {self.url!r} must start with http:// or https://"
            )
        if self.name is not None and (
            not isinstance(self.name, str) or not _NAME.fullmatch(self.name)
        ):
            raise ConfigurationError(
                f"the upstream name {self.name!r} must be 1-64 letters, digits, '.', '_' or "
                "'-', such as 'filesystem'"
            )

    @classmethod
    def stdio(
        cls,
        command: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
    ) -> Upstream:
        """A server the proxy starts as a subprocess and speaks to over stdin/stdout."""
        return cls(command=(command, *args), env=dict(env or {}), cwd=cwd, name=name)

    @classmethod
    def http(cls, url: str, *, name: str | None = None) -> Upstream:
        """A server reached over streamable HTTP."""
        return cls(url=url, name=name)

    @classmethod
    def coerce(cls, value: Upstream | str | Sequence[str]) -> Upstream:
        """An :class:`Upstream` from itself, a URL string, or a command as a list."""
        if isinstance(value, Upstream):
            return value
        if isinstance(value, str):
            return cls.http(value)
        if isinstance(value, Sequence) and value:
            return cls.stdio(*value)
        raise ConfigurationError(
            "upstream must be an Upstream, a URL string, or a command list such as "
            "['npx', '-y', '@modelcontextprotocol/server-filesystem', '/workspace']"
        )

    def describe(self) -> str:
        """The upstream as an operator would name it in a message."""
        return self.url if self.url is not None else " ".join(self.command)

    @property
    def origin(self) -> str:
        """Who serves the tools: ``mcp:NAME:sha256:HEX``, the hash of the command line and
        working directory, or of the URL (not of the environment, which holds secrets and
        changes between runs of the same server)."""
        where: dict[str, Any] = (
            {"url": self.url} if self.url is not None else {"command": list(self.command)}
        )
        if self.cwd is not None:
            where["cwd"] = self.cwd
        text = json.dumps(where, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return f"mcp:{self.name or self._default_name()}:sha256:{digest}"

    def _default_name(self) -> str:
        if self.url is not None:
            shown = urlsplit(self.url).hostname or "http"
        else:
            shown = os.path.basename(self.command[0]) or "upstream"
        return _UNSAFE.sub("-", shown)[:64] or "upstream"


@dataclass
class UpstreamConnection:
    """An initialized session with the upstream, and an event set when it ends."""

    session: Any
    initialize_result: Any
    ended: anyio.Event


async def _pump(source: Any, sink: Any, ended: anyio.Event) -> None:
    try:
        async with sink:
            async for item in source:
                await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        pass
    finally:
        ended.set()


@asynccontextmanager
async def connect_upstream(
    upstream: Upstream,
    *,
    on_notification: Callable[[Any], Awaitable[None]] | None = None,
) -> AsyncIterator[UpstreamConnection]:
    """Start or reach ``upstream``, run ``initialize``, and yield the connection.

    Raises:
        ConfigurationError: the command does not exist.
        Exception: whatever the SDK raises when the handshake fails (the caller reports it).
    """
    async with AsyncExitStack() as stack:
        if upstream.url is not None:
            from jevqueue.plugins.mcp._framework import streamable_http_client

            streams = await stack.enter_async_context(streamable_http_client(upstream.url))
        else:
            program = upstream.command[0]
            if shutil.which(program) is None and not os.path.isfile(program):
                raise ConfigurationError(
                    f"the upstream command {program!r} was not found: install it or give its "
                    "full path after `--`"
                )
            parameters = StdioServerParameters(
                command=program,
                args=list(upstream.command[1:]),
                env=dict(upstream.env) or None,
                cwd=upstream.cwd,
            )
            streams = await stack.enter_async_context(stdio_client(parameters))
        read_stream, write_stream = streams[0], streams[1]
        ended = anyio.Event()
        send, receive = anyio.create_memory_object_stream[Any](16)
        tasks = await stack.enter_async_context(anyio.create_task_group())
        tasks.start_soon(_pump, read_stream, send, ended)

        async def handle(message: Any) -> None:
            if on_notification is not None and not isinstance(message, Exception):
                await on_notification(message)

        session = await stack.enter_async_context(
            ClientSession(receive, write_stream, message_handler=handle)
        )
        with anyio.fail_after(60):
            result = await session.initialize()
        try:
            yield UpstreamConnection(session, result, ended)
        finally:
            tasks.cancel_scope.cancel()
