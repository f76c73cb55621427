"""Prompt-injection scenarios: realistic tools, poisoned data, a model that obeys.

A mailbox, a bank account with transactions and saved payees, a file drive, a
calendar, contacts and a couple of web pages (:mod:`.world`); twelve everyday
tasks and a scripted model that does them and also obeys every instruction it
finds in tool data (:mod:`.agent`); a runner that counts what got through
(:mod:`.run`)::

    from toolbound.packs.scenarios import format_figures, run_scenarios
    print(format_figures(run_scenarios(), title="with flow rules"))
"""

from toolbound.packs.scenarios.agent import TASKS, ObedientModel, Seen, Task
from toolbound.packs.scenarios.run import (
    Figures,
    TaskResult,
    format_figures,
    run_scenarios,
    run_task,
)
from toolbound.packs.scenarios.world import (
    ATTACKER_EMAIL,
    ATTACKER_HOST,
    ATTACKER_IBAN,
    FLOW_RULES,
    World,
    grant_policy,
    register,
)

__all__ = [
    "ATTACKER_EMAIL",
    "ATTACKER_HOST",
    "ATTACKER_IBAN",
    "FLOW_RULES",
    "TASKS",
    "Figures",
    "ObedientModel",
    "Seen",
    "Task",
    "TaskResult",
    "World",
    "format_figures",
    "grant_policy",
    "register",
    "run_scenarios",
    "run_task",
]
