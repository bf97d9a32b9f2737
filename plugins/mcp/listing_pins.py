"""What the proxy pins of the upstream's tool listing, and which tools it withdraws.

The model reads a tool's description and schema as the upstream lists them, and a call
carries what that schema asks for, so the proxy holds the upstream to what was reviewed:

* **The schema is the tools file's.** A tool declared with ``[tool.schema]`` (as
  ``--describe`` prints it) must be listed with exactly that ``inputSchema``; a tool
  declared without one is held to the ``inputSchema`` of the first listing the proxy read
  (when it started, or when the tool first appeared).
* **The rest is the first listing's.** The ``description`` and ``title`` the proxy first
  read are pinned for the life of the proxy.
* **A name listed twice** (a ``destructiveHint`` entry and a plain twin) could run either
  definition: it is withdrawn.

A withdrawn tool stays hidden from ``tools/list`` and refused when called until the proxy
restarts with a tools file that describes it again (``--describe``, reviewed): an upstream
that changed a tool once may change it back and forth. Each withdrawal is logged once,
one line naming the tool and what changed.

A call may carry only the arguments the declaration names: the schema's ``properties``
(the tools file's, else the pinned listing's) and the declared path, working-directory
and content fields. Anything else would reach the upstream unjudged.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jevqueue.policy import ToolSpec

__all__ = ["ListedTool", "ListingPins"]


def _plain(value: Any) -> Any:
    """``value`` without nulls, as a tools file holds it (TOML has no null)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items() if item is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value if item is not None]
    return value


@dataclass(frozen=True)
class ListedTool:
    """What the proxy pins of one ``tools/list`` entry."""

    title: str | None
    description: str | None
    schema: Mapping[str, Any]

    @classmethod
    def of(cls, tool: Mapping[str, Any]) -> ListedTool:
        schema = tool.get("inputSchema")
        title, description = tool.get("title"), tool.get("description")
        return cls(
            title=title if isinstance(title, str) else None,
            description=description if isinstance(description, str) else None,
            schema=_plain(schema) if isinstance(schema, Mapping) else {},
        )

    def changes(self, pinned: ListedTool) -> list[str]:
        """What differs from ``pinned``, in words (empty when nothing does)."""
        found = [
            f"its {what} changed"
            for what, old, new in (
                ("title", pinned.title, self.title),
                ("description", pinned.description, self.description),
            )
            if old != new
        ]
        found.extend(schema_changes(pinned.schema, self.schema))
        return found


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _names(names: list[str]) -> str:
    """Names for a one-line message: quoted, clipped, at most ten."""
    shown = ", ".join(repr(str(name)[:80]) for name in names[:10])
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")


def schema_changes(pinned: Mapping[str, Any], live: Mapping[str, Any]) -> list[str]:
    """How the ``inputSchema`` ``live`` differs from ``pinned``, in words."""
    if pinned == live:
        return []
    old, new = _properties(pinned), _properties(live)
    found = []
    added = sorted(set(new) - set(old))
    removed = sorted(set(old) - set(new))
    changed = sorted(name for name in set(old) & set(new) if old[name] != new[name])
    if added:
        found.append(f"inputSchema properties added: {_names(added)}")
    if removed:
        found.append(f"inputSchema properties removed: {_names(removed)}")
    if changed:
        found.append(f"inputSchema properties changed: {_names(changed)}")
    others = sorted(
        key for key in {*pinned, *live} - {"properties"} if pinned.get(key) != live.get(key)
    )
    if others:
        found.append(f"inputSchema {_names(others)} changed")
    return found or ["its inputSchema changed"]


def declared_arguments(spec: ToolSpec, schema: Mapping[str, Any] | None) -> frozenset[str]:
    """The argument names a call of ``spec`` may carry, given its (pinned) schema."""
    names = set(_properties(spec.schema if spec.schema is not None else (schema or {})))
    names.update(spec.path_fields)
    if spec.cwd_field is not None:
        names.add(spec.cwd_field)
    names.update(pointer.split("/", 1)[0] for pointer in spec.content_fields)
    return frozenset(names)


class ListingPins:
    """Pins the upstream's listing of the declared tools; withdraws what breaks a pin.

    Args:
        specs: the tools file's declarations (their ``schema``, when given, is the pin).

    Attributes:
        withdrawn: tool name -> why it is hidden and refused, for the proxy's life.
    """

    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        self._declared = {
            spec.name: _plain(spec.schema) for spec in specs if spec.schema is not None
        }
        self._pinned: dict[str, ListedTool] = {}
        self.withdrawn: dict[str, str] = {}

    def read(
        self, tools: Iterable[Mapping[str, Any]], declared: Callable[[str], bool]
    ) -> list[tuple[str, str]]:
        """Read one listing (or one page of it); return ``(name, why)`` for each tool it
        withdraws now. ``declared`` says which names the tools file declares."""
        entries = [tool for tool in tools if type(tool.get("name")) is str]
        counts = Counter(str(tool["name"]) for tool in entries)
        newly: list[tuple[str, str]] = []

        def withdraw(name: str, why: str) -> None:
            if name not in self.withdrawn:
                self.withdrawn[name] = why
                newly.append((name, why))

        for name, count in counts.items():
            if count > 1:
                withdraw(
                    name,
                    f"the upstream lists {count} tools named {name!r}, and a call could run "
                    "any of them",
                )
        for tool in entries:
            name = str(tool["name"])
            if name in self.withdrawn or not declared(name):
                continue
            live = ListedTool.of(tool)
            pinned = self._pinned.setdefault(name, live)
            reasons = []
            schema = self._declared.get(name)
            if schema is not None and schema != live.schema:
                reasons.append(
                    "it is listed with an inputSchema other than the tools file's "
                    f"[tool.schema] ({'; '.join(schema_changes(schema, live.schema))})"
                )
                pinned = dataclasses.replace(pinned, schema=live.schema)
            changes = live.changes(pinned)
            if changes:
                reasons.append(f"it changed since the proxy first listed it ({'; '.join(changes)})")
            if reasons:
                withdraw(name, " and ".join(reasons))
        return newly

    def arguments(self, spec: ToolSpec) -> frozenset[str]:
        """The argument names a call of ``spec`` may carry."""
        pinned = self._pinned.get(spec.name)
        return declared_arguments(spec, pinned.schema if pinned is not None else None)
