"""What a plugin pins of a tool listing it does not own, and which tools it withdraws.

A model reads a tool's description and schema as the server lists them, and a call carries
what that schema asks for. A plugin in front of someone else's tools (the MCP proxy, an
AgentChat ``McpWorkbench`` under a ``PolicyWorkbench``) reads each listing into
:class:`ListedTool` entries and holds the server to what was reviewed with :class:`ListingPins`:

* **The declaration is the pin.** A tool declared with a ``schema`` (a tools file's
  ``[tool.schema]``) must be listed with exactly that schema; one declared with a
  ``description`` (a tools file's ``description``) with exactly that description. These
  pins hold across restarts: a server that changes a tool between two runs is caught.
* **Otherwise the first listing is.** The title, description and schema first read are
  pinned for the life of the pins: a change after that is caught from then on.
* **A name listed twice** (a ``destructiveHint`` entry and a plain twin) could run either
  definition: it is withdrawn.

A withdrawn tool stays withdrawn — the plugin hides it and refuses its calls — for the life
of the pins, even when the server changes it back: a server that changed a tool once may
change it again. The plugin says what to do (review the listing and declare the tool again)
and logs each withdrawal once. A reason never quotes the listed description: it reaches the
model in the refusal, and the new text may be the very instruction the pin keeps from it.

A call may carry only the arguments the declaration names (:func:`declared_arguments`): the
schema's ``properties`` (the declared schema, else the pinned listing's) and the declared
path, working-directory and content fields. Anything else would reach the tool unjudged.

A pin never changes what an approval binds: neither a tool's description nor its schema is
part of an action digest.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jevqueue.policy._registry import ToolSpec

__all__ = ["ListedTool", "ListingPins", "declared_arguments"]

SchemaView = Callable[[Mapping[str, Any]], Mapping[str, Any]]
"""The part of a schema a framework lists, when it lists only part of what was declared."""


def _plain(value: Any) -> Any:
    """``value`` without nulls, as a tools file holds it (TOML has no null)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items() if item is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value if item is not None]
    return value


@dataclass(frozen=True)
class ListedTool:
    """One entry of a tool listing, as a plugin reads it from its framework.

    The core knows no framework's listing: each plugin fills these fields from its own
    entry (MCP: ``name``, ``title``, ``description``, ``inputSchema``; AgentChat's
    ``ToolSchema``: ``name``, ``description``, ``parameters``).

    Attributes:
        name: the name a call uses.
        description: what the model reads about the tool (``None``: none listed).
        schema: the arguments' JSON Schema as listed (``{}``: none), stored without nulls.
        title: a display title, when the framework lists one.
    """

    name: str
    description: str | None = None
    schema: Mapping[str, Any] = field(default_factory=dict)
    title: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "schema", _plain(self.schema))

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
        found.extend(_schema_changes(pinned.schema, self.schema))
        return found


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _names(names: list[str]) -> str:
    """Names for a one-line message: quoted, clipped, at most ten."""
    shown = ", ".join(repr(str(name)[:80]) for name in names[:10])
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")


def _schema_changes(pinned: Mapping[str, Any], live: Mapping[str, Any]) -> list[str]:
    """How the schema ``live`` differs from ``pinned``, in words."""
    if pinned == live:
        return []
    old, new = _properties(pinned), _properties(live)
    found = []
    added = sorted(set(new) - set(old))
    removed = sorted(set(old) - set(new))
    changed = sorted(name for name in set(old) & set(new) if old[name] != new[name])
    if added:
        found.append(f"schema properties added: {_names(added)}")
    if removed:
        found.append(f"schema properties removed: {_names(removed)}")
    if changed:
        found.append(f"schema properties changed: {_names(changed)}")
    others = sorted(
        key for key in {*pinned, *live} - {"properties"} if pinned.get(key) != live.get(key)
    )
    if others:
        found.append(f"schema {_names(others)} changed")
    return found or ["its schema changed"]


