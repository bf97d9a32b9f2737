"""Fail-closed tool registries: what each tool does, declared once, by the integrator.

A :class:`ToolSpec` says which side effects a tool has, which of its arguments are paths,
which one is its working directory, and which carry content worth scanning. Policy
rules read these facts from the registry, never from the agent's arguments, so an agent
cannot talk its way into a milder treatment (an Antigravity ``run_command`` carries a
``SafeToAutoRun`` flag; the policy ignores it).

A :class:`ToolRegistry` looks names up exactly: ``Write_To_File``, ``write_to_file `` or
a name spelled with look-alike Unicode characters is not ``write_to_file``, and a name
that is not registered is refused with :class:`~jevqueue.errors.UnregisteredToolError`
before any policy runs.
"""

from __future__ import annotations

import difflib
import re
import sys
import unicodedata
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from jevqueue.errors import ConfigurationError, UnregisteredToolError
from jevqueue.policy._canonical import encode_json_string, encode_prevalidated

__all__ = [
    "ACCOUNT_SETTINGS",
    "BOOKING",
    "BUILTIN_SIDE_EFFECTS",
    "CREDENTIAL_CHANGE",
    "DATA_DELETE",
    "FILE_DELETE",
    "FILE_READ",
    "FILE_WRITE",
    "NETWORK",
    "PAYMENT",
    "SEND_EMAIL",
    "SEND_MESSAGE",
    "SHARE",
    "SHELL_COMMAND",
    "TRUSTED",
    "UNTRUSTED",
    "ToolRegistry",
    "ToolSpec",
    "antigravity_registry",
    "declare_side_effect",
    "generic_registry",
    "known_side_effects",
    "registry_from_specs",
]

TRUSTED = "trusted"
"""A tool's output is the user's own or the system's (``ToolSpec.output_trust``)."""
UNTRUSTED = "untrusted"
"""A tool's output may hold what an attacker wrote: e-mail, web pages, messages, files."""
OUTPUT_TRUST = frozenset({TRUSTED, UNTRUSTED})

FILE_READ = "file_read"
"""The tool reads the files named by its path fields."""
FILE_WRITE = "file_write"
"""The tool creates or changes the files named by its path fields."""
FILE_DELETE = "file_delete"
"""The tool removes the files named by its path fields."""
SHELL_COMMAND = "shell_command"
"""The tool runs a shell command (whose effects jevqueue does not try to predict)."""
NETWORK = "network"
"""The tool talks to the network: fetches a URL, calls an API, downloads."""
PAYMENT = "payment"
"""The tool moves money: pays, transfers, refunds, buys, tips, subscribes."""
SEND_MESSAGE = "send_message"
"""The tool sends a chat, SMS or other message that a person receives."""
SEND_EMAIL = "send_email"
"""The tool sends (or schedules) an email."""
SHARE = "share"
"""The tool gives someone else access: shares a file, a folder, a calendar, a link."""
DATA_DELETE = "data_delete"
"""The tool deletes data a service holds (emails, messages, records, events) — not files,
which are :data:`FILE_DELETE`."""
ACCOUNT_SETTINGS = "account_settings"
"""The tool changes an account's settings: forwarding rules, notifications, profile,
linked accounts, payees."""
CREDENTIAL_CHANGE = "credential_change"
"""The tool changes how an account is reached: passwords, keys, tokens, second factors,
recovery addresses."""
BOOKING = "booking"
"""The tool books, changes or cancels a reservation: travel, hotels, tickets, tables."""

BUILTIN_SIDE_EFFECTS: Mapping[str, str] = MappingProxyType(
    {
        FILE_READ: "reads the files named by its path fields",
        FILE_WRITE: "creates or changes the files named by its path fields",
        FILE_DELETE: "removes the files named by its path fields",
        SHELL_COMMAND: "runs a shell command",
        NETWORK: "talks to the network (fetches, calls APIs, downloads)",
        PAYMENT: "moves money",
        SEND_MESSAGE: "sends a message that a person receives",
        SEND_EMAIL: "sends an email",
        SHARE: "gives someone else access to something",
        DATA_DELETE: "deletes data a service holds (not files)",
        ACCOUNT_SETTINGS: "changes an account's settings",
        CREDENTIAL_CHANGE: "changes an account's credentials",
        BOOKING: "books, changes or cancels a reservation",
    }
)
"""The closed side-effect vocabulary every rule and tool declaration shares, name ->
what it means. A name outside it (and outside :func:`declare_side_effect`) is a
:class:`~jevqueue.errors.ConfigurationError`, so a typo cannot silently drop the rules
that govern the effect it meant."""

