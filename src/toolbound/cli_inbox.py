"""The service's inbox from a terminal or a script: ``pending``, ``decide``, ``edit`` (R7).

::

    toolbound pending [--url URL] [--api-key-env NAME] [--json]
    toolbound decide ID --approve|--deny --digest DIGEST [--reason TEXT] [--json]
    toolbound edit ID --digest DIGEST --arguments JSON|@FILE --approve [--json]

They talk to a running ``toolbound serve`` through :mod:`toolbound.client`
(``/v1/confirmations`` and ``/v1/invocations/{id}/decision``), as the principal whose
API key is in the environment variable ``--api-key-env`` (default
``TOOLBOUND_API_KEY``): never in argv, where other users of the machine could read it,
and never printed. The URL is ``--url``, else ``TOOLBOUND_URL``, else the service's
default address.

A refusal is printed as the problem's code and detail (under ``--json``, the problem
document itself on standard output) and ends the command with status 1; a service that
cannot be reached ends it with status 4. docs/cli.md has the documents and the one
table of exit statuses.

This module needs the ``cli`` and ``http`` extras; the top command checks the second
before any of these commands runs.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn

import click
from rich.table import Table
from rich.text import Text

from toolbound._errors import Rejection
from toolbound._output import command_console, emit_json
from toolbound.gates.parse import ParseLimits, parse_arguments

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from rich.console import Console

    from toolbound.client import Client, Invocation, ServiceError

__all__ = ["DEFAULT_URL", "KEY_ENV", "URL_ENV", "decide", "edit", "pending"]

URL_ENV = "TOOLBOUND_URL"
KEY_ENV = "TOOLBOUND_API_KEY"
DEFAULT_URL = "http://127.0.0.1:8780"
"""Where ``toolbound serve`` listens when its file does not say."""

REFUSED = 1
"""The service refused: its problem's code and detail are printed."""
DID_NOT_SUCCEED = 3
"""Approved (or edited and approved), but the call's outcome is not ``observed``."""
UNREACHABLE = 4
"""No answer from the service, after the client's retries."""


