"""Webhook notifications: reviewers hear of a new approval request where they are.

A :class:`Webhook` POSTs a short JSON summary of each request the approval inbox files
to a URL — a chat's incoming webhook (``slack=True`` for Slack and the chats that read
its format), a pager, or a receiver of your own. Calling it returns at once and
delivers in a background thread, so an agent never waits on a webhook;
:meth:`Webhook.deliver` does the same synchronously and raises on failure.

The body (``Content-Type: application/json``) holds the request's summary and never its
arguments or the provenance of their values unless ``include_arguments=True``::

    {
      "event": "approval_requested",
      "request_id": "3f9a...",                    # 32 hex digits
      "tool": "run_command",
      "action_digest": "sha256:...",              # what an approval must name
      "reasons": ["run_command needs explicit approval"],
      "requester": {"actor_id": ..., "task_id": ..., "framework": ..., "session_id": ...,
                    "call_id": ..., "host": ..., "process_id": ...},
      "required": 1,                              # distinct reviewers who must approve
      "state": "pending",
      "created_at": "2026-01-31T12:00:00.000000Z",
      "expires_at": "2026-01-31T12:15:00.000000Z",
      "url": "https://jevqueue.example.com/requests/3f9a..."   # null without page_url
      # with include_arguments=True only:
      "arguments": {...}, "context": {...}, "provenance": [...] | null
    }

Every delivery carries ``X-Jevqueue-Event: approval_requested`` and
``X-Jevqueue-Delivery`` (one random id per notification, the same on each retry, so a
receiver can drop a repeat). With a ``secret`` it also carries::

    X-Jevqueue-Signature: t=<unix seconds>,v1=<hex>

where ``v1`` is ``HMAC-SHA256(key=secret, message=f"{t}.{delivery}.".encode() +
raw_body)`` in lowercase hex, ``delivery`` being the ``X-Jevqueue-Delivery`` header (so
that a captured post replayed under another delivery id does not verify); the secret is
used as its UTF-8 bytes. To verify, a receiver reads the
raw body before parsing it, recomputes ``v1`` with its copy of the secret, compares the
two in constant time (``hmac.compare_digest``) and refuses a ``t`` more than five
minutes from its own clock (each retry is signed afresh, so a late retry still
verifies)::

    fields = dict(part.split("=", 1) for part in header.split(","))
    signed = f"{fields['t']}.{delivery}.".encode() + body
    expected = hmac.new(secret, signed, "sha256").hexdigest()
    ok = hmac.compare_digest(expected, fields["v1"]) and abs(time.time() - int(fields["t"])) <= 300

Failures: a refused or broken connection, a timeout, HTTP 429 (waiting as long as its
``Retry-After`` seconds say, at most a minute) and HTTP 5xx are retried with exponential
backoff and jitter; any other answer that is not 2xx — a 4xx, a redirect, which is
never followed — and a TLS certificate that does not verify are not. A notification
that fails for good logs one warning on the ``jevqueue.approvals`` logger naming the
request and the last failure; it never raises into the agent.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import json
import logging
import random
import re
import ssl
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from jevqueue.approvals._inbox_request import InboxRequest
from jevqueue.approvals._record import format_timestamp
from jevqueue.errors import ConfigurationError, WebhookDeliveryError

if TYPE_CHECKING:  # pragma: no cover
    from email.message import Message

__all__ = ["EVENT", "Webhook"]

EVENT = "approval_requested"
"""The event name of the body and of the ``X-Jevqueue-Event`` header."""

SIGNATURE_HEADER = "X-Jevqueue-Signature"

_logger = logging.getLogger("jevqueue.approvals")

_MAX_ATTEMPTS = 20
_MAX_BACKOFF = 60.0
_MAX_TIMEOUT = 300.0
_DELAY_LIMIT = 60.0  # no single wait between two attempts is longer
_RETRY_AFTER_LIMIT = 60.0  # a server asking for a longer pause gets this one
_IN_FLIGHT_LIMIT = 64  # background deliveries at once; beyond it a notification is dropped
_MIN_SECRET_BYTES = 16
_EXCERPT = 200  # characters of a failed answer's body quoted in messages
_SLACK_PIECE = 1500  # characters of one Slack text piece (Slack's limits are 2000-3000)
_LOOPBACK_NAMES = frozenset({"localhost"})
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SECONDS = re.compile(r"[0-9]{1,9}")


class _Failure(Exception):
    """One failed attempt: what happened, and whether another attempt may succeed."""

    def __init__(
        self,
        what: str,
        *,
        retry: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(what)
        self.what = what
        self.retry = retry
        self.status = status
        self.retry_after = retry_after


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as the failure it is: the body is never re-sent elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Webhook:
    """Notifies a URL of each approval request the inbox files (see the module docstring).

    Pass it as ``notify=`` to :class:`~jevqueue.approvals.InboxApprover`, or call it with
    an :class:`~jevqueue.approvals.InboxRequest`: the call returns at once and the POST
    runs in a daemon thread. :meth:`close` (or leaving a ``with`` block) waits for the
    deliveries still running, up to a bound.

    Args:
        url: Where to POST: ``https://...``, or ``http://`` to this machine only
            (127.0.0.0/8, ::1, ``localhost``).
        page_url: The base URL of ``jevqueue serve``; the body then links to the
            request's page, ``{page_url}/requests/{id}``. Same rules as ``url``.
        slack: Send a Slack incoming-webhook body (``text`` and ``blocks``) instead of
            the JSON summary.
        include_arguments: Also send the exact arguments, the context and where each
            value came from. Off by default: the webhook's receiver and everyone who reads
            its channel would see them.
        secret: Sign each delivery with HMAC-SHA256 (at least 16 bytes; ``str`` is used
            as UTF-8).
        attempts: How many times to try one notification (1 to 20).
        backoff: Seconds before the first retry (more than 0, at most 60); each retry
            waits about twice as long as the last, with jitter, at most a minute.
        timeout: Seconds to wait for the connection and for each read of the answer
            (more than 0, at most 300).

    Raises:
        ConfigurationError: a URL that is not ``https://`` (or ``http://`` to this
            machine), or impossible ``attempts``, ``backoff``, ``timeout`` or ``secret``.
    """

    def __init__(
        self,
        url: str,
        *,
        page_url: str | None = None,
        slack: bool = False,
        include_arguments: bool = False,
        secret: str | bytes | None = None,
        attempts: int = 5,
        backoff: float = 1.0,
        timeout: float = 10.0,
    ) -> None:
        self.url = _checked_url(url, "url")
        self.page_url = None if page_url is None else _checked_url(page_url, "page_url")
        if page_url is not None and (urlsplit(page_url).query or urlsplit(page_url).fragment):
            raise ConfigurationError(
                f"page_url {_where(page_url)} has a query or fragment: give the base URL "
                "of `jevqueue serve` (request pages are {page_url}/requests/{id})"
            )
        for name, flag in (("slack", slack), ("include_arguments", include_arguments)):
            if type(flag) is not bool:
                raise ConfigurationError(f"{name} must be True or False, not {flag!r}")
        self.slack = slack
        self.include_arguments = include_arguments
        self._secret = _checked_secret(secret)
        if type(attempts) is not int or not 1 <= attempts <= _MAX_ATTEMPTS:
            raise ConfigurationError(
                f"attempts={attempts!r}: give how many times to try one notification, "
                f"an integer from 1 to {_MAX_ATTEMPTS}"
            )
        self.attempts = attempts
        self.backoff = _checked_seconds(backoff, "backoff", _MAX_BACKOFF, "before the first retry")
        self.timeout = _checked_seconds(timeout, "timeout", _MAX_TIMEOUT, "to wait for an answer")
        self.where = _where(self.url)
        """Where notifications go, for messages: the scheme and host, never the path
        (a chat's webhook URL holds its secret in the path)."""
        handlers: list[Any] = [
            _RefuseRedirects(),
            urllib.request.HTTPSHandler(context=ssl.create_default_context()),
        ]
        if _is_loopback(urlsplit(self.url).hostname or ""):
            handlers.append(urllib.request.ProxyHandler({}))  # this machine, never a proxy
        self._opener = urllib.request.build_opener(*handlers)
        self._lock = threading.Lock()
        self._running: set[threading.Thread] = set()
        self._closed = False

    def __repr__(self) -> str:
        return f"Webhook({self.where}, slack={self.slack}, signed={self._secret is not None})"

    # --- notifying ---------------------------------------------------------------------------

    def __call__(self, request: InboxRequest) -> None:
        """Notify about ``request`` in a background thread; return at once.

        A notification that fails for good, or cannot start (the webhook is closed, or
        64 deliveries are already running), logs one warning and is dropped.

        Raises:
            ConfigurationError: ``request`` is not an :class:`InboxRequest`.
        """
        body = self.body(request)
        with self._lock:
            if self._closed:
                _logger.warning(
                    "webhook %s did not notify about approval request %s: it is closed; "
                    "give the approver a webhook that is not",
                    self.where,
                    request.request_id,
                )
                return
            if len(self._running) >= _IN_FLIGHT_LIMIT:
                _logger.warning(
                    "webhook %s dropped the notification about approval request %s: %d "
                    "deliveries are still running; check that the receiver answers",
                    self.where,
                    request.request_id,
                    len(self._running),
                )
                return
            thread = threading.Thread(
                target=self._deliver_in_background,
                args=(request.request_id, body),
                name=f"jevqueue-webhook-{request.request_id[:8]}",
                daemon=True,
            )
            self._running.add(thread)
        try:
            thread.start()
        except RuntimeError as error:  # the interpreter is shutting down, or out of threads
            with self._lock:
                self._running.discard(thread)
            _logger.warning(
                "webhook %s did not notify about approval request %s: %s",
                self.where,
                request.request_id,
                error,
            )

    def deliver(self, request: InboxRequest) -> int:
        """Notify about ``request`` now, retrying as configured; return the HTTP status.

        Raises:
            ConfigurationError: ``request`` is not an :class:`InboxRequest`.
            WebhookDeliveryError: every attempt failed, or one failed in a way no retry
                mends (a 4xx other than 429, a redirect, a certificate that does not
                verify).
        """
        return self._send(request.request_id, self.body(request))

    def body(self, request: InboxRequest) -> bytes:
        """The exact bytes POSTed about ``request`` (UTF-8 JSON).

        Raises:
            ConfigurationError: ``request`` is not an :class:`InboxRequest`.
        """
        if not isinstance(request, InboxRequest):
            raise ConfigurationError(
                f"a webhook notifies about the InboxRequest the inbox filed, not "
                f"{type(request).__name__}: call it with what ApprovalInbox.file() returned"
            )
        document = _slack_body(self._summary(request)) if self.slack else self._summary(request)
        return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def close(self, timeout: float = 30.0) -> bool:
        """Refuse new notifications and wait up to ``timeout`` seconds for running ones.

        Returns:
            True when every delivery finished; False when some still run (they go on in
            their daemon threads, and end with the process).
        """
        with self._lock:
            self._closed = True
            running = list(self._running)
        deadline = time.monotonic() + max(0.0, timeout)
        for thread in running:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            return not any(thread.is_alive() for thread in self._running)

    def __enter__(self) -> Webhook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the summary ------------------------------------------------------------------------

    def _summary(self, request: InboxRequest) -> dict[str, Any]:
        document = request.request
        summary: dict[str, Any] = {
            "event": EVENT,
            "request_id": request.request_id,
            "tool": request.tool,
            "action_digest": request.action_digest,
            "reasons": [str(reason) for reason in document.get("reasons") or []],
            "requester": request.requester.to_dict(),
            "required": request.required,
            "state": request.state.value,
            "created_at": format_timestamp(request.created_at),
            "expires_at": format_timestamp(request.expires_at),
            "url": None
            if self.page_url is None
            else f"{self.page_url.rstrip('/')}/requests/{request.request_id}",
        }
        if self.include_arguments:
            # the stored request is JSON already; a copy keeps the read-only mapping out
            full = json.loads(json.dumps(dict(document)))
            summary["arguments"] = full.get("arguments")
            summary["context"] = full.get("context")
            summary["provenance"] = full.get("provenance")
        return summary

    # --- delivering -------------------------------------------------------------------------

    def _deliver_in_background(self, request_id: str, body: bytes) -> None:
        try:
            self._send(request_id, body)
        except WebhookDeliveryError as error:
            _logger.warning("%s", error)
        except Exception as error:  # a background thread has nobody to raise to
            _logger.warning(
                "webhook %s could not notify about approval request %s: %s: %s",
                self.where,
                request_id,
                type(error).__name__,
                error,
            )
        finally:
            with self._lock:
                self._running.discard(threading.current_thread())

    def _send(self, request_id: str, body: bytes) -> int:
        delivery = uuid.uuid4().hex
        last = _Failure("no attempt was made", retry=False)
        attempt = 0
        while attempt < self.attempts:
            attempt += 1
            try:
                return self._post(body, delivery)
            except _Failure as failure:
                last = failure
            if not last.retry or attempt == self.attempts:
                break
            pause = last.retry_after if last.retry_after is not None else self._pause(attempt)
            _logger.debug(
                "webhook %s, approval request %s: attempt %d of %d failed (%s); retrying in %.2f s",
                self.where,
                request_id,
                attempt,
                self.attempts,
                last.what,
                pause,
            )
            time.sleep(pause)
        tried = f"after {attempt} attempt{'s' if attempt > 1 else ''}"
        advice = (
            "check that the receiver is up and answers 2xx"
            if last.retry
            else "not retried: fix the webhook's URL or the receiver"
        )
        raise WebhookDeliveryError(
            f"webhook {self.where} could not notify about approval request {request_id} "
            f"{tried}: {last.what}; {advice}",
            request_id=request_id,
            status=last.status,
            attempts=attempt,
        )

    def _pause(self, attempt: int) -> float:
        """Exponential backoff with jitter: half to all of ``backoff * 2**(attempt-1)``."""
        ceiling = min(self.backoff * 2.0 ** (attempt - 1), _DELAY_LIMIT)
        return ceiling * (0.5 + random.random() / 2)  # jitter: no need for a secret source

    def _post(self, body: bytes, delivery: str) -> int:
        """One attempt; the status of a 2xx answer, else raise :class:`_Failure`."""
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": "jevqueue-webhook",
            "X-Jevqueue-Event": EVENT,
            "X-Jevqueue-Delivery": delivery,
        }
        if self._secret is not None:
            headers[SIGNATURE_HEADER] = _signature(self._secret, int(time.time()), delivery, body)
        outgoing = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with self._opener.open(outgoing, timeout=self.timeout) as answer:
                status = int(answer.status)
                answer.read(65536)  # let the receiver finish writing before we hang up
                return status
        except urllib.error.HTTPError as error:
            raise _answered(error) from None
        except urllib.error.URLError as error:
            reason = error.reason
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise _Failure(
                    f"its TLS certificate did not verify ({reason.verify_message})", retry=False
                ) from None
            if isinstance(reason, BaseException) and _timed_out(reason):
                raise _Failure(f"no answer within {self.timeout:g} s", retry=True) from None
            raise _Failure(f"could not connect ({_text(str(reason))})", retry=True) from None
        except http.client.HTTPException as error:
            raise _Failure(
                f"the connection broke ({type(error).__name__}: {_text(str(error))})", retry=True
            ) from None
        except OSError as error:
            if _timed_out(error):
                raise _Failure(f"no answer within {self.timeout:g} s", retry=True) from None
            raise _Failure(
                f"the connection failed ({type(error).__name__}: {_text(str(error))})", retry=True
            ) from None


