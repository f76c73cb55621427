"""The async API's one rule: the ledger is reached off the caller's event loop.

:meth:`~toolbound.Runtime.arun` and its kin run on their caller's loop — the MCP
server's, the gateway's, an agent framework's — where one blocking round trip to the
ledger (a PostgreSQL statement waiting on a lock, an SQLite ``BEGIN IMMEDIATE``
waiting on a writer) would stall every other request that loop serves. So each stage
that claims a key or records a phase runs on the runtime's bounded I/O pool
(:class:`~toolbound.execution.offload.Offload`, one per runtime), and is not cut off half-way
if the caller is cancelled (:meth:`~toolbound.execution.offload.Offload.finish`). The rest stays
on the loop: parsing, validation, the digest and a policy's decision are in-memory
work that costs less than a hop (12 µs on an idle pool, far more in a busy process),
and an allowed read (the express lane) claims nothing, so it never leaves the loop.

A policy whose decision itself reads a store says so with a true ``reads_store``
attribute (:class:`~toolbound.pipeline.confirm.ConfirmOnce`, which looks a confirmed
twin of a write up in the ledger): a write's gates then run off the loop too, in the
same hop as its claim. Each hop is counted: a write makes two (gates and claim, then
the record after its attempt), an allowed read none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from toolbound.pipeline import admit, express

if TYPE_CHECKING:
    from collections.abc import Callable

    from toolbound._model import Proposal
    from toolbound.pipeline.admit import Refusal, Verdict
    from toolbound.pipeline.call import CallContext, Opened
    from toolbound.pipeline.env import Env

__all__ = ["admit_call", "reads_store"]

_T = TypeVar("_T")


def reads_store(policy: object) -> bool:
    """Whether ``policy``'s decisions read a store (and so must be made off the loop)."""
    return getattr(policy, "reads_store", False) is True


async def admit_call(
    env: Env,
    proposal: Proposal,
    ctx: CallContext,
    call: Opened,
    front: Callable[[Env, Opened, Verdict | Refusal], _T],
) -> Verdict | _T:
    """The gates' answer if the express lane takes the call, else ``front``'s step.

    Off the loop in one hop when a store decides: a write under a policy that reads
    one. A read claims nothing and the lookup of the tool is in memory, so a read's
    gates never leave the loop.
    """
    if _store_decides(env, proposal, ctx):
        return await env.offload.finish(_admitted, env, proposal, ctx, call, front)
    verdict = admit.judge(env, proposal, ctx, life=call.life)
    if isinstance(verdict, admit.Refusal):  # its ending is in memory: no ledger record
        return front(env, call, verdict)
    if express.takes(verdict, ctx):
        return verdict
    return await env.offload.finish(front, env, call, verdict)


def _store_decides(env: Env, proposal: Proposal, ctx: CallContext) -> bool:
    if not reads_store(env.policy):
        return False
    tool = ctx.tools.lookup(proposal.name, proposal.version)
    return tool is not None and tool.spec.is_write


def _admitted(
    env: Env,
    proposal: Proposal,
    ctx: CallContext,
    call: Opened,
    front: Callable[[Env, Opened, Verdict | Refusal], _T],
) -> Verdict | _T:
    verdict = admit.judge(env, proposal, ctx, life=call.life)
    if express.takes(verdict, ctx):
        return verdict
    return front(env, call, verdict)
