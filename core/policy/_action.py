"""The canonical action: one proposed tool call, validated and bound to a digest.

An :class:`Action` is built once, at the edge, by :meth:`Action.build`. Building it is
where every input error surfaces — an invalid context, an unregistered tool, missing or
mistyped path fields, arguments that are not canonical JSON, a schema violation — each as
a typed :class:`~jevqueue.errors.UsageError`, before any policy runs.

Path resolution. Each path field is resolved to an absolute path: ``~`` expands to the
home directory (which is almost never inside a workspace), a relative path is joined to
the workspace, and ``..`` segments are collapsed. When the workspace exists on disk,
symbolic links are resolved as well (against the real workspace), so a link inside the
workspace that points outside of it is seen for what it is; when it does not exist, the
resolution is purely lexical. A NUL byte in a path is refused. The check happens at
decision time: run tools in a sandbox, because the filesystem can change afterwards.

The digest is ``sha256:`` + the hex SHA-256 of the RFC 8785 form of::

    {"arguments": ..., "context": {all five fields}, "side_effects": [sorted],
     "targets": [resolved paths], "tool": name}

plus ``"cwd": resolved`` for tools that declare a working directory, ``"origin"`` for tools
served from elsewhere (:attr:`ToolSpec.origin`) and ``"provenance"`` (the values that came
from a tool output, with their sources: :meth:`~jevqueue.policy.Provenance.digest_document`)
when some did. Approvals bind to it, so changing any argument, target, the workspace, any
other context field, the server or the output a value came from changes it.
"""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import posixpath
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jevqueue.errors import InvalidToolArgumentsError, UnsupportedTypeError
from jevqueue.policy._canonical import canonical_arguments, canonical_json, encode_json_string
from jevqueue.policy._context import ExecutionContext
from jevqueue.policy._provenance import Provenance
from jevqueue.policy._registry import ToolRegistry, ToolSpec

__all__ = ["Action", "UnresolvablePathError", "resolve_path"]


def _workspace_root(workspace: str) -> tuple[str, bool]:
    """Return the workspace as it will be compared, and whether it exists on disk.

    A workspace that exists is resolved once, and the result reused while the workspace
    and the resolved path still name the same directory (device and inode) and that path
    is still no link itself. Were a parent of the resolved path since replaced by a link,
    a target resolved in full would land outside it: the reuse can only refuse, never
    admit.
    """
    known = _ROOTS.get(workspace)
    if known is not None:
        device, inode, root = known
        try:
            # Resolved, the path was no link: it must still be none (lstat, not stat).
            again = os.lstat(root)
            found = again if root == workspace else os.stat(workspace)
        except (OSError, ValueError):
            pass
        else:
            if (
                found.st_ino == inode == again.st_ino
                and found.st_dev == device == again.st_dev
                and stat.S_ISDIR(again.st_mode)
            ):
                return root, True
    # access() answers "does not exist" without raising; it fails whenever stat() would.
    if _EFFECTIVE_IDS and not _access(workspace, _F_OK, effective_ids=True):
        try:
            os.stat(workspace)
        except FileNotFoundError:
            return workspace, False
        except (OSError, ValueError) as error:
            raise UnresolvablePathError(f"the workspace: {_why(error)}") from None
    try:
        found = os.stat(workspace)
    except FileNotFoundError:
        return workspace, False
    except (OSError, ValueError) as error:
        raise UnresolvablePathError(f"the workspace: {_why(error)}") from None
    if not stat.S_ISDIR(found.st_mode):
        return workspace, False
    root = os.path.realpath(workspace)
    if len(_ROOTS) >= _ROOTS_LIMIT:
        _ROOTS.clear()
    _ROOTS[workspace] = (found.st_dev, found.st_ino, root)
    return root, True


# A workspace as given -> (device, inode, resolved path) of the directory it named.
_ROOTS: dict[str, tuple[int, int, str]] = {}
_ROOTS_LIMIT = 256
_access = os.access
_F_OK = os.F_OK
# Without faccessat(AT_EACCESS) the existence check is left to stat() alone.
_EFFECTIVE_IDS = os.access in os.supports_effective_ids


_NOT_NORMAL = frozenset({"", ".", ".."})