# --- answers --------------------------------------------------------------------------------


def _answered(error: urllib.error.HTTPError) -> _Failure:
    """The failure an HTTP answer that is not 2xx stands for."""
    status = int(error.code)
    try:
        excerpt = _text(error.read(_EXCERPT * 4).decode("utf-8", "replace"))[:_EXCERPT]
    except (OSError, http.client.HTTPException):
        excerpt = ""
    finally:
        error.close()
    said = f"HTTP {status}" + (f" {_text(str(error.reason))}" if error.reason else "")
    said += f": {excerpt!r}" if excerpt else ""
    if status == 429:
        return _Failure(said, retry=True, status=status, retry_after=_retry_after(error.headers))
    if status >= 500:
        return _Failure(said, retry=True, status=status)
    if 300 <= status < 400:
        return _Failure(
            f"{said} (a redirect, never followed: give the URL it points to)",
            retry=False,
            status=status,
        )
    return _Failure(said, retry=False, status=status)


def _retry_after(headers: Message | None) -> float | None:
    """``Retry-After`` in seconds, at most a minute; ``None`` when absent or a date."""
    value = headers.get("Retry-After") if headers is not None else None
    if not isinstance(value, str) or not _SECONDS.fullmatch(value.strip()):
        return None
    return min(float(value.strip()), _RETRY_AFTER_LIMIT)


