"""The late line's ``Records`` decided as one and written as one, each report still alone
when it fails.

Why apart from ``SupervisorActor``: a run of reports that only record what happened (mail
that went straight, journals, read receipts: ``LateReports.hand``) is one decision
(``SupervisorCore.recorded``) and one nested store batch, not one each. A told report
whose handling failed was always left out alone, the others kept
(``tests/runtime/test_supervisor_survives.py``); that must not become "the whole line left
out" because its writes now share a batch. So:

- a report whose decision fails (a bug) is left out by the core (``Recorded.all``), logged;
- should the joined writes fail but for the store (a bug in a store, not a full disk: a
  ``StoreError`` is raised, and the supervisor halts as for any message), their nested
  batch is rolled back and each report's own writes are written again in a nested batch of
  its own, in order (``RecordsDecided.pieces``): only the ones that fail are left out,
  logged, and only the effects of those written are carried out. What the core decided
  besides (its upkeep after the decision) follows them. Nothing is written twice: a
  nested batch that raises undoes its own writes (``RunStore.batch``), and the line exists
  only where senders record their mail (SQLite's way) or the supervisor records it after
  (``MemoryStore``, whose batch of writes is all or nothing: ``store/memory_undo.py``):
  ``late_reports``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from subagents.logs import get_logger
from subagents.store.base import StoreError
from subagents.store.writes import Write
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import Effect
from subagents.supervision.recorded import RecordsDecided

log = get_logger("subagents.supervisor")


def records_written(
    core: SupervisorCore, write: Callable[[Sequence[Write]], None], records: Any
) -> list[Effect]:
    """``records`` (a ``Records``) decided as one and written inside the open group by
    ``write`` (``EndRace.write_all``: the group keeps them): the effects to carry out once it
    commits (see the module). A ``StoreError`` is raised."""
    decision = core.recorded(records)
    decided: RecordsDecided = decision.reply
    for message, exc in decided.failed:  # a bug: that report alone left out, logged
        _failed(message, exc)
    writes = decision.writes
    try:
        if writes:
            write(writes)
        return decision.effects
    except StoreError:
        raise
    except Exception:  # one report's write, or a few: each written alone, as when told alone
        log.debug("the late line's records failed to be written together", exc_info=True)
    effects: list[Effect] = []
    for message, piece in decided.pieces:
        try:
            if piece.writes:
                write(piece.writes)
        except StoreError:
            raise
        except Exception as exc:
            _failed(message, exc)
            continue
        effects += piece.effects
    upkeep = writes[decided.writes :]
    if upkeep:
        write(upkeep)
    effects += decision.effects[decided.effects :]
    return effects


def _failed(message: Any, exc: Exception) -> None:
    log.error(
        "supervisor failed to handle a report",
        message=type(message).__name__,
        run_id=message.run_id,
        exc_info=exc,
    )