def _resolve_below(root: str, relative: str) -> str | None:
    """``os.path.realpath(root + "/" + relative)`` for a resolved ``root`` and a normal
    relative path holding no link; ``None`` when a segment is a link, or empty, ``.`` or
    ``..`` (then resolve it in full).

    Only the segments below the root are looked up: the root was just checked to be the
    workspace. As ``realpath`` does, the segments from the first that cannot be looked up
    (one that does not exist yet, say) are kept as written.
    """
    segments = relative.split("/")
    if not _NOT_NORMAL.isdisjoint(segments):
        return None
    path = root
    for segment in segments:
        path = f"{path}/{segment}"
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return f"{root}/{relative}"
        except (OSError, ValueError) as error:
            raise UnresolvablePathError(_why(error)) from None
        if stat.S_ISLNK(mode):
            return None
    return path


def _resolve_above(root: str, relative: str) -> str | None:
    """``os.path.realpath(root + "/" + relative)`` for a resolved ``root`` and a relative
    path of leading ``..`` segments followed by normal ones; ``None`` for any other shape.

    ``root`` holds no link (it is the resolved workspace), so each leading ``..`` is its
    lexical parent (stopping at the filesystem root), as ``realpath`` would find by looking
    up every segment of the whole path: only the segments after the ``..`` are looked up.
    """
    segments = relative.split("/")
    up = 0
    while segments[up] == "..":
        up += 1
        if up == len(segments):
            return None
    rest = "/".join(segments[up:])
    base = root
    for _ in range(up):
        base = base[: base.rfind("/")]  # "" stands for the filesystem root
        if not base:
            break
    below = _resolve_below(base, rest)
    if below is not None:
        return below
    if not _NOT_NORMAL.isdisjoint(segments[up:]):
        return None  # another ".." (or "", ".") further on: resolve it in full
    return _checked_realpath(f"{base}/{rest}")  # a link below the climb


class UnresolvablePathError(Exception):
    """A path could not be resolved for a reason other than "it does not exist yet"."""


def _why(error: BaseException) -> str:
    if isinstance(error, OSError) and error.errno is not None:
        return f"{errno.errorcode.get(error.errno, error.errno)} ({error.strerror})"
    return type(error).__name__


def _check_resolved(path: str) -> None:
    """Fail closed where :func:`os.path.realpath` gave up silently.

    ``realpath`` keeps a component it cannot look up as written, whatever the reason: a
    link loop, a path past PATH_MAX, a directory it may not search. Only "does not exist
    (yet)" is harmless — nothing below a missing component exists either — so every
    prefix is looked up again, and any other failure, or a link ``realpath`` left
    unfollowed, raises.

    Raises:
        UnresolvablePathError: the path cannot be judged.
    """
    prefix = ""
    for part in path.split("/"):
        if not part:
            continue
        prefix = f"{prefix}/{part}"
        try:
            mode = os.lstat(prefix).st_mode
        except FileNotFoundError:
            return
        except (OSError, ValueError) as error:
            raise UnresolvablePathError(_why(error)) from None
        if stat.S_ISLNK(mode):
            raise UnresolvablePathError("a symbolic link that cannot be followed (a loop?)")


def _checked_realpath(joined: str) -> str:
    """``os.path.realpath(joined)``, failing closed where it would give up silently.

    Raises:
        UnresolvablePathError: a component cannot be looked up for a reason other than
            "it does not exist (yet)".
    """
    try:
        return os.path.realpath(joined, strict=True)
    except FileNotFoundError:
        pass  # a component does not exist (yet): resolve the rest as written, checked
    except (OSError, ValueError) as error:
        raise UnresolvablePathError(_why(error)) from None
    resolved = os.path.realpath(joined)
    _check_resolved(resolved)
    return resolved


