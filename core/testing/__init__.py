"""Test doubles for jevqueue and for code that uses it.

* :class:`ScriptedHost` / :class:`AsyncScriptedHost` — a host that records what it was
  asked to do, over plain data, with a scripted provider;
* :class:`ScriptedModel` with :class:`Step`, :func:`text_response` and
  :func:`tool_call_response` — a provider that answers from a script and fails loudly on
  an unexpected call or an unused step (``assert_complete()``);
* :class:`NetworkGuard` and the pytest plugin ``jevqueue.testing.pytest_plugin`` — network
  access from tests becomes an error;
* the recording audit sink and the plugin conformance suite
  (:mod:`jevqueue.testing.conformance`).

One vocabulary for every scripted model, here and in each plugin's ``testing`` module
(``jevqueue.plugins.langgraph.testing.ScriptedChatModel``,
``jevqueue.plugins.crewai.testing.ScriptedLLM``, ...):

* ``requests`` — what it was asked: one record per provider call, oldest first, recorded
  even when the script rejects the call;
* ``responses`` — what it answered, oldest first;
* ``remaining`` — the scripted steps not used yet;
* ``assert_complete()`` — fails when a step was never used (an unexpected call fails at
  once, when it is made).

The HTTP doubles of the OpenAI host (``ScriptedChatTransport``, ``ScriptedChatServer``)
record ``requests`` and ``responses`` the same way. A host double records the host calls
it received as ``calls`` (:class:`HostCall`).

Names are imported on first use: importing this package loads neither pytest nor any
framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jevqueue._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.testing.network import NetworkGuard
    from jevqueue.testing.recording_audit import RecordingAuditSink
    from jevqueue.testing.scripted_host import (
        AsyncScriptedHost,
        HostCall,
        ScriptedHost,
        called_tool_names,
    )
    from jevqueue.testing.scripted_model import (
        ANY,
        ModelCall,
        ScriptedModel,
        ScriptedModelError,
        Step,
        text_response,
        tool_call_response,
    )

_EXPORTS: dict[str, str] = {
    "ScriptedHost": "jevqueue.testing.scripted_host",
    "AsyncScriptedHost": "jevqueue.testing.scripted_host",
    "HostCall": "jevqueue.testing.scripted_host",
    "called_tool_names": "jevqueue.testing.scripted_host",
    "ScriptedModel": "jevqueue.testing.scripted_model",
    "ScriptedModelError": "jevqueue.testing.scripted_model",
    "Step": "jevqueue.testing.scripted_model",
    "ModelCall": "jevqueue.testing.scripted_model",
    "ANY": "jevqueue.testing.scripted_model",
    "text_response": "jevqueue.testing.scripted_model",
    "tool_call_response": "jevqueue.testing.scripted_model",
    "NetworkGuard": "jevqueue.testing.network",
    "RecordingAuditSink": "jevqueue.testing.recording_audit",
}

__all__ = [
    "ANY",
    "AsyncScriptedHost",
    "HostCall",
    "ModelCall",
    "NetworkGuard",
    "RecordingAuditSink",
    "ScriptedHost",
    "ScriptedModel",
    "ScriptedModelError",
    "Step",
    "called_tool_names",
    "text_response",
    "tool_call_response",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
