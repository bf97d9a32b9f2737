"""What each AgentDojo tool does, declared for jevqueue: the side-effect table of
bench/prompt_injection.py.

One entry per tool of the four AgentDojo 1.2.2 suites (workspace, travel, banking, slack),
written by reading each tool's function in ``agentdojo.default_suites.v1.tools`` (what it
changes, whom it reaches), not its name. A tool shared by two suites (``send_email``,
``create_calendar_event``) is one function and has one entry. The harness refuses to run a
suite holding a tool that is missing here, so a new AgentDojo release cannot slip an
undeclared tool past the table.

Reading tools declare no side effect: jevqueue's vocabulary has none for "reads data a
service holds", and every one of them is allowed by both policies measured. Writes to the
user's own data that nobody else sees (``create_file``, ``append_to_file``) have no name in
the vocabulary either and declare none.

``output_trust`` is for the provenance configuration only (the guard records every tool
output; an untrusted one cannot vouch for a call's arguments). It is ``trusted`` only for
tools whose output no third party writes into — the date, the user's own balance, IBAN and
profile — and the harness checks that no injection ever appears in a trusted tool's output.

Judgement calls (the entry's ``why`` says the reason):

* ``cancel_calendar_event``: ``data_delete`` (the event leaves the calendar for good; no tool
  restores it) and ``send_email`` (the participants are emailed), not ``booking``: a
  calendar event is not a reservation.
* ``reschedule_calendar_event``: ``send_email`` only; the vocabulary has no "changes a
  record".
* ``create_calendar_event``: ``send_email`` — it emails an invitation to the participants.
* ``add_calendar_event_participants``: ``share`` (the new participants see the event) and
  ``send_email`` (its contract says they are emailed, though AgentDojo's code does not).
* ``delete_file``: ``data_delete``, not ``file_delete``: a cloud-drive file is data a service
  holds, named by an id, not a path in the workspace.
* ``read_file`` (banking): ``file_read`` with ``file_path`` as a path field, judged inside
  the workspace; the tool gets the path as written (AgentDojo's file system is a mapping of
  names).
* ``update_scheduled_transaction``: ``payment`` — it changes the recipient or amount of money
  that will move.
* ``update_user_info``: ``account_settings`` (the profile).
* ``invite_user_to_slack``: ``share`` (the workspace opens to someone) and ``send_email``
  (the invitation is sent to ``user_email``).
* ``remove_user_from_slack``: ``data_delete`` (the member's inbox is deleted with them) and
  ``account_settings`` (the workspace's membership changes).
* ``post_webpage``: ``network`` and ``share``: it publishes content at a URL anyone can read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from jevqueue import ToolSpec


@dataclass(frozen=True)
class Declaration:
    """One tool's declaration: side effects, path fields, and how far its output is trusted."""

    side_effects: frozenset[str] = frozenset()
    path_fields: tuple[str, ...] = ()
    paths_as_written: bool = False
    output_trust: str = "untrusted"
    why: str = ""


def _reads(why: str = "returns data; changes nothing") -> Declaration:
    return Declaration(why=why)


def _trusted(why: str) -> Declaration:
    return Declaration(output_trust="trusted", why=why)


def _does(*effects: str, why: str) -> Declaration:
    return Declaration(side_effects=frozenset(effects), why=why)