def declared_arguments(spec: ToolSpec, schema: Mapping[str, Any] | None) -> frozenset[str]:
    """The argument names a call of ``spec`` may carry.

    Args:
        spec: the declaration; its ``schema``, when given, names the parameters.
        schema: the schema the tool is listed with (pinned), for a declaration without one.

    Returns:
        The schema's ``properties`` and the declared path, working-directory and content
        fields (only those when neither schema is known).
    """
    names = set(_properties(spec.schema if spec.schema is not None else (schema or {})))
    names.update(spec.path_fields)
    if spec.cwd_field is not None:
        names.add(spec.cwd_field)
    names.update(pointer.split("/", 1)[0] for pointer in spec.content_fields)
    return frozenset(names)


def _whole(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    return schema


class ListingPins:
    """Pins a server's listing of the declared tools; withdraws what breaks a pin.

    Args:
        specs: the declarations: their names say which listed tools are pinned, their
            ``schema`` and ``description`` (when given) are the pins.
        schema_view: the part of a schema the framework lists, when it lists only part of
            what was declared (AgentChat's ``McpWorkbench`` keeps ``type``, ``properties``,
            ``required`` and ``additionalProperties`` of an MCP ``inputSchema``): the
            declared and the listed schema are compared through it. Default: whole.

    Attributes:
        withdrawn: tool name -> why it is withdrawn, for the life of these pins.
    """

    def __init__(self, specs: Iterable[ToolSpec], *, schema_view: SchemaView | None = None) -> None:
        specs = tuple(specs)
        self._view: SchemaView = schema_view if schema_view is not None else _whole
        self._declared = frozenset(spec.name for spec in specs)
        self._schemas = {
            spec.name: _plain(self._view(spec.schema)) for spec in specs if spec.schema is not None
        }
        self._descriptions = {
            spec.name: spec.description for spec in specs if spec.description is not None
        }
        self._pinned: dict[str, ListedTool] = {}
        self.withdrawn: dict[str, str] = {}

    def read(self, listing: Iterable[ListedTool]) -> list[tuple[str, str]]:
        """Read one listing (or one page of it).

        Returns:
            ``(name, why)`` for each tool this listing withdraws (the ones already
            withdrawn are not repeated). A name listed twice is withdrawn whether or not
            it is declared; only declared tools are pinned.
        """
        entries = list(listing)
        newly: list[tuple[str, str]] = []

        def withdraw(name: str, why: str) -> None:
            if name not in self.withdrawn:
                self.withdrawn[name] = why
                newly.append((name, why))

        for name, count in Counter(tool.name for tool in entries).items():
            if count > 1:
                withdraw(
                    name,
                    f"the server lists {count} tools named {name!r}, and a call could run "
                    "any of them",
                )
        for tool in entries:
            name = tool.name
            if name in self.withdrawn or name not in self._declared:
                continue
            pinned = self._pinned.setdefault(name, tool)
            reasons = []
            declared = self._schemas.get(name)
            listed: Mapping[str, Any] = _plain(self._view(tool.schema))
            if declared is not None and declared != listed:
                reasons.append(
                    "its schema differs from the declared one (ToolSpec.schema, a tools "
                    f"file's [tool.schema]): {'; '.join(_schema_changes(declared, listed))}"
                )
                pinned = dataclasses.replace(pinned, schema=tool.schema)
            description = self._descriptions.get(name)
            if description is not None and description != (tool.description or ""):
                reasons.append(
                    # Not quoted: the reason reaches the model, and the new text may be
                    # the very instruction the pin keeps from it.
                    "its description differs from the declared one (ToolSpec.description, a "
                    "tools file's description)"
                )
                pinned = dataclasses.replace(pinned, description=tool.description)
            changes = tool.changes(pinned)
            if changes:
                reasons.append(f"it changed since it was first listed ({'; '.join(changes)})")
            if reasons:
                withdraw(name, " and ".join(reasons))
        return newly

    def arguments(self, spec: ToolSpec) -> frozenset[str]:
        """The argument names a call of ``spec`` may carry (:func:`declared_arguments`,
        with the schema of the listing pinned for it)."""
        pinned = self._pinned.get(spec.name)
        return declared_arguments(spec, pinned.schema if pinned is not None else None)
