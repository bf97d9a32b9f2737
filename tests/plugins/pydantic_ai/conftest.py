"""Pydantic AI plugin tests: a real Pydantic AI agent loop, a scripted model, a real policy."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "pydantic_ai",
    reason='the Pydantic AI extra is not installed: pip install "jevqueue[pydantic-ai]"',
)
