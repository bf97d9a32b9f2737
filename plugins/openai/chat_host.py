"""Hosts for any OpenAI-compatible ``/v1/chat/completions`` endpoint, over httpx.

See the package docstring for what these hosts can and cannot force.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

try:
    import httpx
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'jevqueue.plugins.openai needs httpx: pip install "jevqueue[openai]"'
    ) from exc

from jevqueue.errors import ConfigurationError, ProviderHTTPError
from jevqueue.governor import tool_names
from jevqueue.plugins.openai._chat_request import (
    DirectiveRole,
    check_request_fields,
    checked_completion,
    excerpt,
    request_body,
)
from jevqueue.plugins.openai.completion import (
    called_tool_names,
    text_completion,
    tool_call_completion,
)

__all__ = ["DEFAULT_BASE_URL", "AsyncOpenAIChatHost", "InterruptFlag", "OpenAIChatHost"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_DEFAULT_TIMEOUT = 60.0


class InterruptFlag(Protocol):
    """Anything with ``is_set()``, such as a :class:`threading.Event` set on Ctrl-C."""

    def is_set(self) -> bool: ...


def _one_of(client: object, transport: object) -> None:
    if client is not None and transport is not None:
        raise ConfigurationError(
            "pass either client or transport, not both: a client already has its transport"
        )


class _ChatHostBase:
    """What the sync and async hosts share: everything but sending the request."""

    def __init__(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        base_url: str,
        api_key: str | None,
        request_fields: Mapping[str, Any] | None,
        directive_role: DirectiveRole,
        interrupt: InterruptFlag | None,
    ) -> None:
        self._model = model
        self._messages = messages
        self._tools = tools
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self._request_fields = check_request_fields(request_fields or {})
        self._directive_role: DirectiveRole = directive_role
        self._interrupt = interrupt
        tool_names(tools)  # fail at the edge on a tool in neither accepted shape
        self.request_count = 0
        """How many requests this host has sent to the provider."""
        self.last_request: dict[str, Any] | None = None
        """The JSON body of the latest request sent, for logs and tests."""

    def __repr__(self) -> str:  # never shows the API key
        return f"{type(self).__name__}(url={self._url!r}, model={self._model!r})"

    @property
    def url(self) -> str:
        """The chat-completions URL requests go to."""
        return self._url

    def tools(self) -> list[dict[str, Any]]:
        """The caller's tool list, as given (either accepted shape)."""
        return self._tools

    def messages(self) -> list[dict[str, Any]]:
        """The caller's message list itself, never a copy and never mutated."""
        return self._messages

    def request_body(self, *, force_tool: str | None, directive: str) -> dict[str, Any]:
        """The JSON body ``generate`` sends for this mode, without sending it.

        Args:
            force_tool: The one tool the provider must call, or ``None``.
            directive: The note appended (on a copy of the messages) for the model;
                ``""`` together with ``force_tool=None`` is the ungoverned request.

        Returns:
            The request body.
        """
        return request_body(
            model=self._model,
            messages=self._messages,
            tools=self._tools,
            request_fields=self._request_fields,
            force_tool=force_tool,
            directive=directive,
            directive_role=self._directive_role,
        )

    def called_tools(self, response: Any) -> list[str]:
        """The names ``choices[0].message`` calls (``tool_calls`` or legacy ``function_call``)."""
        return called_tool_names(response)

    def say(self, text: str) -> dict[str, Any]:
        """A chat completion answering ``text``, built locally: no provider call."""
        return text_completion(text)

    def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """A chat completion calling ``name`` with ``arguments``, built locally."""
        return tool_call_completion(name, arguments)

    def interrupted(self) -> bool:
        """True when the interrupt flag given to the host is set."""
        return self._interrupt is not None and self._interrupt.is_set()

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _sending(self, body: dict[str, Any]) -> None:
        self.request_count += 1
        self.last_request = body

    def _transport_error(self, exc: httpx.HTTPError) -> ProviderHTTPError:
        detail = excerpt(f"{type(exc).__name__}: {exc}", self._api_key)
        return ProviderHTTPError(
            f"POST {self._url} failed before any response: {detail}; check that the server "
            "is running and the base URL is right",
            status=None,
            body_excerpt="",
        )


