"""The relay on ``mcp`` 2.x: ``Server(name, on_list_tools=..., on_call_tool=..., ...)``.

Each ``on_*`` handler forwards the client's request to the upstream session and returns
the upstream's result unchanged, except ``tools/list`` (undeclared and withdrawn tools
are left out), ``tools/call`` and ``resources/read`` (judged first; a refused read is a
JSON-RPC error carrying the guard's message). Handlers are registered only for what the
upstream offers and the proxy relays (resources only when the tools file declares
``resources/read``, prompts and completions only when named in ``relay_unjudged``), so
the capabilities the proxy announces are those.

Approvals follow the era the client negotiated; both show the core ``ApprovalRequest``.
On a handshake protocol (2025-11-25 and older) the proxy asks with
``ctx.session.elicit_form(...)``, as on 1.x. On 2026-07-28 there is no server-to-client
request channel: the proxy pauses the call with an ``InputRequiredResult`` carrying the
elicitation (and ``ApprovalRequest.to_dict()`` in the result's ``_meta``), and the client answers
on its retry with ``input_responses`` and the echoed ``request_state`` — a random token
the proxy keeps server-side, single use, bound to the action digest. An embedding that
passes ``approver=`` is asked in place on either era.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from jevqueue.plugins.mcp._framework import Server, types
from jevqueue.plugins.mcp.approval_request import (
    REQUEST_META_KEY,
    answer_approves,
    approval_message,
    approval_schema,
)
from jevqueue.plugins.mcp.resource_read import read_uri
from mcp.shared.exceptions import MCPError

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.plugins.mcp.call_judge import CallJudge
    from jevqueue.plugins.mcp.proxy_server import PolicyProxyServer
    from jevqueue.plugins.mcp.upstream import UpstreamConnection
    from jevqueue.policy import ApprovalRequest, Judgement

__all__ = ["NotificationRelay", "all_tools", "serve"]

_logger = logging.getLogger("jevqueue.plugins.mcp")

_INPUT_KEY = "jevqueue_approval"
"""The key of the approval question in ``InputRequiredResult.input_requests``."""


def _modern(protocol_version: str) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return protocol_version in MODERN_PROTOCOL_VERSIONS


class NotificationRelay:
    """Passes the upstream's notifications on to the client once its session is known; a
    changed tool list is read again before the next call is judged."""

    def __init__(self, judge: CallJudge | None = None) -> None:
        self.session: Any = None
        self.judge = judge

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            return
        if self.judge is not None and isinstance(message, types.ToolListChangedNotification):
            self.judge.stale = True
        if self.session is None:
            return
        try:
            await self.session.send_notification(message)
        except Exception as error:  # a modern client without a listen stream, or gone
            _logger.debug("could not relay a notification: %s", error)


async def all_tools(session: Any) -> list[dict[str, Any]]:
    """Every tool the upstream lists, following pagination, as wire dicts."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.list_tools(params=params)
        tools.extend(
            tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in result.tools
        )
        cursor = result.next_cursor
        if not cursor:
            return tools


def _without_envelope(params: Any) -> Any:
    """The client's params without its ``_meta``.

    On 2026-07-28 ``_meta`` carries the client's per-request envelope (protocol version,
    capabilities): it describes the client's connection with the proxy, not the proxy's
    with the upstream, and an upstream on another era refuses it.
    """
    if params is None or getattr(params, "meta", None) is None:
        return params
    return params.model_copy(update={"meta": None})


def _call_digest(judgement: Judgement) -> str:
    """The digest of the call alone (tool, arguments, targets, context, origin): equal for
    the same call judged before and after the agent read more."""
    action = judgement.action
    if action is None:
        return ""
    return getattr(action, "call_digest", "") or action.digest


def _error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _elicits(ctx: Any) -> bool:
    capabilities = ctx.session.client_capabilities
    elicitation = getattr(capabilities, "elicitation", None)
    return elicitation is not None


