"""The tasks extension (``io.modelcontextprotocol/tasks``): a call that outlives its request.

A tool that declares ``task_support`` (``optional`` or ``required``) runs as a task
for a client that declares the extension: ``tools/call`` answers a
``CreateTaskResult`` once the call has passed every gate, and the call goes on
running, on the runtime, under the same invocation it would have had (its proposal
id is the task id, so the journal and the trace name it). Then::

    tasks/get       the task's status; once it ended, its result inlined
                    (completed), or the JSON-RPC error (failed)
    tasks/update    the answers to what the task asks (a call a person must
                    confirm asks the confirmation: status input_required, the
                    elicitation in inputRequests); others are ignored
    tasks/cancel    the runtime's own cancellation of the running call; the task
                    then reads cancelled

A task belongs to the caller who started it (tenant and subject): for anyone else
its id is unknown (-32602), exactly like an id that never existed. A request that
does not declare the extension gets -32021 for the three methods and for a tool
that must run as a task. ``Mcp-Name``, when sent, must be the task id (-32020).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from toolbound.mcp.rounds import CAPABILITIES_META_KEY

try:
    import mcp_types as types
    from mcp.shared.exceptions import MCPError
    from mcp_types import (
        HEADER_MISMATCH,
        INTERNAL_ERROR,
        INVALID_PARAMS,
        MISSING_REQUIRED_CLIENT_CAPABILITY,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

from collections.abc import Awaitable, Callable, Mapping

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.server.context import ServerRequestContext

    from toolbound._clock import Clock
    from toolbound._model import Subject

Answers = Callable[[], Awaitable[dict[str, Any]]]
"""What a task's work awaits for the answers to its input requests."""

__all__ = [
    "TASKS_EXTENSION",
    "Answers",
    "TaskBoard",
    "TaskFailed",
    "declares_tasks",
    "requires_tasks",
]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
_NAME_HEADER: Final = b"mcp-name"


class TaskFailed(Exception):  # noqa: N818 - a task's ending, not a programming error
    """The call behind a task ended in a protocol-level error (the task reads failed)."""

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


@dataclass(slots=True)
class _Task:
    task_id: str
    owner: tuple[str, str]
    created_at: datetime
    updated_at: datetime
    status: str = "working"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    answered: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    runner: asyncio.Task[None] | None = field(default=None, repr=False)


class TaskParams(types.RequestParams):
    """``tasks/get``, ``tasks/update`` and ``tasks/cancel`` params: the task's id."""

    task_id: str
    input_responses: dict[str, Any] | None = None


