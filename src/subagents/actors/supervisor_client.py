"""SupervisorClient: the supervisor actor behind plain methods and the project's own errors.

Apart from ``actors.supervisor`` (the actor): what the Runtime holds and how a close waits
for the runs' ends are the caller's side of the supervisor, not its handling.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pykka
import tenacity

from subagents.actors.ask_claims import AskClaims
from subagents.actors.outage import ClosedUnrecorded
from subagents.actors.supervisor import SupervisorActor
from subagents.logs import get_logger
from subagents.messages import Ask, StopAll
from subagents.store.base import StoreError

log = get_logger("subagents.supervisor")

STOP_ALL_GRACE = 300.0
"""How long a close waits for the runs' ends past its own timeout (``SupervisorClient.close``)."""

TAKEN_GRACE = 300.0
"""How long a claimed ask's answer is waited for past its timeout (``SupervisorClient.
ask_claimed``): a supervisor stalled for ever inside the decision (a subscriber that never
returns, a store lock held elsewhere) must not hold its caller for ever."""


class ActorGone(RuntimeError):
    """The supervisor actor has stopped."""


class AskRevoked(TimeoutError):
    """An ask the supervisor had not taken when its caller's timeout ran out: withdrawn,
    nothing of it done (``SupervisorClient.ask_claimed``)."""


class AskOverdue(TimeoutError):
    """An ask the supervisor took (it is deciding it) and has not answered within its
    timeout and the grace after it: what it decides may still be done
    (``SupervisorClient.ask_claimed``)."""


