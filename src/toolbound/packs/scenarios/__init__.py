"""Prompt-injection scenarios: realistic tools, poisoned data, a model that obeys.

Four domains — a workspace (mail, contacts, drive, calendar, web), a bank account,
travel bookings and a team chat — behind thirty tools (:mod:`.world`); forty
everyday tasks and a scripted model that does them and also obeys every
instruction it finds in tool data (:mod:`.agent`); a runner that counts what got
through under the grants alone, a strict rule on every write, or the role preset
(:mod:`.run`)::

    from toolbound.packs.scenarios import format_figures, run_scenarios
    print(format_figures(run_scenarios(mode="preset"), title="role preset"))
"""

from toolbound.packs.scenarios.agent import TASKS, Domain, ObedientModel, Seen, Task
from toolbound.packs.scenarios.run import (
    Figures,
    Mode,
    TaskResult,
    format_figures,
    run_scenarios,
    run_task,
)
from toolbound.packs.scenarios.world import (
    ATTACKER_EMAIL,
    ATTACKER_HOST,
    ATTACKER_IBAN,
    INSTRUCTIONS,
    World,
    grant_policy,
    register,
)

__all__ = [
    "ATTACKER_EMAIL",
    "ATTACKER_HOST",
    "ATTACKER_IBAN",
    "INSTRUCTIONS",
    "TASKS",
    "Domain",
    "Figures",
    "Mode",
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