async def serve(
    proxy: PolicyProxyServer,
    connection: UpstreamConnection,
    notify: NotificationRelay,
    read_stream: Any,
    write_stream: Any,
) -> None:
    """Serve one client until it disconnects."""
    upstream = connection.session
    info = connection.initialize_result
    offered = info.capabilities
    judge = proxy.judge
    session_tag = secrets.token_hex(4)  # call ids are the client's request ids, per session

    def forward(request_type: type, result_type: type) -> Callable[[Any, Any], Awaitable[Any]]:
        async def handler(ctx: Any, params: Any) -> Any:
            notify.session = ctx.session
            params = _without_envelope(params)
            request = request_type(params=params) if params is not None else request_type()
            return await upstream.send_request(request, result_type)

        return handler

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        notify.session = ctx.session
        request = types.ListToolsRequest(params=_without_envelope(params))
        result: types.ListToolsResult = await upstream.send_request(request, types.ListToolsResult)
        judge.stale = False
        judge.learn_tools(
            tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in result.tools
        )
        result.tools = [tool for tool in result.tools if judge.listed(tool.name)]
        return result

    def asker(ctx: Any) -> Callable[[ApprovalRequest], Awaitable[bool]] | None:
        """Handshake era: an elicitation request on the session, answered in place."""
        if not _elicits(ctx):
            return None

        async def ask_user(request: ApprovalRequest) -> bool:
            answer = await ctx.session.elicit_form(
                approval_message(request),
                approval_schema(request),
                related_request_id=ctx.request_id,
            )
            return answer_approves(answer.action, answer.content)

        return ask_user

    def pause(judgement: Judgement) -> types.InputRequiredResult:
        """2026-07-28: the question travels in the result; the retry carries the answer."""
        request = judgement.request
        assert request is not None
        question = types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=approval_message(request),
                requested_schema=approval_schema(request),
            )
        )
        # The result's own _meta: the SDK strips the _meta of a request inside it.
        return types.InputRequiredResult(
            input_requests={_INPUT_KEY: question},
            request_state=proxy.pending.open(_call_digest(judgement), held=judgement),
            _meta={REQUEST_META_KEY: request.to_dict()},
        )

    def resumed(params: Any, judgement: Judgement) -> Judgement:
        """2026-07-28 retry: check the echoed state against this call, then the answer.

        An approved retry resumes the judgement the question showed: the agent may have
        read more since (the other calls of its batch), which changes the labels of the
        action judged now, and the person approved the one they read.
        """
        held, problem = proxy.pending.claim(params.request_state, _call_digest(judgement))
        answer = (params.input_responses or {}).get(_INPUT_KEY)
        approves = isinstance(answer, types.ElicitResult) and answer_approves(
            answer.action, answer.content
        )
        shown = held if problem is None and getattr(held, "pending", False) else judgement
        return judge.answered(shown, approves, problem)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        notify.session = ctx.session
        if judge.stale:  # the upstream changed its tools: read them before judging
            judge.stale = False
            judge.learn_tools(await all_tools(upstream))
        meta = params.meta if isinstance(params.meta, dict) else None  # a TypedDict on 2.x
        call_id = f"{session_tag}/{ctx.request_id}"
        if _modern(ctx.protocol_version) and judge.pauses and _elicits(ctx):
            judgement = judge.judge(params.name, params.arguments, call_id, meta)
            if judgement.pending and params.request_state is not None:
                judgement = resumed(params, judgement)
            elif judgement.pending:
                return pause(judgement)
            elif params.request_state is not None:
                proxy.pending.close(params.request_state, "")  # spent either way
        else:
            judgement = await judge.check(
                params.name, params.arguments, call_id, meta, ask_user=asker(ctx)
            )
        if not judgement.allowed:
            return _error_result(judgement.message)

        async def forward_call(arguments: dict[str, Any]) -> types.CallToolResult:
            forwarded = types.CallToolRequest(
                params=types.CallToolRequestParams(name=judgement.tool, arguments=arguments)
            )
            result: types.CallToolResult = await upstream.send_request(
                forwarded, types.CallToolResult
            )
            return result

        return await judge.guard.arun(judgement, forward_call)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        notify.session = ctx.session
        meta = params.meta if isinstance(params.meta, dict) else None
        asked = str(params.uri)
        # On 2026-07-28 there is no request to ask the user with mid-read.
        ask_user = None if _modern(ctx.protocol_version) else asker(ctx)
        judgement = await judge.check_read(
            asked, f"{session_tag}/{ctx.request_id}", meta, ask_user=ask_user
        )
        if not judgement.allowed:
            raise MCPError(code=types.INVALID_PARAMS, message=judgement.message)

        async def forward_read(arguments: dict[str, Any]) -> types.ReadResourceResult:
            request = types.ReadResourceRequest(
                params=types.ReadResourceRequestParams(uri=read_uri(arguments, asked))
            )
            result: types.ReadResourceResult = await upstream.send_request(
                request, types.ReadResourceResult
            )
            return result

        return await judge.guard.arun(judgement, forward_read)

    handlers: dict[str, Any] = {}
    if offered.tools is not None:
        handlers["on_list_tools"] = list_tools
        handlers["on_call_tool"] = call_tool
    if offered.resources is not None and "resources" in proxy.relayed:
        handlers["on_list_resources"] = forward(
            types.ListResourcesRequest, types.ListResourcesResult
        )
        handlers["on_list_resource_templates"] = forward(
            types.ListResourceTemplatesRequest, types.ListResourceTemplatesResult
        )
        handlers["on_read_resource"] = read_resource
        if offered.resources.subscribe:
            handlers["on_subscribe_resource"] = forward(types.SubscribeRequest, types.EmptyResult)
            handlers["on_unsubscribe_resource"] = forward(
                types.UnsubscribeRequest, types.EmptyResult
            )
    if offered.prompts is not None and "prompts" in proxy.relay_unjudged:
        handlers["on_list_prompts"] = forward(types.ListPromptsRequest, types.ListPromptsResult)
        handlers["on_get_prompt"] = forward(types.GetPromptRequest, types.GetPromptResult)
    if offered.completions is not None and "completions" in proxy.relay_unjudged:
        handlers["on_completion"] = forward(types.CompleteRequest, types.CompleteResult)
    server: Any = Server(
        info.server_info.name,
        version=info.server_info.version,
        instructions=info.instructions,
        **handlers,
    )
    await server.run(read_stream, write_stream, server.create_initialization_options())
