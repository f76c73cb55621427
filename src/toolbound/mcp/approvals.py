"""Approved tool versions: which definition of each upstream tool a person trusted.

A gateway serves an upstream tool only while the tool's current definition has the
digest that was approved (:func:`toolbound.mcp.upstream.definition_digest`). When the
upstream changes a definition, the digests differ and the tool is quarantined —
neither listed nor callable — until a person approves the new version.

The approvals live in a small JSON file beside the configuration file, not in the
ledger's database. An approval is configuration, not call history: it is reviewed,
diffed and deployed like the configuration it sits next to, it holds for every
store (memory, SQLite, PostgreSQL) alike, and it needs no migration of the ledger's
schema. The file is rewritten atomically (a temporary file renamed over it) under
an advisory lock, and a running gateway rereads it when it changes, so
``toolbound mcp-gateway approve-tool`` takes effect without a restart::

    {"format": 1, "tools": {"git.git_commit": {"digest": "sha256:…",
      "approved_by": "mira", "approved_at": "2026-07-19T06:00:00+00:00",
      "definition": {…the definition that was approved…}}}}
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

from toolbound._errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["Approval", "ApprovalStore"]

_FORMAT = 1


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


class ApprovalStore:
    """The approvals file: read on demand, reread when it changes, written atomically."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._seen: tuple[int, int] | None = None
        self._approvals: dict[str, Approval] = {}

    def get(self, name: str) -> Approval | None:
        """The approval of the tool served as ``name``, if any."""
        self._reload()
        return self._approvals.get(name)

    def all(self) -> dict[str, Approval]:
        """Every approval, by served tool name."""
        self._reload()
        return dict(self._approvals)

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
            current[name] = approval
            self._write(current)
        self._seen = None
        return approval

    # -- the file ---------------------------------------------------------------

    def _reload(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self._approvals = None, {}
            return
        seen = (stat.st_mtime_ns, stat.st_size)
        if seen != self._seen:
            self._approvals = self._read()
            self._seen = seen

    def _read(self) -> dict[str, Approval]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            document = json.loads(text)
            if document.get("format") != _FORMAT:
                msg = f"unknown format {document.get('format')!r}"
                raise ValueError(msg)  # noqa: TRY301 - one error path for a bad file
            tools = cast("dict[str, dict[str, object]]", document["tools"])
            return {
                name: Approval(
                    digest=str(entry["digest"]),
                    approved_by=str(entry["approved_by"]),
                    approved_at=datetime.fromisoformat(str(entry["approved_at"])),
                    definition=cast("dict[str, object]", entry.get("definition", {})),
                )
                for name, entry in tools.items()
            }
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # Never guess at approvals: a file that cannot be read approves nothing,
            # and the gateway refuses to start rather than trust every tool.
            msg = f"the approvals file {self.path} cannot be read: {exc}"
            raise ConfigurationError(msg, code="approvals_unreadable") from None

    def _write(self, approvals: Mapping[str, Approval]) -> None:
        document = {
            "format": _FORMAT,
            "tools": {name: a.as_json() for name, a in sorted(approvals.items())},
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