def resolve_path(value: str, workspace_root: str, *, on_disk: bool) -> str:
    """Resolve one path argument against the workspace.

    Args:
        value: the path as the agent wrote it.
        workspace_root: the (already resolved) workspace.
        on_disk: whether the workspace exists, so symbolic links can be followed.

    Returns:
        An absolute, normalised path.

    Raises:
        UnresolvablePathError: on disk, a component cannot be looked up for a reason
            other than not existing (ENAMETOOLONG, ELOOP, EACCES, ENOTDIR ...).
    """
    if value.startswith("~"):
        value = os.path.expanduser(value)
    joined = value if value.startswith("/") else workspace_root + "/" + value
    if on_disk:
        if value[0] != "/":
            below = _resolve_below(workspace_root, value)
            if below is not None:
                return below
            if value.startswith("../"):
                climbed = _resolve_above(workspace_root, value)
                if climbed is not None:
                    return climbed
        elif value.startswith(workspace_root) and workspace_root != "/":
            # An absolute path inside the resolved workspace (a working directory, say):
            # the workspace's own segments need no lookup, only those below it.
            if len(value) == len(workspace_root):
                return workspace_root
            if value[len(workspace_root)] == "/":
                below = _resolve_below(workspace_root, value[len(workspace_root) + 1 :])
                if below is not None:
                    return below
        return _checked_realpath(joined)
    if "//" not in joined and "/." not in joined and joined[-1] != "/":
        return joined  # no empty, "." or ".." segment: already normal
    if (
        value[0] != "/"
        and workspace_root[0] == "/"
        and workspace_root[-1] != "/"
        and "//" not in workspace_root
        and "/." not in workspace_root
    ):
        # A relative path under a normal root: only the path's own segments need the
        # loop below (the root's are all kept, and ".." stops at the filesystem root).
        kept = workspace_root.split("/")
        for segment in value.split("/"):
            if segment == "..":
                if len(kept) > 1:
                    kept.pop()
            elif segment and segment != ".":
                kept.append(segment)
        return "/".join(kept) or "/"
    if joined[0] == "/":
        # posixpath.normpath for an absolute path, with one leading slash: "" and "."
        # segments vanish, ".." removes the segment before it and stops at the root.
        stack: list[str] = []
        for segment in joined.split("/"):
            if segment == "..":
                if stack:
                    stack.pop()
            elif segment and segment != ".":
                stack.append(segment)
        return "/" + "/".join(stack)
    normal = posixpath.normpath(joined)
    # POSIX keeps a leading "//"; one slash is the same directory on every system we serve.
    return "/" + normal.lstrip("/")


# Code points HFS+ ignores in file names (git refuses ".g\u200cit" for this reason).
_HFS_IGNORABLE = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")
# NTFS 8.3 short names of the directories the default rules protect.
_SHORT_NAMES = {
    "git~1": ".git",
    "github~1": ".github",
    "circle~1": ".circleci",
    "husky~1": ".husky",
}


def _fold(component: str) -> str:
    """The name a case-insensitive, alias-forgiving filesystem would see.

    Case-folded; without HFS+ ignorable code points; cut at an NTFS stream suffix
    (``.git::$INDEX_ALLOCATION``); without the trailing dots and spaces NTFS drops
    (``.git.``); and with the 8.3 short names of protected directories (``GIT~1``)
    spelt out. Protected names then match however they are written — the aliases git
    itself refuses.
    """
    folded = _HFS_IGNORABLE.sub("", component.casefold())
    stream = folded.find(":")
    if stream > 0:
        folded = folded[:stream]
    folded = folded.rstrip(". ") or folded
    return _SHORT_NAMES.get(folded, folded)


_set_attribute = object.__setattr__


# A relative target needs _fold per component only when it is non-ASCII, holds a stream or
# short-name marker (":", "~"), or has a component ending in a dot or a space.
_DOT_SPACE = (".", " ")

# A workspace-relative path's components, as given and folded: a pure function of the
# text, remembered for the paths an agent touches again and again.
_SPLITS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
_SPLITS_LIMIT = 4096
_SPLIT_KEY_LIMIT = 1024