_DECLARED_SIDE_EFFECTS: dict[str, str] = {}
_FILE_EFFECTS = frozenset({FILE_READ, FILE_WRITE, FILE_DELETE})


def declare_side_effect(name: str, description: str) -> str:
    """Add a side effect of your own to the vocabulary, and return its name.

    Declare it together with the rule that governs it (a policy file's
    ``[policy] side_effects`` and a ``[[rule]]`` naming it, or a rule of your own): a side
    effect no rule names protects nothing. Declaring a built-in name again is harmless.

    Raises:
        ConfigurationError: the name is not an identifier, or the description is empty.
    """
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ConfigurationError(
            f"side effect {name!r} must be an identifier such as 'database_write'"
        )
    if not isinstance(description, str) or not description.strip():
        raise ConfigurationError(
            f"side effect {name!r}: say what it means in a non-empty description"
        )
    if name not in BUILTIN_SIDE_EFFECTS:
        _DECLARED_SIDE_EFFECTS[name] = description
    return name


def known_side_effects() -> frozenset[str]:
    """Every side-effect name a tool may declare now: the built-ins and the declared."""
    return frozenset((*BUILTIN_SIDE_EFFECTS, *_DECLARED_SIDE_EFFECTS))


def _nearest_side_effect(effect: str) -> str | None:
    """The known name a mistyped ``effect`` most likely meant.

    A word of a known name comes first (``shell`` means ``shell_command``, not the
    letter-wise closer ``share``), then the closest spelling.
    """
    known = sorted(known_side_effects())
    lowered = effect.lower().replace("-", "_")
    for name in known:
        if lowered in name.split("_") or (len(lowered) >= 4 and name.startswith(lowered)):
            return name
    close = difflib.get_close_matches(lowered, known, n=1, cutoff=0.5)
    return close[0] if close else None


def _check_side_effect(effect: str, tool: str) -> None:
    if effect in BUILTIN_SIDE_EFFECTS or effect in _DECLARED_SIDE_EFFECTS:
        return
    near = _nearest_side_effect(effect)
    hint = f" Did you mean {near!r}?" if near else ""
    raise ConfigurationError(
        f"tool {tool!r}: unknown side effect {effect!r}.{hint} Known side effects: "
        f"{', '.join(sorted(known_side_effects()))}. A side effect of your own must be "
        "declared, together with the rule that governs it, with "
        "jevqueue.declare_side_effect(name, description) or a policy file's "
        "[policy] side_effects, before the tool is declared"
    )


# Tool names are plain ASCII, so that no two distinct registered names can look alike.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/\-]{0,127}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")


def _names(value: object, what: str, tool: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigurationError(
            f"tool {tool!r}: {what} must be a tuple of strings, not {type(value).__name__}"
        )
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"tool {tool!r}: every entry of {what} must be a string")
    if len(set(names)) != len(names):
        raise ConfigurationError(f"tool {tool!r}: {what} lists a name twice")
    return names


