"""A ``resources/read`` as the policy judges it: a call of the declared tool ``resources/read``.

A resource read reaches the upstream like a tool call does, and a server of files serves
any file it can open as a ``file://`` resource. So the proxy relays resources only when the
tools file declares ``resources/read``, and judges every read as a call of that
declaration, audited like any call:

* a ``file://`` URI is the argument ``path``, the local path it names: resolved and
  contained like any path field, and read upstream as the ``file://`` URI of the path that
  was judged;
* any other URI is the argument ``uri``, judged as given (the declaration's side effects
  say what such a read does).

One declaration says which: with ``path_fields = ["path"]`` (and ``file_read``, the
starting point ``--describe`` prints) only ``file://`` resources are read, each contained
in the workspace; without path fields only other URIs are, and a ``file://`` URI is
refused, since nothing would contain it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from jevqueue.errors import ConfigurationError, InvalidToolArgumentsError
from jevqueue.policy import ToolSpec

__all__ = ["RESOURCE_READ", "check_read_spec", "read_arguments", "read_uri"]

RESOURCE_READ = "resources/read"
"""The tools file's name for resource reads (no MCP tool may be called by it)."""


def check_read_spec(spec: ToolSpec) -> None:
    """Refuse a ``resources/read`` declaration the proxy could not judge reads with.

    Raises:
        ConfigurationError: it declares path fields other than ``path``, or a working
            directory.
    """
    if spec.path_fields not in ((), ("path",)) or spec.cwd_field is not None:
        raise ConfigurationError(
            f"tool {RESOURCE_READ!r}: a resource read has two possible arguments, 'path' (the "
            "local path of a file:// URI) and 'uri' (any other URI); declare "
            'path_fields = ["path"] (or none) and no cwd_field, not '
            f"path_fields = {list(spec.path_fields)}"
            + (f" and cwd_field = {spec.cwd_field!r}" if spec.cwd_field is not None else "")
        )


def read_arguments(uri: object) -> dict[str, str]:
    """The arguments a read of ``uri`` is judged with.

    Raises:
        InvalidToolArgumentsError: ``uri`` is not a string, or a ``file://`` URI that does
            not name one local file plainly (a host, a query, a fragment, a relative path).
    """
    if type(uri) is not str or not uri:
        raise InvalidToolArgumentsError(
            RESOURCE_READ, "the resource URI must be a non-empty string"
        )
    parts = urlsplit(uri)
    if parts.scheme.lower() != "file":
        return {"uri": uri}
    if parts.netloc not in ("", "localhost"):
        raise InvalidToolArgumentsError(
            RESOURCE_READ,
            f"the file URI names the host {parts.netloc!r}: only local files are read; ask "
            "for file:///absolute/path",
        )
    if parts.query or parts.fragment or "?" in uri or "#" in uri:
        raise InvalidToolArgumentsError(
            RESOURCE_READ,
            "a file URI with a query or a fragment does not name one file plainly; ask for "
            "file:///absolute/path",
        )
    path = unquote(parts.path)
    if not path.startswith("/"):
        raise InvalidToolArgumentsError(
            RESOURCE_READ, "the file URI has no absolute path; ask for file:///absolute/path"
        )
    return {"path": path}


def read_uri(arguments: Mapping[str, Any], asked: str) -> str:
    """The URI to read upstream with the judged ``arguments``: ``asked`` when it names the
    judged file (or is not a file URI), else the ``file://`` URI of the judged path."""
    path = arguments.get("path")
    if type(path) is not str:
        return str(arguments.get("uri", asked))
    try:
        if read_arguments(asked) == {"path": path}:
            return asked
    except InvalidToolArgumentsError:
        pass
    return PurePosixPath(path).as_uri()