def _split(below: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return ``below``'s components, and the same components folded (see :func:`_fold`)."""
    parts = tuple(below.split("/"))
    lowered = below.casefold()
    if (
        lowered.isascii()
        and ":" not in lowered
        and "~" not in lowered
        and "./" not in lowered
        and " /" not in lowered
        and lowered[-1:] not in _DOT_SPACE
    ):
        folded = parts if lowered == below else tuple(lowered.split("/"))
    else:
        folded = tuple(_fold(part) for part in lowered.split("/"))
    if len(below) <= _SPLIT_KEY_LIMIT:
        if len(_SPLITS) >= _SPLITS_LIMIT:
            _SPLITS.clear()
        _SPLITS[below] = (parts, folded)
    return parts, folded


def _unresolvable(spec: ToolSpec, field: str, error: UnresolvablePathError) -> Exception:
    return InvalidToolArgumentsError(
        spec.name,
        f"{field} cannot be resolved ({error}): a path that cannot be judged is refused, "
        "to fail closed; pass a shorter path without link loops, inside the workspace",
    )


def _path_list(spec: ToolSpec, name: str, value: list[Any]) -> list[str]:
    """The elements of a path field that holds a list, each checked like a single path."""
    if not value and name in spec.required_path_fields:
        raise InvalidToolArgumentsError(
            spec.name, f"the required path field {name!r} is an empty list: name at least one path"
        )
    for index, element in enumerate(value):
        if type(element) is not str:
            raise InvalidToolArgumentsError(
                spec.name,
                f"the path field {name!r} holds a {type(element).__name__} at index {index}: "
                "a list of paths holds only strings",
            )
        if not element or "\x00" in element:
            raise InvalidToolArgumentsError(
                spec.name,
                f"the path field {name!r} holds an empty path or a NUL byte at index {index}",
            )
    return value


def _path_argument(spec: ToolSpec, arguments: Mapping[str, Any], name: str) -> str | None:
    value = arguments.get(name)
    if value is None:
        if name in spec.required_path_fields:
            raise InvalidToolArgumentsError(
                spec.name,
                f"the required path field {name!r} is missing: pass it as a string",
            )
        return None
    if type(value) is not str:
        hint = (
            " (a field that holds a list of paths is an array in the tool's schema)"
            if type(value) is list
            else ""
        )
        raise InvalidToolArgumentsError(
            spec.name,
            f"the path field {name!r} must be a string, not {type(value).__name__}{hint}",
        )
    if not value:
        raise InvalidToolArgumentsError(spec.name, f"the path field {name!r} is empty")
    if "\x00" in value:
        raise InvalidToolArgumentsError(
            spec.name, f"the path field {name!r} contains a NUL byte, which no path may hold"
        )
    return value


# Keywords that only annotate a schema: none of them can make an instance invalid.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
_OBJECT_KEYWORDS = _ANNOTATIONS | {"type", "properties", "required"}
_PROPERTY_KEYWORDS = _ANNOTATIONS | {"type"}
# The Python types each simple JSON type certainly accepts (``bool`` is not a number).
_SIMPLE_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
}


def _plainly_valid(schema: Any, arguments: Mapping[str, Any]) -> bool:
    """Whether a flat object schema certainly accepts ``arguments``.

    Only a schema made of ``type: object``, ``properties`` of simple types and
    ``required`` (plus annotations) is read; anything else, or any doubt, answers
    ``False`` and the full validator decides.
    """
    if type(schema) is not dict or schema.get("type") != "object":
        return False
    for keyword in schema:
        if keyword not in _OBJECT_KEYWORDS:
            return False
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if type(properties) is not dict or type(required) is not list:
        return False
    for name in required:
        if type(name) is not str or name not in arguments:
            return False
    for name, value in arguments.items():
        subschema = properties.get(name)
        if subschema is None:
            continue  # no additionalProperties keyword: other arguments are allowed
        if type(subschema) is not dict:
            return False
        for keyword in subschema:
            if keyword not in _PROPERTY_KEYWORDS:
                return False
        kind = subschema.get("type")
        accepted = _SIMPLE_TYPES.get(kind) if type(kind) is str else None
        if accepted is None or type(value) not in accepted:
            return False
    return True


def _schema_error(spec: ToolSpec, arguments: Mapping[str, Any]) -> None:
    validator = spec.validator
    if _plainly_valid(validator.schema, arguments):
        return
    # A validator exists, so jsonschema is loaded already (see ToolSpec).
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(arguments))
    if error is None:
        return
    where = "/" + "/".join(str(part) for part in error.absolute_path)
    # The validator's own message quotes the offending value; name the rule instead.
    raise InvalidToolArgumentsError(
        spec.name,
        f"the arguments break the tool's schema at {where} (the {error.validator!r} "
        "constraint): fix that argument",
    )