class OpenAIChatHost(_ChatHostBase):
    """A governed conversation with an OpenAI-compatible chat-completions endpoint.

    The three ``generate`` modes become these request bodies:

    * forced: ``tool_choice={"type": "function", "function": {"name": X}}`` and
      ``parallel_tool_calls: false``, the directive appended as a trailing message;
    * prose: ``tool_choice: "none"`` (the tools stay in the request, so the model sees
      them but cannot call one), the directive appended;
    * passthrough: ``{"model", "messages", "tools", **request_fields}`` exactly as an
      ungoverned call sends it.

    The directive goes onto a new list; ``messages`` is the caller's list, read and never
    changed, so the caller can append replies and tool results to it between turns.

    Args:
        model: The model id to request.
        messages: The conversation, oldest first, in OpenAI message form.
        tools: The tools, in either OpenAI shape. Nested tools go out as given; a flat
            ``{"name": ...}`` tool is wrapped into ``{"type": "function", "function": ...}``,
            the one change any call to the endpoint needs.
        base_url: The endpoint's ``/v1`` base, e.g. ``http://127.0.0.1:8080/v1``.
        api_key: Sent as a bearer token; ``None`` sends no ``Authorization`` header.
            Never logged, never part of an error message.
        request_fields: Extra request fields (``temperature``, ``max_tokens``, ...), sent
            on every call. ``model``, ``messages`` and ``tools`` are refused here.
        client: An ``httpx.Client`` to send with (the caller closes it).
        transport: An httpx transport for a client the host creates, e.g.
            ``httpx.MockTransport`` in tests.
        timeout: Seconds per request for a client the host creates.
        directive_role: The role of the appended directive message; use ``"user"`` for
            servers whose chat template rejects a system message after the first.
        interrupt: A flag such as a ``threading.Event``; ``interrupted()`` reports it.

    Raises:
        InvalidToolSchemaError: A tool in neither accepted shape.
        ConfigurationError: ``request_fields`` names a field the host builds.
    """

    def __init__(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        request_fields: Mapping[str, Any] | None = None,
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float = _DEFAULT_TIMEOUT,
        directive_role: DirectiveRole = "system",
        interrupt: InterruptFlag | None = None,
    ) -> None:
        super().__init__(
            model=model,
            messages=messages,
            tools=tools,
            base_url=base_url,
            api_key=api_key,
            request_fields=request_fields,
            directive_role=directive_role,
            interrupt=interrupt,
        )
        _one_of(client, transport)
        self._owns_client = client is None
        self._client = client or httpx.Client(transport=transport, timeout=timeout)

    def generate(self, *, force_tool: str | None, directive: str) -> dict[str, Any]:
        """Send one chat-completions request in the mode ``force_tool``/``directive`` name.

        Returns:
            The provider's response body (a ``chat.completion`` dict).

        Raises:
            ProviderHTTPError: The request failed, or the reply is not a chat completion.
        """
        body = self.request_body(force_tool=force_tool, directive=directive)
        return self.send(body)

    def send(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` to the endpoint as it is, and return the checked response body.

        Raises:
            ProviderHTTPError: The request failed, or the reply is not a chat completion.
        """
        self._sending(dict(body))
        try:
            response = self._client.post(self._url, json=body, headers=self._headers())
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from None
        return checked_completion(
            response.status_code, response.text, self._url, secret=self._api_key
        )

    def close(self) -> None:
        """Close the HTTP client, if the host created it."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> OpenAIChatHost:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncOpenAIChatHost(_ChatHostBase):
    """:class:`OpenAIChatHost` over ``httpx.AsyncClient``: ``generate`` is a coroutine.

    Use it with ``await governor.astep(host)``. ``say``, ``say_tool_call`` and the other
    methods stay synchronous: they never touch the network. Arguments are those of
    :class:`OpenAIChatHost`, with ``client`` an ``httpx.AsyncClient`` and ``transport`` an
    ``httpx.AsyncBaseTransport``.
    """

    def __init__(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        request_fields: Mapping[str, Any] | None = None,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = _DEFAULT_TIMEOUT,
        directive_role: DirectiveRole = "system",
        interrupt: InterruptFlag | None = None,
    ) -> None:
        super().__init__(
            model=model,
            messages=messages,
            tools=tools,
            base_url=base_url,
            api_key=api_key,
            request_fields=request_fields,
            directive_role=directive_role,
            interrupt=interrupt,
        )
        _one_of(client, transport)
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(transport=transport, timeout=timeout)

    async def generate(self, *, force_tool: str | None, directive: str) -> dict[str, Any]:
        """Send one chat-completions request; see :meth:`OpenAIChatHost.generate`."""
        body = self.request_body(force_tool=force_tool, directive=directive)
        return await self.send(body)

    async def send(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``body`` as it is; see :meth:`OpenAIChatHost.send`."""
        self._sending(dict(body))
        try:
            response = await self._client.post(self._url, json=body, headers=self._headers())
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from None
        return checked_completion(
            response.status_code, response.text, self._url, secret=self._api_key
        )

    async def aclose(self) -> None:
        """Close the HTTP client, if the host created it."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> AsyncOpenAIChatHost:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
