"""The policy files jevqueue ships, by name (``jevqueue policy list`` prints them).

* ``strict-build-files``: writing build, packaging and dependency files (Makefile,
  ``pyproject.toml``, ``package.json`` ...) needs an approval too; the defaults allow it.
* ``personal-assistant``: for assistants that are not coding agents — approval for
  payments, bookings, deletes, account settings and for messages, emails and shares to
  recipients outside a configured domain; credential changes are denied. Copy it and set
  your domain.

Load one with ``create_default_policy_decision_point(policy_files=[shipped_policy_path(name)])``.
"""

from __future__ import annotations

from pathlib import Path

from jevqueue.errors import ConfigurationError

__all__ = ["shipped_policy_names", "shipped_policy_path"]

_FOLDER = Path(__file__).resolve().parent / "shipped"


def shipped_policy_names() -> tuple[str, ...]:
    """The names of the shipped policy files, sorted."""
    return tuple(sorted(path.stem for path in _FOLDER.glob("*.toml")))


def shipped_policy_path(name: str) -> Path:
    """The path of the shipped policy file ``name``.

    Raises:
        ConfigurationError: no shipped policy has that name.
    """
    path = _FOLDER / f"{name}.toml"
    if not isinstance(name, str) or "/" in name or not path.is_file():
        raise ConfigurationError(
            f"no shipped policy named {name!r}: choose one of "
            f"{', '.join(shipped_policy_names())} (jevqueue policy list)"
        )
    return path
