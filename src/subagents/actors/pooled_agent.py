"""PooledAgentActor: an ``AgentActor`` that holds no thread of its own.

Its messages are handled on a shared ``Dispatcher``'s threads (``actors/pooled.py``), so a
waiting run costs only its objects. Started with ``dispatcher=`` instead of ``pool=``.

Apart from ``agent.py`` for the one way it parts from a plain ``PooledActor``: its start at
the process's thread limit. A plain pooled actor whose start finds no thread (``NoThread``)
is left for its next message to try again (``PooledActor._start_actor_loop``); a run's
agent gets no message until it has run (its behaviour's start asks for everything it
gets), so it would sit there, its run RUNNING for ever. It is given up instead and its
starter told (``Effector._start``: the run fails, its supervisor decides the rest).
"""

from __future__ import annotations

from subagents.actors.agent import AgentActor
from subagents.actors.pooled_actor import PooledActor
from subagents.actors.threads import InterpreterExiting, NoThread


class PooledAgentActor(PooledActor, AgentActor):
    """An ``AgentActor`` on a ``Dispatcher``'s threads (see the module doc)."""

    def _start_actor_loop(self) -> None:
        """As ``PooledActor``'s; no thread to be had (``NoThread``, or ``InterpreterExiting``:
        none ever again): the actor, which never ran, is stopped and uncounted, its mailbox
        closed as a stopped actor's (what another thread put meanwhile refused as after a
        stop: a later put must not run a failed run's behaviour), and the refusal raised
        into its starter."""
        if self.actor_inbox.schedule():
            try:
                self._dispatcher.submit(self)
            except (NoThread, InterpreterExiting):
                self._uncount()
                self.actor_stopped.set()
                self.actor_inbox.close_unstarted(self)
                raise