@dataclass(frozen=True)
class ToolSpec:
    """What one tool does, as far as policy is concerned.

    Attributes:
        name: the exact tool name (ASCII letters, digits and ``_ . : / -``).
        side_effects: e.g. ``{"file_write"}``: names from :data:`BUILTIN_SIDE_EFFECTS`
            or :func:`declare_side_effect` (anything else is a ConfigurationError that
            suggests the nearest known name). Any iterable of strings but a bare string is
            accepted and stored as a frozenset. A tool with path fields but no file side
            effect is judged as writing them (``file_write`` is added).
        path_fields: argument names that hold file paths the tool touches. Each is
            resolved against the workspace into :attr:`Action.targets`.
        required_path_fields: path (or cwd) fields that must be present; a call without
            one is refused before evaluation.
        cwd_field: the argument naming the working directory (shell-like tools).
        content_fields: where the tool's payload lives, as ``/``-separated paths into the
            arguments; ``*`` stands for every item of a list or value of an object
            (``"ReplacementChunks/*/ReplacementContent"``). Credential scanning reads these;
            with none declared it reads every string in the arguments.
        schema: an optional JSON Schema the arguments must satisfy (checked with
            ``jsonschema``; the schema itself is checked at construction).
        literal_paths: the tool takes its path text literally — it never expands
            ``$VAR`` or ``~user``, never decodes ``%xx`` and never runs on Windows — so
            spellings that mean different files to different tools (backslashes,
            percent-encoding, control characters, trailing dots or spaces, drive
            letters, variables) are judged as written instead of refused.
        paths_as_written: the tool needs the path the model wrote, not the resolved
            absolute path the policy judged (plugins hand tools the resolved one unless
            this is set). Prefer the default: the resolved path is the file judged.
        output_trust: how far what the tool returns is trusted: ``"untrusted"`` (the
            default: e-mail, web pages, messages, files others wrote — anything an
            attacker may have written) or ``"trusted"`` (the tool's output is the user's
            own or the system's). A value the agent read in an untrusted output is
            labelled so when it reaches another call's arguments
            (:class:`~jevqueue.policy.Provenance`).
        origin: who serves the tool, when that is not this process (an MCP server's
            name and a hash of its command or URL). Part of the action digest: an
            approval of one server's call never runs on another's.
        description: the tool's description as its server lists it, when reviewed (a
            tools file's ``description``): a plugin in front of someone else's tools
            withdraws the tool when it is listed with another
            (:class:`~jevqueue.policy.ListingPins`). A review pin, not policy: it is not
            part of the action digest.

    A path field holds a string; one whose schema property is an ``array`` holds a list of
    strings, each element a path judged and resolved like a single one.

    Raises:
        ConfigurationError: a name, field list or schema is malformed.
    """

    name: str
    side_effects: frozenset[str]
    path_fields: tuple[str, ...] = ()
    required_path_fields: tuple[str, ...] = ()
    cwd_field: str | None = None
    content_fields: tuple[str, ...] = ()
    schema: Mapping[str, Any] | None = field(default=None, hash=False)
    literal_paths: bool = False
    paths_as_written: bool = False
    output_trust: str = UNTRUSTED
    origin: str | None = None
    description: str | None = field(default=None, repr=False)
    _validator: Any = field(default=None, init=False, repr=False, compare=False, hash=False)
    _digest_parts: tuple[str, str] = field(
        default=("", ""), init=False, repr=False, compare=False, hash=False
    )
    _origin_part: str = field(default="", init=False, repr=False, compare=False, hash=False)
    _path_lists: frozenset[str] = field(
        default=frozenset(), init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _TOOL_NAME.fullmatch(self.name):
            raise ConfigurationError(
                f"tool name {self.name!r} must be 1-128 ASCII letters, digits or '_.:/-' "
                "(starting with a letter, digit or '_')"
            )
        effects = _names(self.side_effects, "side_effects", self.name)
        for effect in effects:
            if not _IDENTIFIER.fullmatch(effect):
                raise ConfigurationError(
                    f"tool {self.name!r}: side effect {effect!r} must be an identifier such as "
                    "'file_write'"
                )
            _check_side_effect(effect, self.name)
        paths = _names(self.path_fields, "path_fields", self.name)
        if paths and _FILE_EFFECTS.isdisjoint(effects):
            # Path fields without a file side effect: judged as the worst case, a write,
            # so the .git, CI and secret-file rules still see the tool's targets.
            effects = (*effects, FILE_WRITE)
        object.__setattr__(self, "side_effects", frozenset(effects))
        object.__setattr__(
            self,
            "_digest_parts",
            (
                encode_prevalidated(sorted(effects)).decode("utf-8"),
                encode_json_string(self.name),
            ),
        )
        object.__setattr__(self, "path_fields", paths)
        required = _names(self.required_path_fields, "required_path_fields", self.name)
        object.__setattr__(self, "required_path_fields", required)
        if self.cwd_field is not None:
            if not isinstance(self.cwd_field, str) or not self.cwd_field:
                raise ConfigurationError(f"tool {self.name!r}: cwd_field must be a string")
            if self.cwd_field in paths:
                raise ConfigurationError(
                    f"tool {self.name!r}: {self.cwd_field!r} is both the cwd_field and a path "
                    "field; declare it once, as cwd_field"
                )
        known = {*paths, *((self.cwd_field,) if self.cwd_field else ())}
        for name in required:
            if name not in known:
                raise ConfigurationError(
                    f"tool {self.name!r}: required path field {name!r} is neither in "
                    "path_fields nor the cwd_field"
                )
        object.__setattr__(
            self, "content_fields", _names(self.content_fields, "content_fields", self.name)
        )
        for flag in ("literal_paths", "paths_as_written"):
            if type(getattr(self, flag)) is not bool:
                raise ConfigurationError(f"tool {self.name!r}: {flag} must be True or False")
        if self.output_trust not in OUTPUT_TRUST:
            raise ConfigurationError(
                f"tool {self.name!r}: output_trust must be 'trusted' or 'untrusted', not "
                f"{self.output_trust!r}"
            )
        if self.origin is not None:
            if (
                not isinstance(self.origin, str)
                or not self.origin
                or len(self.origin) > 512
                or not self.origin.isprintable()
            ):
                raise ConfigurationError(
                    f"tool {self.name!r}: origin must be 1-512 printable characters naming "
                    "who serves the tool, such as 'mcp:files:sha256:...'"
                )
            object.__setattr__(self, "_origin_part", ',"origin":' + encode_json_string(self.origin))
        if self.description is not None and not isinstance(self.description, str):
            raise ConfigurationError(
                f"tool {self.name!r}: description must be a string (the tool's description "
                f"as its server lists it), not {type(self.description).__name__}"
            )
        if self.schema is not None:
            if not isinstance(self.schema, Mapping):
                raise ConfigurationError(f"tool {self.name!r}: schema must be a mapping")
            # Imported here, when the first schema is checked: jsonschema costs about a
            # tenth of a second to import, which a policy without schemas never needs.
            from jsonschema import SchemaError, validators

            try:
                validator_class = validators.validator_for(self.schema)
                validator_class.check_schema(self.schema)
            except SchemaError as error:
                raise ConfigurationError(
                    f"tool {self.name!r}: the schema is not a valid JSON Schema ({error.message})"
                ) from None
            except (TypeError, ValueError, OverflowError, RecursionError) as error:
                # jsonschema reads some malformed schemas with Python's own errors: a
                # "$schema" that is not a string, a pattern no regex engine can compile.
                raise ConfigurationError(
                    f"tool {self.name!r}: the schema is not a JSON Schema jsonschema can read "
                    f"({type(error).__name__}: {str(error)[:200]}): fix the schema"
                ) from None
            object.__setattr__(self, "_validator", validator_class(self.schema))
            self._check_fields_in_schema()
            object.__setattr__(self, "_path_lists", self._array_path_fields())

    def _array_path_fields(self) -> frozenset[str]:
        """The path fields the schema types as arrays: each holds a list of paths."""
        properties = self.schema.get("properties") if self.schema is not None else None
        if not isinstance(properties, Mapping):
            return frozenset()
        lists = set()
        for name in self.path_fields:
            kind = properties[name].get("type") if isinstance(properties[name], Mapping) else None
            kinds = kind if isinstance(kind, list) else [kind]
            if "array" in kinds:
                lists.add(name)
        return frozenset(lists)

    def _check_fields_in_schema(self) -> None:
        """Every declared field names a parameter, when the schema lists its parameters."""
        properties = self.schema.get("properties") if self.schema is not None else None
        if not isinstance(properties, Mapping):
            return
        declared = [
            *(("path_fields", name) for name in self.path_fields),
            *((("cwd_field", self.cwd_field),) if self.cwd_field is not None else ()),
            *(("content_fields", pointer.split("/")[0]) for pointer in self.content_fields),
        ]
        for what, name in declared:
            if name not in properties:
                close = difflib.get_close_matches(name, [str(key) for key in properties], n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigurationError(
                    f"tool {self.name!r}: {what} names {name!r}, which is not a parameter of "
                    f"the tool's schema{hint}; parameters: {', '.join(map(str, properties))}. "
                    "Name the argument exactly as the schema does"
                )

    @classmethod
    def declare(
        cls,
        name: str,
        *,
        side_effects: Iterable[str],
        path_fields: Iterable[str] = (),
        required_path_fields: Iterable[str] | None = None,
        cwd_field: str | None = None,
        content_fields: Iterable[str] = (),
        schema: Mapping[str, Any] | None = None,
        literal_paths: bool = False,
        paths_as_written: bool = False,
        output_trust: str = "untrusted",
        origin: str | None = None,
        description: str | None = None,
    ) -> ToolSpec:
        """The one way every plugin's ``tool_spec(...)`` and the tools file declare a tool.

        Like the constructor, except that ``required_path_fields`` defaults to every path
        field and the ``cwd_field``: a call that leaves out what the policy needs to judge
        it is refused, unless the declaration says that field is optional.

        Raises:
            ConfigurationError: as the constructor.
        """
        if isinstance(side_effects, str):
            raise ConfigurationError(
                f"tool {name!r}: side_effects must be a collection of names such as "
                f"{{{side_effects!r}}}, not the string {side_effects!r}"
            )
        paths: Any = tuple(path_fields) if not isinstance(path_fields, str) else path_fields
        if required_path_fields is None:
            cwd = (cwd_field,) if isinstance(cwd_field, str) and cwd_field else ()
            required: Any = tuple(dict.fromkeys((*paths, *cwd)))
        else:
            required = required_path_fields
        return cls(
            name=name,
            side_effects=side_effects,  # type: ignore[arg-type]  # checked in __post_init__
            path_fields=paths,
            required_path_fields=required,
            cwd_field=cwd_field,
            content_fields=content_fields,  # type: ignore[arg-type]
            schema=schema,
            literal_paths=literal_paths,
            paths_as_written=paths_as_written,
            output_trust=output_trust,
            origin=origin,
            description=description,
        )

    @property
    def digest_parts(self) -> tuple[str, str]:
        """The canonical JSON of the sorted side effects and of the name (for digests)."""
        return self._digest_parts

    @property
    def validator(self) -> Any:
        """The compiled JSON Schema validator, or ``None`` without a schema."""
        return self._validator


def _fold(name: str) -> str:
    return "".join(unicodedata.normalize("NFKC", name).casefold().split())


class ToolRegistry:
    """The tools an agent may call, by exact name.

    Args:
        specs: tools to register right away.

    Example::

        registry = generic_registry().register(
            ToolSpec("fetch_url", side_effects={"network"}, content_fields=("url",))
        )
    """

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: ToolSpec, *, replace: bool = False) -> ToolRegistry:
        """Add ``spec`` and return the registry (so calls chain).

        Args:
            spec: the tool to register.
            replace: allow replacing a tool already registered under that name.

        Raises:
            ConfigurationError: ``spec`` is not a ToolSpec, or the name is taken and
                ``replace`` is false.
        """
        if not isinstance(spec, ToolSpec):
            raise ConfigurationError(f"register() takes a ToolSpec, not {type(spec).__name__}")
        if spec.name in self._specs and not replace:
            raise ConfigurationError(
                f"tool {spec.name!r} is already registered: pass replace=True to redefine it"
            )
        self._specs[spec.name] = spec
        return self

    def output_trust(self, name: str) -> str:
        """How far ``name``'s output is trusted: its declaration's ``output_trust``;
        ``"untrusted"`` for a tool without one (or a registry that fails), to fail closed."""
        try:
            return self.get(name).output_trust
        except Exception:
            return UNTRUSTED

    def get(self, name: str) -> ToolSpec:
        """Return the spec registered under exactly ``name``.

        Raises:
            UnregisteredToolError: no tool has exactly that name. Case, whitespace and
                Unicode look-alikes of a registered name do not match it.
        """
        spec = self._specs.get(name) if type(name) is str else None
        if spec is not None:
            return spec
        if type(name) is not str:
            raise UnregisteredToolError(
                repr(name)[:80],
                f"a tool name must be a str, not {type(name).__name__}; nothing was evaluated",
            )
        shown = name if len(name) <= 80 else name[:77] + "..."
        folded = _fold(name)
        for registered in self._specs:
            if _fold(registered) == folded:
                raise UnregisteredToolError(
                    shown,
                    f"tool {shown!r} is not registered; it only looks like {registered!r}. "
                    "Tool names must match exactly (case, whitespace and Unicode included)",
                )
        raise UnregisteredToolError(shown)

    def __contains__(self, name: object) -> bool:
        return type(name) is str and name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._specs))

    def __len__(self) -> int:
        return len(self._specs)

    def specs(self) -> tuple[ToolSpec, ...]:
        """Return every registered spec, in registration order."""
        return tuple(self._specs.values())

    def __repr__(self) -> str:
        return f"ToolRegistry({sorted(self._specs)!r})"


