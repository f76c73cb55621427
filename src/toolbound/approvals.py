"""Approved tool versions: which definition of each upstream tool a person trusted.

The MCP gateway serves an upstream tool only while the tool's current definition has
the digest that was approved (:func:`toolbound.mcp.upstream.definition_digest`). When
the upstream changes a definition, the digests differ and the tool is quarantined —
neither listed nor callable — until a person approves the new version.

The approvals live in a small JSON file beside the configuration file, not in the
ledger's database. An approval is configuration, not call history: it is reviewed,
diffed and deployed like the configuration it sits next to, it holds for every
store (memory, SQLite, PostgreSQL) alike, and it needs no migration of the ledger's
schema. The file is rewritten atomically (a temporary file renamed over it) under
an advisory lock, and a running gateway rereads it when it changes, so an approval
given elsewhere (``toolbound mcp-gateway review``, the service's console) takes
effect without a restart.

Beside each approved definition the file keeps every quarantined one — the
definition the upstream lists now, which a person has not approved — so another
process can show a person both and the difference between them::

    {"format": 1,
     "tools": {"git.git_commit": {"digest": "sha256:…",
       "approved_by": "mira", "approved_at": "2026-07-19T06:00:00+00:00",
       "definition": {…the definition that was approved…}}},
     "quarantined": {"git.git_commit": {"digest": "sha256:…", "upstream": "git",
       "seen_at": "2026-07-20T08:00:00+00:00", "reason": "…",
       "definition": {…the definition waiting for a person…}}}}

An approval always names a digest: approving a quarantined definition by the digest a
person was shown approves that definition only, so one that changed again in between
stays quarantined (:class:`ToolVersionMismatch`).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

from toolbound._errors import ConfigurationError, ToolboundError

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["Approval", "ApprovalStore", "Quarantined", "ToolVersionMismatch"]

_FORMAT = 1


class ToolVersionMismatch(ToolboundError):  # noqa: N818 - names the event
    """An approval named a digest that is not the tool's current definition."""

    code = "version_mismatch"


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """One approved tool version: its digest, who approved it and when, and what it was."""

    digest: str
    approved_by: str
    approved_at: datetime
    definition: Mapping[str, object] = field(default_factory=dict, hash=False)

    def as_json(self) -> dict[str, object]:
        """The approval as the file keeps it."""
        return {
            "digest": self.digest,
            "approved_by": self.approved_by,
            "approved_at": self.approved_at.isoformat(),
            "definition": dict(self.definition),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Quarantined:
    """A definition an upstream lists that no person has approved: not served."""

    name: str
    """The name the tool is served under once approved."""
    upstream: str
    digest: str
    reason: str
    seen_at: datetime
    """When the gateway first saw this definition (this digest)."""
    definition: Mapping[str, object] = field(default_factory=dict, hash=False)

    def as_json(self) -> dict[str, object]:
        """The quarantined definition as the file keeps it."""
        return {
            "digest": self.digest,
            "upstream": self.upstream,
            "reason": self.reason,
            "seen_at": self.seen_at.isoformat(),
            "definition": dict(self.definition),
        }


@dataclass(slots=True)
class _File:
    tools: dict[str, Approval] = field(default_factory=dict)
    quarantined: dict[str, Quarantined] = field(default_factory=dict)


class ApprovalStore:
    """The approvals file: read on demand, reread when it changes, written atomically."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._seen: tuple[int, int] | None = None
        self._file = _File()

    def get(self, name: str) -> Approval | None:
        """The approval of the tool served as ``name``, if any."""
        self._reload()
        return self._file.tools.get(name)

    def all(self) -> dict[str, Approval]:
        """Every approval, by served tool name."""
        self._reload()
        return dict(self._file.tools)

    def quarantined(self) -> dict[str, Quarantined]:
        """Every definition waiting for a person, by served tool name."""
        self._reload()
        return dict(self._file.quarantined)

    def approve(
        self,
        name: str,
        *,
        digest: str,
        approver: str,
        definition: Mapping[str, object],
        at: datetime | None = None,
    ) -> Approval:
        """Record that ``approver`` trusts the definition of ``name`` with ``digest``."""
        approval = Approval(
            digest=digest,
            approved_by=approver,
            approved_at=at or datetime.now(UTC),
            definition=definition,
        )
        with self._locked():
            current = self._read()
            current.tools[name] = approval
            held = current.quarantined.get(name)
            if held is not None and held.digest == digest:
                del current.quarantined[name]
            self._write(current)
        return approval

    def approve_quarantined(
        self, name: str, *, digest: str, approver: str, at: datetime | None = None
    ) -> Approval:
        """Approve the quarantined definition of ``name`` a person was shown as ``digest``.

        Raises :class:`ToolVersionMismatch` when no definition of ``name`` waits, or
        the one waiting now has another digest (it changed since the person looked).
        """
        with self._locked():
            current = self._read()
            held = current.quarantined.get(name)
            if held is None:
                msg = f"no definition of {name!r} waits for an approval"
                raise ToolVersionMismatch(msg, code="unknown_tool")
            if held.digest != digest:
                msg = f"{name}'s current definition is {held.digest}, not {digest}"
                raise ToolVersionMismatch(msg)
            approval = Approval(
                digest=digest,
                approved_by=approver,
                approved_at=at or datetime.now(UTC),
                definition=held.definition,
            )
            current.tools[name] = approval
            del current.quarantined[name]
            self._write(current)
        return approval

    def hold(self, upstream: str, held: Iterable[Quarantined]) -> None:
        """Keep exactly ``held`` as ``upstream``'s quarantined definitions.

        Called after each listing of the upstream: a definition seen before keeps
        when it was first seen, and one the upstream no longer lists (or that is
        served again) is dropped. The file is written only when something changed.
        """
        wanted = {q.name: q for q in held}
        self._reload()
        if self._holds(upstream, wanted, self._file):
            return
        with self._locked():
            current = self._read()
            kept = {n: q for n, q in current.quarantined.items() if q.upstream != upstream}
            for name, new in wanted.items():
                old = current.quarantined.get(name)
                same = old is not None and old.upstream == upstream and old.digest == new.digest
                kept[name] = old if same and old is not None else new
            current.quarantined = kept
            self._write(current)

    @staticmethod
    def _holds(upstream: str, wanted: Mapping[str, Quarantined], file: _File) -> bool:
        mine = {n: q.digest for n, q in file.quarantined.items() if q.upstream == upstream}
        return mine == {n: q.digest for n, q in wanted.items()}

    # -- the file ---------------------------------------------------------------

    def _reload(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self._file = None, _File()
            return
        seen = (stat.st_mtime_ns, stat.st_size)
        if seen != self._seen:
            self._file = self._read()
            self._seen = seen

    def _read(self) -> _File:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return _File()
        try:
            document = json.loads(text)
            if document.get("format") != _FORMAT:
                msg = f"unknown format {document.get('format')!r}"
                raise ValueError(msg)  # noqa: TRY301 - one error path for a bad file
            tools = cast("dict[str, dict[str, object]]", document["tools"])
            held = cast("dict[str, dict[str, object]]", document.get("quarantined", {}))
            return _File(
                tools={
                    name: Approval(
                        digest=str(entry["digest"]),
                        approved_by=str(entry["approved_by"]),
                        approved_at=datetime.fromisoformat(str(entry["approved_at"])),
                        definition=_definition(entry),
                    )
                    for name, entry in tools.items()
                },
                quarantined={
                    name: Quarantined(
                        name=name,
                        upstream=str(entry["upstream"]),
                        digest=str(entry["digest"]),
                        reason=str(entry.get("reason", "")),
                        seen_at=datetime.fromisoformat(str(entry["seen_at"])),
                        definition=_definition(entry),
                    )
                    for name, entry in held.items()
                },
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # Never guess at approvals: a file that cannot be read approves nothing,
            # and the gateway refuses to start rather than trust every tool.
            msg = f"the approvals file {self.path} cannot be read: {exc}"
            raise ConfigurationError(msg, code="approvals_unreadable") from None

    def _write(self, file: _File) -> None:
        document: dict[str, object] = {
            "format": _FORMAT,
            "tools": {name: a.as_json() for name, a in sorted(file.tools.items())},
        }
        if file.quarantined:
            document["quarantined"] = {
                name: q.as_json() for name, q in sorted(file.quarantined.items())
            }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(document, f, indent=2, ensure_ascii=False)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            Path(tmp).replace(self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                Path(tmp).unlink()
            raise
        self._seen = None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An advisory lock, so two writers never lose each other's approvals."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_name(self.path.name + ".lock")
        with lock.open("a") as handle:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(handle, fcntl.LOCK_UN)


def _definition(entry: Mapping[str, object]) -> dict[str, object]:
    definition = entry.get("definition", {})
    if not isinstance(definition, dict):
        msg = "a definition is not an object"
        raise TypeError(msg)
    return cast("dict[str, object]", definition)