DECLARATIONS: dict[str, Declaration] = {
    # --- email (workspace, travel) --------------------------------------------------------
    "send_email": _does("send_email", why="sends an email to recipients, cc, bcc"),
    "delete_email": _does("data_delete", why="moves the email to the trash"),
    "get_unread_emails": _reads("returns the unread emails (and marks them read)"),
    "get_sent_emails": _reads(),
    "get_received_emails": _reads(),
    "get_draft_emails": _reads(),
    "search_emails": _reads(),
    "search_contacts_by_name": _reads(),
    "search_contacts_by_email": _reads(),
    # --- calendar (workspace, travel) -----------------------------------------------------
    "get_current_day": _trusted("returns the calendar's date; nobody writes into it"),
    "search_calendar_events": _reads(),
    "get_day_calendar_events": _reads(),
    "create_calendar_event": _does(
        "send_email", why="adds an event and emails an invitation to its participants"
    ),
    "cancel_calendar_event": _does(
        "data_delete",
        "send_email",
        why="the event leaves the calendar for good, and its participants are emailed",
    ),
    "reschedule_calendar_event": _does(
        "send_email", why="moves the event and emails its participants"
    ),
    "add_calendar_event_participants": _does(
        "share",
        "send_email",
        why="the new participants see the event; its contract says they are emailed",
    ),
    # --- cloud drive (workspace) ----------------------------------------------------------
    "append_to_file": _reads("changes the user's own file, which nobody else sees"),
    "search_files_by_filename": _reads(),
    "create_file": _reads("creates a file in the user's own drive, which nobody else sees"),
    "delete_file": _does("data_delete", why="removes a file the drive holds, by id"),
    "get_file_by_id": _reads(),
    "list_files": _reads(),
    "share_file": _does("share", why="gives the address given access to the file"),
    "search_files": _reads(),
    # --- travel ---------------------------------------------------------------------------
    "get_user_information": _trusted("returns the user's own profile"),
    "get_all_hotels_in_city": _reads(),
    "get_hotels_prices": _reads(),
    "get_rating_reviews_for_hotels": _reads("returns reviews, which anyone writes"),
    "get_hotels_address": _reads(),
    "get_all_restaurants_in_city": _reads(),
    "get_cuisine_type_for_restaurants": _reads(),
    "get_restaurants_address": _reads(),
    "get_rating_reviews_for_restaurants": _reads("returns reviews, which anyone writes"),
    "get_dietary_restrictions_for_all_restaurants": _reads(),
    "get_contact_information_for_restaurants": _reads(),
    "get_price_for_restaurants": _reads(),
    "check_restaurant_opening_hours": _reads(),
    "get_all_car_rental_companies_in_city": _reads(),
    "get_car_types_available": _reads(),
    "get_rating_reviews_for_car_rental": _reads("returns reviews, which anyone writes"),
    "get_car_fuel_options": _reads(),
    "get_car_rental_address": _reads(),
    "get_car_price_per_day": _reads(),
    "get_flight_information": _reads(),
    "reserve_hotel": _does("booking", why="books a hotel"),
    "reserve_car_rental": _does("booking", why="books a rental car"),
    "reserve_restaurant": _does("booking", why="books a table"),
    # --- banking --------------------------------------------------------------------------
    "get_iban": _trusted("returns the user's own IBAN"),
    "send_money": _does("payment", why="transfers money"),
    "schedule_transaction": _does("payment", why="schedules a transfer"),
    "update_scheduled_transaction": _does(
        "payment", why="changes the recipient or amount of a scheduled transfer"
    ),
    "get_balance": _trusted("returns the user's own balance"),
    "get_most_recent_transactions": _reads("returns transactions, whose subjects anyone writes"),
    "get_scheduled_transactions": _reads(),
    "read_file": Declaration(
        side_effects=frozenset({"file_read"}),
        path_fields=("file_path",),
        paths_as_written=True,
        why="reads a file; AgentDojo's file system is a mapping of names as written",
    ),
    "get_user_info": _trusted("returns the user's own profile"),
    "update_password": _does("credential_change", why="changes the account's password"),
    "update_user_info": _does("account_settings", why="changes the profile"),
    # --- slack ----------------------------------------------------------------------------
    "get_channels": _reads(),
    "add_user_to_channel": _does("share", why="gives a user the channel's messages"),
    "read_channel_messages": _reads(),
    "read_inbox": _reads(),
    "send_direct_message": _does("send_message", why="sends a message to a person"),
    "send_channel_message": _does("send_message", why="sends a message to a channel"),
    "get_users_in_channel": _reads(),
    "invite_user_to_slack": _does(
        "share", "send_email", why="opens the workspace to someone; the invite goes by email"
    ),
    "remove_user_from_slack": _does(
        "data_delete",
        "account_settings",
        why="deletes the member's inbox and changes the workspace's membership",
    ),
    "get_webpage": _does("network", why="fetches a URL (the URL itself can carry data out)"),
    "post_webpage": _does("network", "share", why="publishes content at a URL anyone can read"),
}


def supports_output_trust() -> bool:
    """True once ``ToolSpec`` takes ``output_trust`` (the provenance API)."""
    return any(field.name == "output_trust" for field in dataclasses.fields(ToolSpec))


def tool_specs(names: Iterable[str], *, output_trust: bool = False) -> list[ToolSpec]:
    """The declarations of ``names``, as ``ToolSpec``s.

    Args:
        names: The suite's tool names.
        output_trust: Declare each tool's ``output_trust`` too (needs the provenance API).

    Raises:
        KeyError: a tool has no entry in :data:`DECLARATIONS`.
    """
    missing = sorted(name for name in names if name not in DECLARATIONS)
    if missing:
        raise KeyError(
            f"AgentDojo tools {missing} have no declaration in bench/prompt_injection_tools.py: "
            "read each tool's function and add an entry with its honest side effects"
        )
    specs = []
    for name in names:
        entry = DECLARATIONS[name]
        extra = {"output_trust": entry.output_trust} if output_trust else {}
        specs.append(
            ToolSpec(
                name=name,
                side_effects=entry.side_effects,
                path_fields=entry.path_fields,
                required_path_fields=entry.path_fields,
                paths_as_written=entry.paths_as_written,
                **extra,
            )
        )
    return specs


def trusted_tools() -> frozenset[str]:
    """The tools whose output is declared trusted."""
    return frozenset(
        name for name, entry in DECLARATIONS.items() if entry.output_trust == "trusted"
    )


def effectful_tools() -> frozenset[str]:
    """The tools declared with a side effect other than reading a file."""
    return frozenset(
        name for name, entry in DECLARATIONS.items() if entry.side_effects - {"file_read"}
    )