def _timed_out(error: BaseException) -> bool:
    return isinstance(error, TimeoutError) or "timed out" in str(error)


def _signature(secret: bytes, timestamp: int, delivery: str, body: bytes) -> str:
    mac = hmac.new(secret, f"{timestamp}.{delivery}.".encode("ascii") + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


# --- Slack --------------------------------------------------------------------------------


def _slack_body(summary: dict[str, Any]) -> dict[str, Any]:
    """A Slack incoming-webhook body: ``text`` for notifications, ``blocks`` to read."""
    tool = _mrkdwn(summary["tool"])
    requester = summary["requester"]
    asked_by = _mrkdwn(_asked_by(requester))
    link = summary["url"]
    short_id = summary["request_id"][:12]
    opened = f" <{link}|Open request {short_id}>" if link else f" (request {short_id})"
    text = f"Approval requested: `{tool}` by {asked_by}.{opened}"
    reasons = summary["reasons"] or ["the policy requires an explicit approval"]
    blocks: list[dict[str, Any]] = [
        _section(f"*Approval requested* for `{tool}`"),
        {
            "type": "section",
            "fields": [
                _mrkdwn_text(f"*Asked by*\n{asked_by}"),
                _mrkdwn_text(f"*Request*\n`{summary['request_id']}`"),
                _mrkdwn_text(f"*Expires*\n{_mrkdwn(_moment(summary['expires_at']))}"),
                _mrkdwn_text(
                    f"*Needs*\n{summary['required']} approval"
                    f"{'s' if summary['required'] > 1 else ''}"
                ),
            ],
        },
        _section("*Why*\n" + "\n".join(f"• {_mrkdwn(reason)}" for reason in reasons)),
        _section(f"*Action digest*\n`{summary['action_digest']}`"),
    ]
    if "arguments" in summary:
        arguments = json.dumps(summary["arguments"], indent=2, sort_keys=True, ensure_ascii=False)
        blocks.append(_section(f"*Arguments*\n```{_mrkdwn(arguments)}```"))
        origins = [
            str(origin.get("says", "")) for origin in summary.get("provenance") or [] if origin
        ]
        if origins:
            blocks.append(
                _section(
                    "*Where the values came from*\n"
                    + "\n".join(f"• {_mrkdwn(says)}" for says in origins)
                )
            )
    if link:
        blocks.append(_section(f"<{link}|Open request {short_id}> to approve or deny it"))
    else:
        blocks.append(
            _section(f"Decide with `jevqueue approvals show {short_id}`, then `approve` or `deny`")
        )
    return {"text": text, "blocks": blocks}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn_text(text)}


