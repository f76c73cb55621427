"""The async API's one rule: the ledger is reached off the caller's event loop.

:meth:`~toolbound.Runtime.arun` and its kin run on their caller's loop — the MCP
server's, the gateway's, an agent framework's — where one blocking round trip to the
ledger (a PostgreSQL statement waiting on a lock, an SQLite ``BEGIN IMMEDIATE``
waiting on a writer) would stall every other request that loop serves. So each stage
that claims a key or records a phase runs on the runtime's bounded I/O pool
(:class:`~toolbound._offload.Offload`, one per runtime), and is not cut off half-way
if the caller is cancelled (:meth:`~toolbound._offload.Offload.finish`). The rest stays
on the loop: parsing, validation, the digest and a policy's decision are in-memory
work that costs less than the hop (50 to 100 µs), and an allowed read (the express lane)
claims nothing, so it never leaves the loop at all.

A policy whose decision itself reads a store says so with a true ``reads_store``
attribute (:class:`~toolbound.pipeline.confirm.ConfirmOnce`, which looks a confirmed
twin up in the ledger): the gates then run off the loop too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from toolbound.pipeline import admit

if TYPE_CHECKING:
    from collections.abc import Callable

    from toolbound._model import Proposal
    from toolbound.pipeline.admit import Refusal, Verdict
    from toolbound.pipeline.call import CallContext, Opened
    from toolbound.pipeline.env import Env

__all__ = ["front", "judge", "reads_store"]

_T = TypeVar("_T")


def reads_store(policy: object) -> bool:
    """Whether ``policy``'s decisions read a store (and so must be made off the loop)."""
    return getattr(policy, "reads_store", False) is True


async def judge(env: Env, proposal: Proposal, ctx: CallContext, call: Opened) -> Verdict | Refusal:
    """The gates' answer, on the loop unless the policy reads a store."""
    if reads_store(env.policy):
        return await env.offload.finish(admit.judge, env, proposal, ctx, life=call.life)
    return admit.judge(env, proposal, ctx, life=call.life)


async def front(
    env: Env,
    fn: Callable[[Env, Opened, Verdict | Refusal], _T],
    call: Opened,
    verdict: Verdict | Refusal,
) -> _T:
    """``fn`` — admission, a person, the ledger's claim — off the loop, unless refused.

    A refusal (a gate's, or the policy's denial) ends the call in memory — its trace,
    no ledger record — so it is answered where it is.
    """
    if isinstance(verdict, admit.Refusal):
        return fn(env, call, verdict)
    return await env.offload.finish(fn, env, call, verdict)