WRITE_TO_FILE = ToolSpec(
    "write_to_file",
    side_effects=frozenset({FILE_WRITE}),
    path_fields=("TargetFile",),
    required_path_fields=("TargetFile",),
    content_fields=("CodeContent",),
)
RUN_COMMAND = ToolSpec(
    "run_command",
    side_effects=frozenset({SHELL_COMMAND}),
    cwd_field="Cwd",
    required_path_fields=("Cwd",),
    content_fields=("CommandLine",),
)
MULTI_REPLACE_FILE_CONTENT = ToolSpec(
    "multi_replace_file_content",
    side_effects=frozenset({FILE_WRITE}),
    path_fields=("TargetFile",),
    required_path_fields=("TargetFile",),
    content_fields=("ReplacementChunks/*/ReplacementContent",),
)
VIEW_FILE = ToolSpec(
    "view_file",
    side_effects=frozenset({FILE_READ}),
    path_fields=("AbsolutePath",),
    required_path_fields=("AbsolutePath",),
)


def generic_registry() -> ToolRegistry:
    """Return a new registry with ``write_to_file`` and ``run_command``.

    ``write_to_file``: ``TargetFile`` (path, required), ``CodeContent`` (content);
    side effect ``file_write``. ``run_command``: ``CommandLine`` (content), ``Cwd``
    (working directory, required); side effect ``shell_command``.
    """
    return ToolRegistry((WRITE_TO_FILE, RUN_COMMAND))


