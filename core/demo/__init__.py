"""The session ``jevqueue demo`` plays: a repository assistant whose turns go through all
nine paths, with the real governor, the default ballot and thresholds, and the real
OpenAI-compatible host in front of a scripted model (or a real endpoint).

* :mod:`jevqueue.demo.toolset` — the tools and their fixed results;
* :mod:`jevqueue.demo.script` — the user's messages and the model's scripted answers;
* :mod:`jevqueue.demo.change_freeze` — a risk rule that consults an outside calendar;
* :mod:`jevqueue.demo.scripted_model` — the model played at the HTTP boundary;
* :mod:`jevqueue.demo.runner` — the agent loop that plays the session.
"""

from __future__ import annotations

from jevqueue.demo.runner import DemoSession, Endpoint, StepReport, ToolRun
from jevqueue.demo.script import SESSION, DemoTurn, Induced, ModelReply, OnError

__all__ = [
    "SESSION",
    "DemoSession",
    "DemoTurn",
    "Endpoint",
    "Induced",
    "ModelReply",
    "OnError",
    "StepReport",
    "ToolRun",
]
