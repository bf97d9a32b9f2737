"""The relay on ``mcp`` 1.x: a low-level ``Server`` whose handlers forward to the upstream.

Handlers are registered per request type in ``Server.request_handlers`` (not through the
``@call_tool()`` decorator, which would validate and cache on the proxy's behalf): each
forwards the client's request to the upstream session as it came and returns the
upstream's result unchanged, except ``tools/list`` (undeclared and withdrawn tools are
left out), ``tools/call`` and ``resources/read`` (judged by the guard first, and forwarded
with the judged arguments once per request id; a refused read is a JSON-RPC error carrying
the guard's message). Approvals are asked with ``session.elicit(...)``, showing the core
``ApprovalRequest``. The client's cancels are applied by the relay, never by the SDK
(:mod:`~jevqueue.plugins.mcp._cancellation_v1`): a cancelled request goes unanswered,
and a late cancel is dropped.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jevqueue.plugins.mcp._cancellation_v1 import Cancellations
from jevqueue.plugins.mcp._framework import Server, types
from jevqueue.plugins.mcp.approval_request import (
    answer_approves,
    approval_message,
    approval_schema,
)
from jevqueue.plugins.mcp.resource_read import read_uri
from mcp.shared.exceptions import McpError

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.plugins.mcp.call_judge import CallJudge
    from jevqueue.plugins.mcp.proxy_server import PolicyProxyServer
    from jevqueue.plugins.mcp.upstream import UpstreamConnection
    from jevqueue.policy import ApprovalRequest

__all__ = ["NotificationRelay", "all_tools", "serve"]

_logger = logging.getLogger("jevqueue.plugins.mcp")

_FORWARDED: dict[str, tuple[tuple[type, type], ...]] = {
    "resources": (
        (types.ListResourcesRequest, types.ListResourcesResult),
        (types.ListResourceTemplatesRequest, types.ListResourceTemplatesResult),
        (types.SubscribeRequest, types.EmptyResult),
        (types.UnsubscribeRequest, types.EmptyResult),
    ),
    "prompts": (
        (types.ListPromptsRequest, types.ListPromptsResult),
        (types.GetPromptRequest, types.GetPromptResult),
    ),
    "completions": ((types.CompleteRequest, types.CompleteResult),),
    "logging": ((types.SetLevelRequest, types.EmptyResult),),
}


class NotificationRelay:
    """Passes the upstream's notifications (list changes, resource updates, log messages)
    on to the client, once the client's session is known; a changed tool list is read
    again before the next call is judged."""

    def __init__(self, judge: CallJudge | None = None) -> None:
        self.session: Any = None
        self.judge = judge

    async def __call__(self, message: Any) -> None:
        if not isinstance(message, types.ServerNotification):
            return
        if self.judge is not None and isinstance(message.root, types.ToolListChangedNotification):
            self.judge.stale = True
        if self.session is None:
            return
        root = message.root
        # As parsed, the notification keeps the envelope's "jsonrpc" as an extra field,
        # which send_notification would pass a second time: relay a new one.
        relayed = types.ServerNotification(type(root)(method=root.method, params=root.params))
        try:
            await self.session.send_notification(relayed)
        except Exception as error:  # the client went away; the proxy stops on its own
            _logger.debug("could not relay a notification: %s", error)


async def all_tools(session: Any) -> list[dict[str, Any]]:
    """Every tool the upstream lists, following pagination, as wire dicts."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        result = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
        tools.extend(
            tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in result.tools
        )
        cursor = result.nextCursor
        if not cursor:
            return tools


def _outgoing(request: Any) -> types.ClientRequest:
    """The client's request as a new one to the upstream (its own id, no JSON-RPC envelope)."""
    return types.ClientRequest(type(request)(method=request.method, params=request.params))


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)


def _capabilities(upstream: Any, relayed: frozenset[str]) -> types.ServerCapabilities:
    """The upstream's capabilities, limited to what the proxy relays."""
    return types.ServerCapabilities(
        tools=upstream.tools,
        resources=upstream.resources if "resources" in relayed else None,
        prompts=upstream.prompts if "prompts" in relayed else None,
        completions=upstream.completions if "completions" in relayed else None,
        logging=upstream.logging,
    )