def declares_tasks(ctx: ServerRequestContext[Any, Any], meta: Mapping[str, object]) -> bool:
    """Whether this request's client declares the tasks extension (or opts in on the call)."""
    caps = ctx.session.client_capabilities
    if caps is not None and TASKS_EXTENSION in (caps.extensions or {}):
        return True
    declared = meta.get(CAPABILITIES_META_KEY)
    extensions = declared.get("extensions") if isinstance(declared, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def requires_tasks(what: str) -> MCPError:
    """-32021 naming the tasks extension as the capability ``what`` needs."""
    return MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"{what} needs the client capability extensions[{TASKS_EXTENSION!r}]",
        data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


class TaskBoard:
    """The tasks of one server, each kept ``ttl`` after it ended (then forgotten)."""

    def __init__(self, clock: Clock, *, ttl: timedelta, poll_interval: timedelta) -> None:
        self._clock = clock
        self._ttl = ttl
        self._poll = poll_interval
        self._tasks: dict[str, _Task] = {}

    @staticmethod
    def new_id() -> str:
        """A fresh task id (also the proposal id of the call it runs)."""
        return f"task-{os.urandom(12).hex()}"

    def start(
        self,
        subject: Subject,
        task_id: str,
        work: Callable[[Answers], Awaitable[dict[str, Any]]],
        *,
        asking: Mapping[str, types.ElicitRequest] | None = None,
    ) -> dict[str, Any]:
        """Run ``work`` as task ``task_id`` of ``subject``; its ``CreateTaskResult``.

        ``asking``: the input the task needs first (it starts ``input_required``);
        ``work`` awaits the answers, once ``tasks/update`` brought every one. The
        task is on the board before this returns, so an immediate ``tasks/get``
        finds it.
        """
        self._forget_expired()
        now = self._clock.now()
        task = _Task(
            task_id=task_id, owner=(subject.tenant, subject.id), created_at=now, updated_at=now
        )
        if asking:
            task.status = "input_required"
            task.input_requests = {
                key: request.model_dump(by_alias=True, mode="json", exclude_none=True)
                for key, request in asking.items()
            }

        async def answers() -> dict[str, Any]:
            await task.answered.wait()
            return dict(task.answers)

        work_now = functools.partial(work, answers)
        self._tasks[task_id] = task
        task.runner = asyncio.get_running_loop().create_task(self._run(task, work_now))
        return {"resultType": "task", **self._envelope(task)}

    def register(self, server: Server[Any], caller: Callable[[Any], Subject]) -> None:
        """Serve ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` on ``server``."""
        server.extensions[TASKS_EXTENSION] = {}

        async def on_get(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> types.Result:
            task = self._owned(ctx, params, caller(ctx), "tasks/get")
            return _Wire({"resultType": "complete", **self._detailed(task)})

        async def on_update(
            ctx: ServerRequestContext[Any, Any], params: TaskParams
        ) -> types.Result:
            task = self._owned(ctx, params, caller(ctx), "tasks/update")
            self._answer(task, params.input_responses or {})
            return _Wire({"resultType": "complete"})

        async def on_cancel(
            ctx: ServerRequestContext[Any, Any], params: TaskParams
        ) -> types.Result:
            task = self._owned(ctx, params, caller(ctx), "tasks/cancel")
            if task.status not in _TERMINAL and task.runner is not None:
                task.runner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(task.runner)
            return _Wire({"resultType": "complete"})

        server.add_request_handler("tasks/get", TaskParams, on_get)
        server.add_request_handler("tasks/update", TaskParams, on_update)
        server.add_request_handler("tasks/cancel", TaskParams, on_cancel)

    async def stop(self) -> None:
        """Cancel every task still running and wait until the runtime settled each."""
        running = [
            t.runner for t in self._tasks.values() if t.runner is not None and not t.runner.done()
        ]
        for runner in running:
            runner.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    # -- inside --------------------------------------------------------------------------

    async def _run(self, task: _Task, work: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        try:
            result = await work()
        except asyncio.CancelledError:
            # The runtime settled the call as cancelled before this reached us.
            self._end(task, "cancelled")
            return
        except TaskFailed as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            self._end(task, "failed", error=error)
            return
        except MCPError as exc:
            self._end(task, "failed", error=exc.error.model_dump(mode="json", exclude_none=True))
            return
        except Exception:  # noqa: BLE001 - a task's crash is its failure, told to its owner
            error = {"code": INTERNAL_ERROR, "message": "the task's call failed inside the server"}
            self._end(task, "failed", error=error)
            return
        self._end(task, "completed", result=result)

    def _answer(self, task: _Task, responses: Mapping[str, Any]) -> None:
        """Keep the answers to what ``task`` asks; the others are not its (ignored)."""
        taken: dict[str, Any] = {}
        for key, response in responses.items():
            if key not in task.input_requests:
                continue
            try:
                types.ElicitResult.model_validate(response)
            except ValueError:
                raise MCPError(
                    code=INVALID_PARAMS, message=f"inputResponses[{key!r}] is no elicitation result"
                ) from None
            taken[key] = response
        if not taken:
            return
        for key, response in taken.items():
            del task.input_requests[key]
            task.answers[key] = response
        task.updated_at = self._clock.now()
        if not task.input_requests and task.status == "input_required":
            task.status = "working"
            task.answered.set()

    def _end(
        self,
        task: _Task,
        status: str,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        task.status, task.result, task.error = status, result, error
        task.input_requests = {}
        task.updated_at = self._clock.now()

    def _owned(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: TaskParams,
        subject: Subject,
        method: str,
    ) -> _Task:
        if not declares_tasks(ctx, params.meta or {}):
            raise requires_tasks(method)
        named = _name_header(ctx)
        if named is not None and named != params.task_id:
            raise MCPError(
                code=HEADER_MISMATCH,
                message="mcp-name header does not match the request body's 'taskId' parameter",
            )
        self._forget_expired()
        task = self._tasks.get(params.task_id)
        if task is None or task.owner != (subject.tenant, subject.id):
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown task: {params.task_id}")
        return task

    def _envelope(self, task: _Task) -> dict[str, Any]:
        return {
            "taskId": task.task_id,
            "status": task.status,
            "createdAt": _iso(task.created_at),
            "lastUpdatedAt": _iso(task.updated_at),
            "ttlMs": int(self._ttl.total_seconds() * 1000),
            "pollIntervalMs": int(self._poll.total_seconds() * 1000),
        }

    def _detailed(self, task: _Task) -> dict[str, Any]:
        detailed = self._envelope(task)
        if task.result is not None:
            detailed["result"] = task.result
        if task.error is not None:
            detailed["error"] = task.error
        if task.input_requests and task.status == "input_required":
            detailed["inputRequests"] = dict(task.input_requests)
        return detailed

    def _forget_expired(self) -> None:
        horizon = self._clock.now() - self._ttl
        for task_id in [
            t.task_id
            for t in self._tasks.values()
            if t.status in _TERMINAL and t.updated_at < horizon
        ]:
            del self._tasks[task_id]


class _Wire(types.Result):
    """A result written out as the JSON object it holds (the task shapes are not the SDK's)."""

    model_config = types.Result.model_config | {"extra": "allow"}

    def __init__(self, wire: dict[str, Any]) -> None:
        super().__init__(**wire)


def _name_header(ctx: ServerRequestContext[Any, Any]) -> str | None:
    scope = getattr(ctx.request, "scope", None)
    if not isinstance(scope, dict):
        return None
    for key, value in scope.get("headers", ()):
        if key.lower() == _NAME_HEADER:
            return bytes(value).decode("latin-1")
    return None


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
