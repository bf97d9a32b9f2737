"""Adapters: turn a framework's native tool call into a judged, audited action.

``GenericAdapter`` knows ``write_to_file`` and ``run_command``; ``AntigravityAdapter``
adds Antigravity's ``multi_replace_file_content`` and ``view_file``. Both are fail-closed:
a tool outside their registry is refused before evaluation. Pass ``registry=`` to govern
your own tools.
"""

from __future__ import annotations

from jevqueue.adapters._antigravity import AntigravityAdapter
from jevqueue.adapters._generic import GenericAdapter

__all__ = ["AntigravityAdapter", "GenericAdapter"]