class SupervisorClient:
    """The supervisor actor behind plain methods and the project's own errors.

    What the Runtime holds instead of a pykka reference, so that nothing above ``actors/``
    depends on pykka types: another actor backend would provide the same client.
    """

    def __init__(self, ref: pykka.ActorRef[Any], claims: AskClaims | None = None) -> None:
        self._ref = ref
        self.claims = AskClaims() if claims is None else claims
        """The claims of ``ask_claimed``'s asks, shared with the actor it started."""

    @classmethod
    def start(cls, **kwargs: Any) -> SupervisorClient:
        """Start a SupervisorActor (``SupervisorActor.__init__``'s arguments)."""
        claims = AskClaims()
        return cls(SupervisorActor.start(claims=claims, **kwargs), claims)

    def ask(self, message: Any, timeout: float = 30.0) -> Any:
        """Send ``message`` in an ``Ask`` and wait for the answer (``ActorGone``,
        ``TimeoutError``, or the error raised handling it)."""
        try:
            return self._ref.ask(Ask(message), timeout=timeout)
        except pykka.ActorDeadError:
            raise ActorGone("the supervisor has stopped") from None
        except pykka.Timeout:
            raise TimeoutError(f"the supervisor did not answer within {timeout} s") from None

    def ask_claimed(self, message: Any, timeout: float = 30.0, grace: float = TAKEN_GRACE) -> Any:
        """As ``ask``, for an ask that must not be carried out once its caller gave up (one
        that starts runs): the supervisor claims it before deciding it, the caller revokes
        it when ``timeout`` runs out, and only one of them can (``actors/ask_claims``).
        ``AskRevoked`` (a ``TimeoutError``): the supervisor had not taken it; nothing of it
        was done, nor ever will be. Once taken, its answer is waited for past ``timeout``,
        as long as the supervisor lives: it is deciding it, and what it decides (runs
        started) is the caller's, who must hear of it; but not for ever: ``grace`` past
        ``timeout`` it is ``AskOverdue`` (a ``TimeoutError``: taken, and may still be done)."""
        claims = self.claims
        key = claims.open()
        try:
            try:
                future = self._ref.ask(Ask(message, claim=key), block=False)
                try:
                    return future.get(timeout=timeout)
                except pykka.Timeout:
                    if claims.revoke(key):
                        raise AskRevoked(
                            "the supervisor did not take the request within"
                            f" {round(timeout, 3)} s (it is busy or stalled); it was withdrawn:"
                            " nothing of it was done, nor will be"
                        ) from None
                log.warning(
                    "the supervisor took the request and is deciding it past the ask's"
                    " timeout; waiting for its answer",
                    timeout=timeout,
                    request=type(message).__name__,
                )
                deadline = time.monotonic() + grace
                while True:
                    try:
                        left = max(0.0, min(timeout, deadline - time.monotonic()))
                        return future.get(timeout=left)
                    except pykka.Timeout:
                        if not self._ref.is_alive():
                            raise ActorGone("the supervisor has stopped") from None
                        if time.monotonic() >= deadline:
                            raise AskOverdue(
                                "the supervisor took the request but has not decided it"
                                f" within {round(timeout, 3)} s and {round(grace, 3)} s more"
                                " (stalled inside the decision: a subscriber, the store)"
                            ) from None
            except pykka.ActorDeadError:
                raise ActorGone("the supervisor has stopped") from None
        finally:  # answered, revoked, or the caller interrupted: an unclaimed one is dropped
            claims.close(key)

    def _record_by(self, deadline: float, first: StoreError) -> None:
        """The close's ``StopAll`` was refused (``first``: the store still fails, and the
        runs it held stay unfinished in it), or failed on the store itself (the failure
        begins there: the runs are stopped, their callers told). Asked again until
        ``deadline`` (each ask tries the store first: ``actors/outage.py``), so a store
        that takes writes again by then records them failed, as their callers were told;
        else the close says what it leaves. Not asked once ``deadline`` has passed (each ask
        has the supervisor try the store, which may take long: a cluster's lost head store
        is a ``ray.get`` of up to 60 s on the supervisor's thread); a ``StoreError`` that is
        not a refusal (the store back, then failing again) is asked again too. An ask not
        answered by ``deadline`` (its ``timeout`` is the time left) ends the tries as the
        deadline does: the close says what the last refusal left."""
        refused = first if isinstance(first, ClosedUnrecorded) else None
        retrying = tenacity.Retrying(
            stop=tenacity.stop_before_delay(max(0.0, deadline - time.monotonic())),
            wait=tenacity.wait_exponential(multiplier=0.05, max=1.0),
            retry=tenacity.retry_if_exception_type(StoreError),
            reraise=True,
        )
        try:
            if time.monotonic() < deadline:
                for attempt in retrying:
                    with attempt:
                        try:
                            left = max(0.1, deadline - time.monotonic())
                            self._ref.ask(Ask(StopAll()), timeout=left)
                        except ClosedUnrecorded as exc:
                            refused = exc
                            raise
                return  # recorded: the runs ended failed, as their callers were told
        except StoreError:
            pass
        except pykka.Timeout:  # an ask again not answered by the deadline (the supervisor's
            pass  # try at the store outlasted it): what the last refusal left, as above
        except Exception:
            log.exception("stopping runs failed")
            return
        if refused is None:  # the store failed at the close's own stop, and since
            log.error(
                "the runtime closed while its store still failed: the runs it held may stay"
                " unfinished in the store, though their callers were told they failed",
                error=str(first),
            )
            return
        log.error(
            "the runtime closed while its store still failed: its runs stay unfinished in the"
            " store, though their callers were told they failed; a restore (a Runtime's"
            " default, `subagents resume`) runs them again; once the runtime's lease has"
            " lapsed, `subagents stop RUN` ends one, and its subtree, in the store without"
            " running it",
            error=refused.failure,
            runs=list(refused.tops),
        )

    def tell(self, message: Any) -> bool:
        """Send ``message`` without waiting; False when the supervisor has stopped."""
        try:
            self._ref.tell(message)
        except pykka.ActorDeadError:
            return False
        return True

    def close(self, timeout: float) -> None:
        """Cancel every run (their agents are told to stop), then stop the supervisor, within
        ``timeout``. The agents' threads are the pool's to join.

        Ending the runs (``StopAll``) is waited for past ``timeout`` (up to
        ``STOP_ALL_GRACE``), with a warning: the runtime closes its store next, and a store
        closed under the supervisor's writes would keep the runs unfinished, to be taken up
        as orphans and started again by the next runtime on it. It takes ~50-150 us of
        the supervisor's time per live run, more behind a loaded machine or a full inbox:
        10,000 runs in SQLite once overran the default 10 s."""
        deadline = time.monotonic() + timeout
        try:
            future = self._ref.ask(Ask(StopAll()), block=False)
        except pykka.ActorDeadError:
            return
        try:
            try:
                future.get(timeout=timeout)
            except pykka.Timeout:
                log.warning(
                    "ending the runs takes longer than the close's timeout; waiting for it,"
                    " so that the store records every run's end",
                    timeout=timeout,
                    grace=STOP_ALL_GRACE,
                )
                future.get(timeout=STOP_ALL_GRACE)
        except StoreError as exc:  # the store fails (ClosedUnrecorded: still): tried until
            self._record_by(deadline, exc)  # the deadline
        except Exception:
            log.exception("stopping runs failed")
        with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
            self._ref.stop(block=True, timeout=max(0.1, deadline - time.monotonic()))