def antigravity_registry() -> ToolRegistry:
    """Return a new registry with the Antigravity reference tools.

    The generic two plus ``multi_replace_file_content`` (``TargetFile``, and
    ``ReplacementChunks`` — a list of ``{TargetContent, ReplacementContent, StartLine,
    EndLine, AllowMultiple}`` whose ``ReplacementContent`` is scanned) and ``view_file``
    (``AbsolutePath``; side effect ``file_read``).
    """
    return ToolRegistry((WRITE_TO_FILE, RUN_COMMAND, MULTI_REPLACE_FILE_CONTENT, VIEW_FILE))


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside jevqueue: the user's call."""
    level, frame = 2, sys._getframe(2)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("jevqueue."):
        frame, level = frame.f_back, level + 1
    return level


def registry_from_specs(
    specs: Iterable[ToolSpec] | ToolRegistry = (),
    *,
    registry: ToolRegistry | None = None,
    owner: str = "this plugin",
) -> ToolRegistry:
    """The registry a plugin judges calls against, built from its ``specs=`` argument.

    Every plugin takes the tools' declarations the same way: ``specs=[...]``, each a
    :class:`ToolSpec` (from the plugin's ``tool_spec(tool, ...)`` or
    :func:`~jevqueue.policy.load_tools_file`); a whole :class:`ToolRegistry` is accepted
    too. ``registry=`` is the older spelling of a few plugins: it still works for one
    release, with a ``DeprecationWarning``.

    Args:
        specs: The declarations, one per tool.
        registry: Deprecated: a registry holding declarations (``specs`` are added to it).
        owner: The plugin's entry point, named in error and warning messages.

    Returns:
        A registry holding every declaration.

    Raises:
        ConfigurationError: ``specs`` is not a collection of ToolSpecs (a string, a mapping,
            a framework tool instead of its spec), or declares a tool twice.
    """
    if registry is not None:
        warnings.warn(
            f"{owner}: registry= is deprecated and goes away in the next release; pass the "
            "declarations as specs=[...] (or specs=registry)",
            DeprecationWarning,
            stacklevel=_caller_level(),
        )
        if not isinstance(registry, ToolRegistry):
            raise ConfigurationError(
                f"{owner}: registry= takes a ToolRegistry, not {type(registry).__name__}"
            )
    if isinstance(specs, ToolRegistry):
        specs = specs.specs()
    elif isinstance(specs, (str, bytes, Mapping)) or not isinstance(specs, Iterable):
        raise ConfigurationError(
            f"{owner}: specs= takes a list of ToolSpec (built with the plugin's tool_spec(...) "
            f"or jevqueue.load_tools_file(...)), not {type(specs).__name__}"
        )
    result = ToolRegistry(registry.specs() if registry is not None else ())
    for spec in specs:
        if not isinstance(spec, ToolSpec):
            raise ConfigurationError(
                f"{owner}: every item of specs= must be a ToolSpec, not {type(spec).__name__}; "
                "declare a framework tool with the plugin's tool_spec(tool, side_effects=...)"
            )
        if spec.name in result and (registry is None or spec.name not in registry):
            raise ConfigurationError(
                f"{owner}: tool {spec.name!r} is declared twice in specs=; declare each once"
            )
        result.register(spec, replace=True)
    return result
