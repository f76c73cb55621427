"""Prompt-injection scenarios: realistic tools, poisoned data, a model that obeys.

Four domains — a workspace (mail, contacts, drive, calendar, web), a bank account,
travel bookings and a team chat — behind thirty tools (:mod:`.world`); forty-one
everyday tasks and a scripted model that does them and also obeys every
instruction it finds in tool data (:mod:`.agent`); three more domains — a shop, a
clinic's patient portal, a project tracker — with eighteen tools and twenty-four tasks
(:mod:`.errands`); an eighth, held out — insurance claims, ten tools and ten tasks
(:mod:`.claims`); a runner that counts what got through under the grants alone, a
strict rule on every write, or the role preset with or without the tools' intents
or a task scope (:mod:`.run`)::

    from toolbound.packs.scenarios import format_figures, run_scenarios
    print(format_figures(run_scenarios(mode="preset"), title="role preset"))
"""

from toolbound.packs.scenarios import claims, errands
from toolbound.packs.scenarios.agent import TASKS, Domain, ObedientModel, Seen, Task
from toolbound.packs.scenarios.claims import CLAIMS
from toolbound.packs.scenarios.errands import ERRANDS
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
    "CLAIMS",
    "ERRANDS",
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
    "claims",
    "errands",
    "format_figures",
    "grant_policy",
    "register",
    "run_scenarios",
    "run_task",
]