@dataclass(frozen=True)
class Action:
    """One proposed tool call, canonical and digested.

    Attributes:
        tool: the registered tool name.
        arguments: a private copy of the validated arguments (equal to what was given;
            nested ones are rebuilt from the canonical form, so an integral float such as
            ``1.0`` reads as ``1``). Mutating it changes nothing the caller runs; the caller
            must run the call with the arguments it submitted, unchanged.
        targets: the resolved absolute paths of the tool's path fields, in field order.
        side_effects: the tool's side effects, from the registry.
        context: the validated execution context.
        digest: ``sha256:<hex>`` over the canonical form (see the module docstring).
        cwd: the resolved working directory, for tools that declare one.
        workspace_root: the workspace as targets are compared with it (symbolic links
            resolved when it exists on disk).
        target_fields: the argument name each target came from (parallel to targets).
        spec: the tool's registry entry.
        relative_targets: each target's path components below ``workspace_root``, or
            ``None`` when it is not strictly inside (the workspace itself and a sibling
            such as ``/ws-evil`` next to ``/ws`` are outside). Parallel to targets.
        folded_targets: ``(field, components)`` for each target inside the workspace,
            case-folded and stripped of trailing dots and spaces, for rules that match
            protected names.
        provenance: where each argument's value came from (the user's request, an output
            the agent read, or nowhere), when the caller knows what the agent read
            (:class:`~jevqueue.policy.Transcript`); ``None`` otherwise. Part of the digest.
        call_digest: the digest of the call alone, without its provenance (equal to
            :attr:`digest` without one): the same call judged after the agent read more
            has the same call digest. What is run at most once is keyed by it.
    """

    tool: str
    arguments: Mapping[str, Any]
    targets: tuple[str, ...]
    side_effects: frozenset[str]
    context: ExecutionContext
    digest: str
    cwd: str | None = None
    workspace_root: str = ""
    target_fields: tuple[str, ...] = ()
    spec: ToolSpec | None = None
    relative_targets: tuple[tuple[str, ...] | None, ...] = ()
    folded_targets: tuple[tuple[str, tuple[str, ...]], ...] = ()
    provenance: Provenance | None = None
    call_digest: str = ""

    def __post_init__(self) -> None:
        """Validate an Action built by hand (or by ``dataclasses.replace``) as build does.

        :meth:`build` never runs ``__init__``. Anything else that makes an Action is
        checked here: the arguments and context are validated and the action rebuilt
        from its contents, and the enforcement point judges that rebuilt action and
        refuses one whose stored digest differs from it.

        Raises:
            InvalidToolArgumentsError: no ToolSpec, or the arguments break it.
            UnregisteredToolError: ``tool`` is not the spec's name.
            NonCanonicalArgumentsError: the arguments are not canonical JSON (bytes, ...).
            InvalidContextError: the context is invalid.
        """
        spec = self.spec
        if not isinstance(spec, ToolSpec):
            raise InvalidToolArgumentsError(
                str(self.tool)[:80],
                "an Action needs the tool's ToolSpec to be judged: build it with "
                "Action.build(registry, tool, arguments, context)",
            )
        arguments = self.arguments
        if isinstance(arguments, Mapping) and type(arguments) is not dict:
            arguments = dict(arguments)
        rebuilt = Action.build(
            ToolRegistry((spec,)), self.tool, arguments, self.context, provenance=self.provenance
        )
        _set_attribute(self, "_rebuilt", rebuilt)

    @classmethod
    def build(
        cls,
        registry: ToolRegistry,
        tool_name: str,
        arguments: Mapping[str, Any],
        context: ExecutionContext | Mapping[str, Any],
        *,
        provenance: Provenance | None = None,
    ) -> Action:
        """Validate a proposed call and return its canonical action.

        Args:
            registry: the tools that may be called.
            tool_name: the exact tool name.
            arguments: the tool arguments, a ``dict`` of canonical JSON values.
            context: an :class:`ExecutionContext` or a mapping of its fields.
            provenance: where the arguments came from
                (:meth:`~jevqueue.policy.Transcript.provenance`), judged and digested.

        Raises:
            InvalidContextError: the context is incomplete, ambient or malformed.
            UnregisteredToolError: no tool has exactly this name.
            NonCanonicalArgumentsError: the arguments are not canonical JSON (a subclass
                says why, ``.path`` says where).
            InvalidToolArgumentsError: a path field is missing, not a string, empty or
                holds a NUL byte, or the arguments break the tool's schema.
        """
        ctx = context if type(context) is ExecutionContext else ExecutionContext.coerce(context)
        spec = registry.get(tool_name)
        if type(arguments) is not dict:
            raise UnsupportedTypeError(
                "",
                f"tool arguments must be a dict, not {type(arguments).__name__}",
            )
        encoded_arguments, flat = canonical_arguments(arguments)
        if spec._validator is not None:
            _schema_error(spec, arguments)
        # Rules get their own copy, so nothing they do can change what the caller runs.
        # Scalars are immutable: one level of copying suffices for a flat dict; nested
        # arguments are rebuilt from their canonical form (an equal, independent tree).
        private: dict[str, Any]
        if flat:
            private = dict(arguments)
        else:
            for value in arguments.values():
                kind = type(value)
                if kind is dict or kind is list:
                    private = json.loads(encoded_arguments)
                    break
            else:
                private = dict(arguments)

        try:
            root, on_disk = _workspace_root(ctx.workspace)
        except UnresolvablePathError as error:
            raise _unresolvable(spec, "the workspace", error) from None
        targets: list[str] = []
        fields: list[str] = []
        for name in spec.path_fields:
            value = arguments.get(name)
            if type(value) is list and name in spec._path_lists:
                for element in _path_list(spec, name, value):
                    try:
                        targets.append(resolve_path(element, root, on_disk=on_disk))
                    except UnresolvablePathError as error:
                        raise _unresolvable(spec, name, error) from None
                    fields.append(name)
                continue
            if type(value) is not str or not value or "\x00" in value:
                value = _path_argument(spec, arguments, name)
                if value is None:
                    continue
            if not on_disk and value[0] != "~" and value[0] != "/":
                # resolve_path for a relative path under the context's (normal) workspace,
                # inline: joined when already normal, else only its own segments walked.
                joined = root + "/" + value
                if "//" not in joined and "/." not in joined and joined[-1] != "/":
                    targets.append(joined)
                else:
                    kept = root.split("/")
                    for segment in value.split("/"):
                        if segment == "..":
                            if len(kept) > 1:
                                kept.pop()
                        elif segment and segment != ".":
                            kept.append(segment)
                    targets.append("/".join(kept) or "/")
                fields.append(name)
                continue
            try:
                targets.append(resolve_path(value, root, on_disk=on_disk))
            except UnresolvablePathError as error:
                raise _unresolvable(spec, name, error) from None
            fields.append(name)
        cwd: str | None = None
        cwd_field = spec.cwd_field
        if cwd_field is not None:
            value = arguments.get(cwd_field)
            if type(value) is not str or not value or "\x00" in value:
                value = _path_argument(spec, arguments, cwd_field)
            if value is None:
                # An optional working directory left out: the tool runs in the workspace,
                # and arguments_to_run hands it exactly that directory.
                cwd = root
            else:
                if (
                    not on_disk
                    and value[0] == "/"
                    and "//" not in value
                    and "/." not in value
                    and value[-1] != "/"
                ):
                    cwd = value  # resolve_path's route for an absolute, normal path
                else:
                    try:
                        cwd = resolve_path(value, root, on_disk=on_disk)
                    except UnresolvablePathError as error:
                        raise _unresolvable(spec, cwd_field, error) from None

        # Keys sort as "arguments" < "context" < "cwd" < "origin" < "provenance" <
        # "side_effects" < "targets" < "tool", so the canonical document is assembled from
        # canonical pieces: the arguments, the context's cached bytes, and strings quoted
        # exactly as RFC 8785 quotes them (a test checks the digest against rfc8785.dumps of
        # digest_document()).
        effects_json, tool_json = spec._digest_parts
        if len(targets) == 1:
            quoted = encode_json_string(targets[0])
        elif not targets:
            quoted = ""
        else:
            quoted = ",".join([encode_json_string(target) for target in targets])
        rest = f',"side_effects":{effects_json},"targets":[{quoted}],"tool":{tool_json}}}'
        if cwd_field is None:
            tail = spec._origin_part + rest
        else:
            cwd_json = "null" if cwd is None else encode_json_string(cwd)
            tail = f',"cwd":{cwd_json}{spec._origin_part}{rest}'
        try:
            tail_bytes = tail.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidToolArgumentsError(
                spec.name, "a path resolves to text that is not valid Unicode"
            ) from None
        head = b"".join((b'{"arguments":', encoded_arguments, ctx.digest_context_bytes))
        call_digest = "sha256:" + hashlib.sha256(head + tail_bytes).hexdigest()
        hexdigest = call_digest
        if provenance is not None:
            if type(provenance) is not Provenance:
                raise InvalidToolArgumentsError(
                    spec.name,
                    "provenance must be a jevqueue Provenance (from Transcript.provenance), "
                    f"not {type(provenance).__name__}",
                )
            sourced = provenance.digest_document()
            if sourced:
                labels = b',"provenance":' + canonical_json(sourced)
                cut = len(tail_bytes) - len(rest.encode("utf-8"))
                hexdigest = (
                    "sha256:"
                    + hashlib.sha256(
                        b"".join((head, tail_bytes[:cut], labels, tail_bytes[cut:]))
                    ).hexdigest()
                )
        relative: tuple[tuple[str, ...] | None, ...] = ()
        folded: tuple[tuple[str, tuple[str, ...]], ...] = ()
        if len(targets) == 1:  # the common shape, without the lists
            target = targets[0]
            if root != "/" and target.startswith(root + "/"):
                below = target[len(root) + 1 :]
                split = _SPLITS.get(below)
                if split is None:
                    split = _split(below)
                relative = (split[0],)
                folded = ((fields[0], split[1]),)
            else:
                relative = (None,)
        elif targets:
            prefix = root + "/"
            cut = len(prefix)
            inside = root != "/"
            relative_list: list[tuple[str, ...] | None] = []
            folded_list: list[tuple[str, tuple[str, ...]]] = []
            for field, target in zip(fields, targets, strict=True):
                if inside and target.startswith(prefix):
                    below = target[cut:]
                    split = _SPLITS.get(below)
                    if split is None:
                        split = _split(below)
                    relative_list.append(split[0])
                    folded_list.append((field, split[1]))
                else:
                    relative_list.append(None)
            relative = tuple(relative_list)
            folded = tuple(folded_list)
        action = object.__new__(cls)
        # Every field in one go: a frozen dataclass's __init__ pays a slow
        # object.__setattr__ per field, on the hot path of every decision.
        _set_attribute(
            action,
            "__dict__",
            {
                "tool": spec.name,
                "arguments": private,
                "targets": tuple(targets),
                "side_effects": spec.side_effects,
                "context": ctx,
                "digest": hexdigest,
                "cwd": cwd,
                "workspace_root": root,
                "target_fields": tuple(fields),
                "spec": spec,
                "relative_targets": relative,
                "folded_targets": folded,
                "provenance": provenance,
                "call_digest": call_digest,
            },
        )
        return action

    def arguments_to_run(self, judged: Mapping[str, Any]) -> dict[str, Any]:
        """A fresh copy of ``judged`` — the arguments this action was built from — as the
        tool must receive them.

        Each path field holds the resolved absolute path the policy judged and the
        working-directory field the resolved directory, so a tool that opens a relative
        path against its own working directory still touches the file that was judged.
        A tool declared with ``paths_as_written=True`` gets the paths as the model wrote
        them. (``judged`` and not :attr:`arguments`: rules may have touched that copy.)

        Raises:
            InvalidToolArgumentsError: ``judged`` is not what this action was built from.
        """
        arguments: dict[str, Any] = copy.deepcopy(dict(judged))
        spec = self.spec
        if spec is None or spec.paths_as_written:
            return arguments
        lists: dict[str, list[str]] = {}
        for name, target in zip(self.target_fields, self.targets, strict=True):
            value = arguments.get(name)
            if type(value) is list:
                lists.setdefault(name, []).append(target)
                continue
            if type(value) is not str:
                raise InvalidToolArgumentsError(
                    self.tool, f"the arguments to run have no path {name!r}: run what was judged"
                )
            arguments[name] = target
        for name, resolved in lists.items():
            if len(resolved) != len(arguments[name]):
                raise InvalidToolArgumentsError(
                    self.tool,
                    f"the arguments to run hold another list of paths in {name!r}: run what "
                    "was judged",
                )
            arguments[name] = resolved
        if spec.cwd_field is not None and self.cwd is not None:
            arguments[spec.cwd_field] = self.cwd
        return arguments

    def digest_document(self) -> dict[str, Any]:
        """Return the document whose RFC 8785 form the digest hashes (for verification)."""
        document: dict[str, Any] = {
            "arguments": self.arguments,
            "context": self.context.as_dict(),
            "side_effects": sorted(self.side_effects),
            "targets": list(self.targets),
            "tool": self.tool,
        }
        if self.spec is not None and self.spec.cwd_field is not None:
            document["cwd"] = self.cwd
        if self.spec is not None and self.spec.origin is not None:
            document["origin"] = self.spec.origin
        if self.provenance is not None and self.provenance.digest_document():
            document["provenance"] = self.provenance.digest_document()
        return document
