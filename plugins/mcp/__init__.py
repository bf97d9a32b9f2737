"""MCP: a governing proxy in front of any MCP server (``jevqueue mcp-proxy``).

The proxy is an MCP server to the client and an MCP client to the real (upstream)
server. It relays ``initialize`` and ``tools/list`` as the upstream answers them, and
puts one :class:`jevqueue.policy.Guard` in front of every
``tools/call``: a call runs upstream only when the guard allows it, with exactly the
arguments it judged (``Judgement.run_arguments()``: path fields as the resolved absolute
paths the policy checked), and at most once per request id of a client session; otherwise
the client gets a ``CallToolResult`` with ``isError`` true carrying the guard's message,
and the upstream never sees the call. Every decision lands in the audit log.

* **Unknown tools fail closed.** Each tool's policy facts come from a tools file
  (``--tools``; ``--describe`` prints a starting point). A tool without a declaration is
  left out of ``tools/list`` — the model is not offered a tool that can only fail — and
  refused if called anyway (a client may call a name it cached or made up). Upstream
  annotations are untrusted: a tool the upstream marks ``destructiveHint`` while the
  tools file declares no writing effect is refused; ``readOnlyHint`` loosens nothing.
* **Only declared arguments go upstream.** A call carrying an argument its declaration
  does not name is refused, naming it (:class:`CallJudge`).
* **The listing is pinned** (:class:`~jevqueue.policy.ListingPins`): a tool listed with a
  schema or description other than its ``[tool.schema]`` or ``description`` (both printed
  by ``--describe``, so they hold across restarts), or whose description, title or schema
  changes after the proxy first read it, and any name listed twice, are hidden and
  refused until the proxy restarts with a tools file that describes them again; each
  withdrawal is one line of the log.
* **Approvals bind to the upstream.** Every declaration carries :attr:`Upstream.origin`
  (its name and a hash of its command line or URL), part of every action digest.
* **Approvals.** An ``explicit_approval`` obligation becomes the core
  :class:`~jevqueue.policy.ApprovalRequest`. Signed records from ``jevqueue approve`` are
  accepted for unattended use (``--approvals-dir``, or
  ``_meta["jevqueue/approval_records"]`` on the call). An embedding may pass
  ``PolicyProxyServer(approver=...)`` (any :class:`~jevqueue.policy.Approver`; it declines
  by raising :class:`~jevqueue.errors.ApprovalDeclinedError`). Otherwise the request is a
  question to the client's user: an elicitation on ``mcp`` 1.x (and on 2.x sessions that
  negotiated a handshake protocol), an ``InputRequiredResult`` pause on protocol
  2026-07-28. It shows ``ApprovalRequest.describe()``; a "yes" is signed by the proxy's
  authority for exactly that digest and checked by the PEP (single use). A client without
  elicitation gets a denial that says what to configure.

Routes around the guard, and what happens to each:

* **An undeclared upstream tool** is judged: hidden from ``tools/list`` and, when called
  anyway, refused by the guard before evaluation (audited).
* **Tools the upstream lists after the session starts** (``notifications/tools/list_changed``)
  are judged: the listing is read again before the next call, a new undeclared tool is
  refused like any other, a declared tool newly marked destructive is refused, and a
  declared tool listed otherwise than pinned is withdrawn.
* **Judged when declared**: ``resources/read``. Resources are offered only when the tools
  file declares ``resources/read``; each read is then a call of that declaration, a
  ``file://`` URI judged as a path contained in the workspace, and audited
  (:mod:`~jevqueue.plugins.mcp.resource_read`).
* **Refused unless asked for**: ``prompts/get`` and ``completion/complete``, which no
  policy judges. The proxy does not offer them and refuses them if asked anyway, unless
  they are named in ``relay_unjudged=`` (the CLI's ``--relay-unjudged prompts``): then
  they are relayed as the upstream answers, and a server whose prompts have effects runs
  them unjudged. Declare such effects as tools instead. Nothing is refused when the proxy
  is built: an upstream is only known once it runs.

What an MCP proxy cannot do, plainly:

* It **cannot** govern the model's choice of tool: it never sees the model, only the
  calls the client sends. There is no forcing here, only judging (the governor half of
  jevqueue needs a plugin at the client's model call).
* It **cannot** make a client honour its answers: a client may cache ``tools/list`` and
  offer a hidden tool anyway (the call is still refused), or ignore ``isError`` and tell
  the model a denied call succeeded (nothing ran upstream, whatever the client says).
* It **cannot** see what a tool does beyond its arguments: the policy judges the declared
  effects and the paths in the arguments; a tool that writes elsewhere than its arguments
  say, or a shell command's effects, are outside its view — run the upstream in a sandbox.
* It **cannot** relay what it does not understand: server-to-client requests of the
  upstream itself (sampling, its own elicitations, roots) are not passed on, so the
  proxy declares no such capability upstream.
"""

from __future__ import annotations

from jevqueue.plugins.mcp import _framework  # noqa: F401  (raises the install line early)
from jevqueue.plugins.mcp.approval_request import ApprovalRequest, PendingApprovals
from jevqueue.plugins.mcp.call_judge import APPROVALS_META_KEY, CallJudge, Judgement
from jevqueue.plugins.mcp.proxy_server import (
    PolicyProxyServer,
    UpstreamStoppedError,
    describe_upstream,
)
from jevqueue.plugins.mcp.tool_spec import describe_tools, suggest_specs, tool_spec
from jevqueue.plugins.mcp.upstream import Upstream

__all__ = [
    "APPROVALS_META_KEY",
    "ApprovalRequest",
    "CallJudge",
    "Judgement",
    "PendingApprovals",
    "PolicyProxyServer",
    "Upstream",
    "UpstreamStoppedError",
    "describe_tools",
    "describe_upstream",
    "suggest_specs",
    "tool_spec",
]
