"""Import-on-first-use for a package's public names (PEP 562).

A package lists ``name -> module`` in ``_EXPORTS`` and sets
``__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())``; the first access imports the
module and caches the value in the package's namespace, so later accesses cost nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """Return a module ``__getattr__`` that imports ``exports[name]`` on first use."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