def _mrkdwn_text(text: str) -> dict[str, Any]:
    if len(text) > _SLACK_PIECE:
        text = text[: _SLACK_PIECE - 1] + "…"
        if text.count("```") % 2:  # a code block cut short still closes
            text += "```"
    return {"type": "mrkdwn", "text": text}


def _mrkdwn(value: str) -> str:
    """Text safe inside Slack mrkdwn: ``&<>`` escaped (Slack's own rule), controls removed."""
    text = _UNPRINTABLE.sub(lambda match: "\n" if match.group() == "\n" else "", str(value))
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _asked_by(requester: dict[str, Any]) -> str:
    where = [
        f"{label} {requester[key]}"
        for label, key in (("task", "task_id"), ("via", "framework"), ("session", "session_id"))
        if requester.get(key)
    ]
    return str(requester["actor_id"]) + (f" ({', '.join(where)})" if where else "")


def _moment(stamp: str) -> str:
    """``2026-01-31T12:15:00.000000Z`` as ``2026-01-31 12:15:00 UTC``."""
    return stamp[:19].replace("T", " ") + " UTC"


# --- configuration --------------------------------------------------------------------------


def _checked_url(url: Any, name: str) -> str:
    if not isinstance(url, str) or not url:
        raise ConfigurationError(f"{name} must be a URL string, https://host/path")
    if _UNPRINTABLE.search(url) or any(char in url for char in " <>|\"'`"):
        raise ConfigurationError(
            f"{name} {_where(url)} holds spaces, quotes, control characters or <>|: "
            "percent-encode them"
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - reading it checks it
    except ValueError as error:
        raise ConfigurationError(
            f"{name} is not a URL ({error}): write https://host/path"
        ) from None
    scheme, host = parts.scheme.lower(), parts.hostname or ""
    if scheme not in ("http", "https") or not host:
        raise ConfigurationError(
            f"{name} {_where(url)} is not an http(s) URL with a host: write https://host/path"
        )
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            f"{name} {_where(url)} carries a user name or password: drop them (put a token "
            "in the path the receiver gives you, and sign deliveries with secret=)"
        )
    if scheme == "http" and not _is_loopback(host):
        raise ConfigurationError(
            f"{name} {_where(url)} is plain http to another machine: use https:// (plain "
            "http is only for this machine: 127.0.0.0/8, ::1 or localhost)"
        )
    return url


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _checked_seconds(value: Any, name: str, most: float, what: str) -> float:
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not 0 < value <= most  # NaN fails this too
    ):
        raise ConfigurationError(
            f"{name}={value!r}: give the seconds {what}, more than 0 and at most {most:g}"
        )
    return float(value)


def _checked_secret(secret: Any) -> bytes | None:
    if secret is None:
        return None
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    if not isinstance(secret, bytes) or len(secret) < _MIN_SECRET_BYTES:
        raise ConfigurationError(
            f"secret must be text or bytes of at least {_MIN_SECRET_BYTES} bytes, shared with "
            "the receiver: make one with `python -c 'import secrets; print(secrets.token_hex(32))'`"
        )
    return secret


def _where(url: str) -> str:
    """The scheme and host of ``url``, for messages: never its path, query or password."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "(no host)"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(not a URL)"
    shown = f"{parts.scheme}://{'[' + host + ']' if ':' in host else host}{port}"
    return _text(shown)


def _text(value: str) -> str:
    """One line of text with control and direction characters removed, for messages."""
    return _UNPRINTABLE.sub(" ", value).strip()