async def serve(
    proxy: PolicyProxyServer,
    connection: UpstreamConnection,
    notify: NotificationRelay,
    read_stream: Any,
    write_stream: Any,
) -> None:
    """Serve one client until it disconnects."""
    from mcp.server.models import InitializationOptions

    upstream = connection.session
    info = connection.initialize_result
    server: Any = Server(info.serverInfo.name)
    judge = proxy.judge
    session_tag = secrets.token_hex(4)  # call ids are the client's request ids, per session

    def remember_client() -> Any:
        context = server.request_context
        notify.session = context.session
        return context

    def forward(request_type: type, result_type: type) -> Callable[[Any], Any]:
        async def handler(request: Any) -> types.ServerResult:
            remember_client()
            result = await upstream.send_request(_outgoing(request), result_type)
            return types.ServerResult(result)

        return handler

    async def list_tools(request: types.ListToolsRequest) -> types.ServerResult:
        remember_client()
        result = await upstream.send_request(_outgoing(request), types.ListToolsResult)
        judge.stale = False
        judge.learn_tools(
            tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in result.tools
        )
        result.tools = [tool for tool in result.tools if judge.listed(tool.name)]
        return types.ServerResult(result)

    def asker(context: Any) -> Callable[[ApprovalRequest], Any] | None:
        params = context.session.client_params
        capabilities = params.capabilities if params is not None else None
        if capabilities is None or capabilities.elicitation is None:
            return None

        async def ask_user(request: ApprovalRequest) -> bool:
            answer = await context.session.elicit(
                approval_message(request),
                approval_schema(request),
                related_request_id=context.request_id,
            )
            return answer_approves(answer.action, answer.content)

        return ask_user

    async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
        context = remember_client()
        if judge.stale:  # the upstream changed its tools: read them before judging
            judge.stale = False
            judge.learn_tools(await all_tools(upstream))
        params = request.params
        meta = params.meta.model_dump(by_alias=True) if params.meta is not None else None
        judgement = await judge.check(
            params.name,
            params.arguments,
            f"{session_tag}/{context.request_id}",
            meta,
            ask_user=asker(context),
        )
        if not judgement.allowed:
            return types.ServerResult(_error_result(judgement.message))

        async def forward_call(arguments: dict[str, Any]) -> types.CallToolResult:
            forwarded = types.CallToolRequest(
                method="tools/call",
                params=types.CallToolRequestParams(name=judgement.tool, arguments=arguments),
            )
            result: types.CallToolResult = await upstream.send_request(
                types.ClientRequest(forwarded), types.CallToolResult
            )
            return result

        return types.ServerResult(await judge.guard.arun(judgement, forward_call))

    async def read_resource(request: types.ReadResourceRequest) -> types.ServerResult:
        context = remember_client()
        params = request.params
        asked = str(params.uri)
        meta = params.meta.model_dump(by_alias=True) if params.meta is not None else None
        judgement = await judge.check_read(
            asked, f"{session_tag}/{context.request_id}", meta, ask_user=asker(context)
        )
        if not judgement.allowed:
            raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=judgement.message))

        async def forward_read(arguments: dict[str, Any]) -> types.ReadResourceResult:
            forwarded = types.ReadResourceRequest(
                method="resources/read",
                params=types.ReadResourceRequestParams(uri=read_uri(arguments, asked)),
            )
            result: types.ReadResourceResult = await upstream.send_request(
                types.ClientRequest(forwarded), types.ReadResourceResult
            )
            return result

        return types.ServerResult(await judge.guard.arun(judgement, forward_read))

    capabilities = _capabilities(info.capabilities, proxy.relayed)
    if capabilities.tools is not None:
        server.request_handlers[types.ListToolsRequest] = list_tools
        server.request_handlers[types.CallToolRequest] = call_tool
    for capability, pairs in _FORWARDED.items():
        if getattr(capabilities, capability) is not None:
            for request_type, result_type in pairs:
                server.request_handlers[request_type] = forward(request_type, result_type)
    if capabilities.resources is not None:
        server.request_handlers[types.ReadResourceRequest] = read_resource
    cancellations = Cancellations()
    for request_type, handler in list(server.request_handlers.items()):
        server.request_handlers[request_type] = cancellations.handling(
            handler, lambda: server.request_context.request_id
        )
    options = InitializationOptions(
        server_name=info.serverInfo.name,
        server_version=info.serverInfo.version,
        capabilities=capabilities,
        instructions=info.instructions,
    )
    await server.run(
        cancellations.receiving(read_stream), cancellations.sending(write_stream), options
    )