def _remote(func: Callable[..., object]) -> Callable[..., object]:
    """The options every inbox command takes: where the service is, and who asks."""
    options = [
        click.option(
            "--url",
            envvar=URL_ENV,
            show_envvar=True,
            default=DEFAULT_URL,
            show_default=True,
            help="The service's base URL.",
        ),
        click.option(
            "--api-key-env",
            "key_env",
            default=KEY_ENV,
            show_default=True,
            metavar="NAME",
            help="The environment variable holding your API key "
            "(never taken from the command line, never printed).",
        ),
        click.option(
            "--timeout",
            default=120.0,
            show_default=True,
            help="Seconds to wait for an answer (an approved call runs before it comes).",
        ),
        click.option(
            "--json",
            "as_json",
            is_flag=True,
            help="Print one JSON document for a script (its shape: docs/cli.md).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.command()
@_remote
def pending(*, url: str, key_env: str, timeout: float, as_json: bool) -> None:
    """List the calls of your tenant waiting for a person in the service's inbox.

    Every digest is printed whole, on its own line when piped: copy it into
    ``toolbound decide``. Exits 0 whether or not calls wait, 1 when the service
    refuses, 4 when it cannot be reached.
    """
    with _service(url, key_env, timeout, as_json=as_json) as client:
        calls = client.pending()
    rows = [_pending_fields(call) for call in calls]
    if as_json:
        emit_json({"confirmations": rows})
        return
    out = command_console()
    for row in rows:
        _print_pending(out, row)
    out.print(f"{len(rows)} call(s) waiting for a person")


@click.command()
@click.argument("invocation_id")
@click.option(
    "--approve/--deny",
    "approve",
    default=None,
    help="Approve the call (it runs now, once) or deny it. One is required.",
)
@click.option("--digest", required=True, help="The digest you reviewed (from `pending`).")
@click.option("--reason", default=None, help="With --deny: why, told to the model.")
@_remote
def decide(
    *,
    invocation_id: str,
    approve: bool | None,
    digest: str,
    reason: str | None,
    url: str,
    key_env: str,
    timeout: float,
    as_json: bool,
) -> None:
    """Approve or deny one parked call, bound to the digest you reviewed.

    Exits 0 once the decision is recorded (an approved call has run, or the surface
    that parked it will run it), 1 when the service refuses it, 3 when an approved
    call did not succeed, 4 when the service cannot be reached.
    """
    if approve is None:
        msg = "say --approve or --deny"
        raise click.UsageError(msg)
    if approve and reason is not None:
        msg = "--reason goes with --deny: it is told to the model"
        raise click.UsageError(msg)
    with _service(url, key_env, timeout, as_json=as_json) as client:
        answer = client.decide(invocation_id, digest=digest, approve=approve, reason=reason)
    verb = "approved" if approve else "denied"
    sys.exit(_report(answer.raw, f"{verb} {invocation_id}", approved=approve, as_json=as_json))


@click.command()
@click.argument("invocation_id")
@click.option("--digest", required=True, help="The digest of the call you reviewed.")
@click.option(
    "--arguments",
    "arguments",
    required=True,
    metavar="JSON|@FILE",
    help="The corrected arguments as JSON text, or @FILE to read them (@- for stdin).",
)
@click.option(
    "--approve",
    is_flag=True,
    help="Required: the service runs the corrected call as approved by you.",
)
@_remote
def edit(
    *,
    invocation_id: str,
    digest: str,
    arguments: str,
    url: str,
    key_env: str,
    timeout: float,
    approve: bool,
    as_json: bool,
) -> None:
    """Correct a parked call's arguments and approve the corrected call.

    The corrected call is a new invocation in the parked one's place, through every
    gate again; the parked one never runs. Exit statuses as ``decide``.
    """
    if not approve:
        msg = "an edit approves the corrected call: add --approve to run it as approved by you"
        raise click.UsageError(msg)
    text = _argument_text(arguments)
    _check_parses(text)
    with _service(url, key_env, timeout, as_json=as_json) as client:
        answer = client.edit(invocation_id, digest=digest, arguments=text)
    what = f"edited {invocation_id}"
    if not answer.handed_over:  # run here: the corrected call is its own invocation
        what += f" → {answer.invocation_id}"
    sys.exit(_report(answer.raw, what, approved=True, as_json=as_json))


@contextmanager
def _service(url: str, key_env: str, timeout: float, *, as_json: bool) -> Iterator[Client]:
    """A client as the principal in ``$key_env``; a refusal or no answer ends the command."""
    import httpx  # noqa: PLC0415 - the http extra, checked before the command runs

    from toolbound.client import (  # noqa: PLC0415
        Client,
        ServiceError,
        ServiceUnreachableError,
    )

    if not url.startswith(("http://", "https://")):
        msg = f"{url!r} is not an http:// or https:// URL"
        raise click.BadParameter(msg, param_hint="--url")
    key = os.environ.get(key_env, "").strip()
    if not key:
        msg = f"set ${key_env} to your API key (it is never taken from the command line)"
        raise click.UsageError(msg)
    try:
        client = Client(url, api_key=key, timeout=timeout)
    except httpx.InvalidURL as exc:
        msg = f"--url {url!r} is not a URL: {exc}"
        raise click.BadParameter(msg, param_hint="--url") from None
    with client:
        try:
            yield client
        except ServiceError as exc:
            _refused(exc, as_json=as_json)
        except ServiceUnreachableError as exc:
            click.echo(f"Error: cannot reach the service at {url}: {exc}", err=True)
            sys.exit(UNREACHABLE)


def _refused(exc: ServiceError, *, as_json: bool) -> NoReturn:
    """The service's problem: its code and detail on stderr, the document under --json."""
    line = f"{exc.code}: {exc.detail}"
    if exc.hint:
        line += f" ({exc.hint})"
    click.echo(f"Error: {line}", err=True)
    if as_json:
        problem = dict(exc.problem) or {
            "status": exc.status,
            "code": exc.code,
            "detail": exc.detail,
        }
        emit_json(problem)
    sys.exit(REFUSED)


def _report(answer: Mapping[str, object], what: str, *, approved: bool, as_json: bool) -> int:
    """Print a decision's answer; the exit status it calls for."""
    status = decision_status(answer, approved=approved)
    if as_json:
        emit_json(answer)
        return status
    out = command_console()
    if answer.get("handed_over") is True:
        surface = answer.get("surface") or "the surface that parked it"
        out.print(Text(f"{what}: handed over to {surface}, which runs it"))
        return status
    out.print(Text(f"{what}: {answer.get('status')} ({answer.get('state')})"))
    if approved and answer.get("digest"):
        out.print(Text(f"digest {answer.get('digest')}"))
    problem = answer.get("problem")
    if isinstance(problem, dict) and problem.get("code"):
        said = problem.get("message") or problem.get("detail") or ""
        out.print(Text(f"problem {problem.get('code')}: {said}"))
    message = answer.get("message")
    if isinstance(message, dict):
        out.print(Text(f"to the model {message.get('content', '')}"))
    return status


def decision_status(answer: Mapping[str, object], *, approved: bool) -> int:
    """The exit status of a recorded decision whose answer is ``answer``.

    A denial is done (0). An approval is done when the call ran and succeeded, or when
    the service handed the decision over to the surface that parked the call (``202``,
    ``"handed_over": true``), which runs it there; otherwise the call did not succeed (3).
    """
    if not approved or answer.get("handed_over") is True:
        return 0
    return 0 if answer.get("status") == "observed" else DID_NOT_SUCCEED


def _argument_text(value: str) -> str:
    """``--arguments``: the text itself, or ``@FILE``'s content (``@-``: standard input)."""
    if not value.startswith("@"):
        return value
    name = value[1:]
    try:
        if name == "-":
            return sys.stdin.read()
        with open(name, encoding="utf-8") as file:  # noqa: PTH123 - a plain read
            return file.read()
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"cannot read {name}: {exc}"
        raise click.BadParameter(msg, param_hint="--arguments") from None


def _check_parses(text: str) -> None:
    """Refuse, before anything is sent, corrected arguments the parse gate would refuse.

    The service refuses such text too (422, nothing decided); the same strict parser
    here (no size or depth limit: those are the runtime's to apply) stops it at the
    command line without a round trip, and the call still waits.
    """
    try:
        parse_arguments(text.encode("utf-8", "surrogatepass"), _SYNTAX_ONLY)
    except Rejection as refused:
        problem = refused.problem
        msg = f"{problem.code}: {problem.message} (nothing was sent; the call still waits)"
        raise click.BadParameter(msg, param_hint="--arguments") from None


_SYNTAX_ONLY = ParseLimits(max_bytes=1 << 62, max_depth=1 << 16)


def _pending_fields(call: Invocation) -> dict[str, object]:
    """One parked call as ``pending --json`` prints it."""
    raw = call.raw
    asked = raw.get("confirmation")
    asked = asked if isinstance(asked, dict) else {}
    subject = asked.get("subject")
    subject = subject if isinstance(subject, dict) else {}
    return {
        "invocation_id": call.invocation_id,
        "tool": call.tool,
        "digest": call.digest,
        "subject": subject.get("id", call.subject),
        "tenant": subject.get("tenant"),
        "reason": asked.get("reason"),
        "arguments": asked.get("arguments"),
        "requested_at": asked.get("requested_at", raw.get("created_at")),
        "expires_at": asked.get("expires_at"),
        "surface": raw.get("surface"),
        "decidable": raw.get("decidable"),
    }


def _print_pending(out: Console, row: Mapping[str, object]) -> None:
    """One parked call, a field a line; data are text, never console markup."""
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    fields: list[tuple[str, object]] = [
        ("invocation", row["invocation_id"]),
        ("tool", row["tool"]),
        ("subject", f"{row['subject']} ({row['tenant']})"),
    ]
    if row["surface"] is not None:
        fields.append(("surface", row["surface"]))
    if row["decidable"] is False:
        fields.append(("decidable", f"no: decide it where it was parked ({row['surface']})"))
    fields += [
        ("reason", row["reason"]),
        ("arguments", json.dumps(row["arguments"], ensure_ascii=False, sort_keys=True)),
        ("digest", row["digest"]),
        ("requested", row["requested_at"]),
        ("expires", row["expires_at"]),
    ]
    for key, value in fields:
        table.add_row(key, Text(str(value)))
    out.print(table)
    out.print()
