"""ClusterStore: the ``RunStore`` of a cluster, for every process but the head's.

Why: nodes, the CLI (from any machine joined to the cluster) and the driver must read and
write the one store of the cluster without opening its file (it is on the head; see
``store_service``). ``ClusterStore`` keeps the protocol, so the code written against
``RunStore`` (the CLI's commands, the runtime's handles) takes it unchanged.

Batches keep their promise across the wire: the writes made inside ``batch()`` are held
here and sent as one call when the outermost batch ends, applied on the head in one
transaction (all or nothing, one commit). A nested batch that raises drops only its own
writes (as a savepoint would). A read made inside a batch that holds writes is answered as
if they were committed (``StoreService.read_within``) without committing them. A batch is
the thread's that opened it, as a local file's transaction is its connection's: another
thread of the process (a rule read, ``Runtime.approvals()``, a node's answer) neither sees
its uncommitted writes nor has its own writes held in it; they go at once, or in a batch
of that thread's own.

``renew_lease`` and ``acquire_lease`` answer, so they cannot be held: inside a batch they are
refused. ``check_fence`` (``store.fencing``) is held like a write, first in the batch: the
head checks the writer's lease (owner and epoch) inside the transaction that applies the
batch, and a fenced batch is refused whole. A
``post_command`` inside a batch (the supervisor passing a stop or a mail on to the runtime
that hosts the run, in its group commit) is held with the batch's writes and committed with
them, as on a local file; its answer there is 0 (the command's id is known only once it is
committed, and that caller does not read it).
``take_commands`` inside a batch (the supervisor claims commands and acts on them in one
batch) commits what the batch holds so far together with the claim, in one
transaction; the batch's later writes are a transaction of their own, so a failure between
the two loses the claimed commands' effects (not the store's consistency), a narrower promise
than a local file's.

Every failure is a ``StoreError``: the store's own (re-raised as it was on the head: a
``ValueError`` for a bad argument stays one), or the store being unreachable; an
``UnsureWrite`` when it was lost (or silent) with the call on its way: a write may or may
not have been committed (``actors.outage`` reads the store before telling what it decided).

A head Ray is starting again (its process died: ``max_restarts=-1``) is waited out within
the call's timeout (``CALL_TIMEOUT_S``), not taken for a lost store: Ray says
``ActorUnavailableError`` of an actor unavailable *for now*. A read is asked again whatever
that error says (it changes nothing). A write is sent again only when Ray refused it before
sending it ("The actor is restarting.": Ray fails a call made while its actor is restarting
without sending it, ``max_task_retries=0``); a write that was on its way when the head went
("connection reset", "The actor was restarted") may have been committed, so it stays an
``UnsureWrite``: never written twice. So do the calls that answer and write
(``take_commands``, the leases, ``post_command``). Session 31 saw the CLI fail so
(`tests/cli/test_cli_cluster.py`: "The actor is restarting"), as ``cluster.liveness`` had
taken the same word for a host's death.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from subagents.cluster.connect import HEAD_ACTOR, ClusterError, connect, import_ray
from subagents.cluster.store_service import PROTOCOL, StoreCall, StoreInfo
from subagents.messages import (
    ApprovalRecord,
    Checkpoint,
    CheckpointDelta,
    Command,
    Event,
    JournalEntry,
    Lease,
    Mail,
    MailState,
    Outcome,
    Preview,
    RunRecord,
    RunStatus,
    StoredEvent,
    Subscription,
)
from subagents.store.base import DamagedRow, MailRecording, RunStore, StoreError, UnsureWrite

CALL_TIMEOUT_S = 60.0
"""Longest wait for one answer of the store (a restarting head waited out included): past
it the head is taken as unreachable."""

NOT_SENT = "The actor is restarting."
"""What Ray says (inside ``ActorUnavailableError``) of a call it failed without sending it,
its actor being restarted (Ray's ``ActorTaskSubmitter::SendPendingTasks``): a write so
refused was not applied, and may be sent again."""

AGAIN_FIRST_S = 0.05
AGAIN_MOST_S = 1.0
"""The pause before asking a restarting head again: doubled from the first to the most."""


class _Restarting(Exception):
    """Ray's ``ActorUnavailableError`` (``error``) of a call: the head unavailable for now."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _wait_out(pause_s: float) -> None:
    """The pause before asking a restarting head again (a test finds a call waiting here)."""
    time.sleep(pause_s)


class _Calls:
    """The store's calls on their way to the head and back: each answer or its failure as a
    ``StoreError``, a restarting head waited out (see the module). Apart from ``ClusterStore``
    (which keeps the protocol) so that each stays one thing."""

    def __init__(self, ray: Any, name: str) -> None:
        self._ray = ray
        self.name = name

    def asked(self, send: Callable[[], Any], doing: str) -> Any:
        """A read: ``send()``'s answer, sent again while Ray says the head is restarting
        (a read changes nothing), within ``CALL_TIMEOUT_S`` in all (see the module)."""
        return self._call(send, doing, write=False)

    def told(self, send: Callable[[], Any], doing: str) -> Any:
        """A write (or a call that writes and answers): ``send()``'s answer, sent again only
        when Ray refused it unsent, its head restarting; one that may have reached the head
        is an ``UnsureWrite`` (see the module)."""
        return self._call(send, doing, write=True)

    def _call(self, send: Callable[[], Any], doing: str, *, write: bool) -> Any:
        until = time.monotonic() + CALL_TIMEOUT_S
        pause = AGAIN_FIRST_S
        while True:
            try:
                return self._get(send(), doing, until - time.monotonic())
            except _Restarting as restarting:
                exc = restarting.error
                if write and NOT_SENT not in str(exc):
                    raise self._lost(doing, exc) from exc
                left = until - time.monotonic()
                if left <= pause:
                    raise UnsureWrite(
                        f"the cluster's store {self.name!r} was restarting for more than"
                        f" {CALL_TIMEOUT_S:g} s during {doing}"
                        + (" (a write may or may not have been committed)" if write else "")
                        + f": {exc}"
                    ) from exc
                _wait_out(pause)
                pause = min(pause * 2, AGAIN_MOST_S)

    def _lost(self, doing: str, exc: Exception) -> UnsureWrite:
        return UnsureWrite(
            f"the cluster's store {self.name!r} was lost during {doing} (a write may or may"
            f" not have been committed): {exc}"
        )

    def _get(self, ref: Any, doing: str, timeout: float = CALL_TIMEOUT_S) -> Any:
        """``ref``'s answer, or its failure as a ``StoreError``; ``_Restarting`` when Ray
        says the head is unavailable for now (the caller decides whether to ask again)."""
        ray = self._ray
        try:
            return ray.get(ref, timeout=max(timeout, 0.0))
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause  # the store's own error, as raised on the head
            if isinstance(cause, Exception):
                raise cause from None
            raise StoreError(f"the cluster's store failed {doing}: {exc}") from exc
        except ray.exceptions.GetTimeoutError as exc:
            raise UnsureWrite(
                f"the cluster's store {self.name!r} did not answer {doing} within"
                f" {CALL_TIMEOUT_S:g} s"
            ) from exc
        except ray.exceptions.ActorUnavailableError as exc:
            raise _Restarting(exc) from exc
        except ray.exceptions.RayActorError as exc:
            raise self._lost(doing, exc) from exc


class _OpenBatch(threading.local):
    """One thread's open batch (each thread sees its own: see the module)."""

    def __init__(self) -> None:
        self.held: list[StoreCall] = []
        self.base = 0
        """How many of the open batch's writes were sent already (with a claim of commands)."""
        self.depth = 0


class ClusterStore(RunStore):
    """A ``RunStore`` served by the cluster's store actor (``head``); where it keeps a
    narrower promise than a local file, its method says so (and the module)."""

    def __init__(self, actor: Any, *, name: str = HEAD_ACTOR, address: str = "") -> None:
        self._ray = import_ray()
        self._actor = actor
        self.name = name
        self._batches = _OpenBatch()
        calls = _Calls(self._ray, name)
        self._asked, self._told = calls.asked, calls.told
        self._closed = False
        from subagents.cluster.head import refuse_another_protocol

        refuse_another_protocol(actor, self._asked, name)  # first: any other answer may differ
        info: StoreInfo = self._asked(lambda: actor.info.remote(PROTOCOL), "info")
        self.path = Path(info.path)
        """The store's file, on the head node (``host``): for messages; never opened here."""
        self.host = info.host
        key = hashlib.sha256(f"{address}\0{name}\0{info.host}\0{info.path}".encode()).hexdigest()
        self.key = key[:16]
        """Names this store among others (the CLI keeps its last listing per store)."""

    @classmethod
    def connect(
        cls,
        address: str,
        *,
        name: str = HEAD_ACTOR,
        path: str | None = None,
        create: bool = False,
    ) -> ClusterStore:
        """Join the cluster at ``address`` and reach its store ``name`` (``create``: start it
        on the head, serving ``path``, if it is not running)."""
        from subagents.cluster.head import head_actor

        connect(address)
        return cls(head_actor(name=name, path=path, create=create), name=name, address=address)

    # ---- transport -------------------------------------------------------------------------

    def run_on_head(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in a task on the head node, where the store's file is (what only its
        file system can tell: ``runtime._store_reach``); its error raised here as it was
        there."""
        from subagents.cluster.head import HEAD_RESOURCE

        task = self._ray.remote(fn).options(
            num_cpus=0, resources={HEAD_RESOURCE: 0.001}, max_retries=0
        )
        return self._told(lambda: task.remote(*args), f"running {fn.__name__} on the head")

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the cluster's store {self.name!r}: this client was closed")

    def _write(self, method: str, *args: Any) -> None:
        self._check_open()
        call = StoreCall(method, args)
        open_batch = self._batches
        if open_batch.depth > 0:
            open_batch.held.append(call)
            return
        self._told(lambda: self._actor.write.remote([call], PROTOCOL), method)

    def _read(self, method: str, *args: Any, **kwargs: Any) -> Any:
        self._check_open()
        call = StoreCall(method, args, kwargs)
        held = self._batches.held
        if held:
            within = list(held)
            return self._asked(
                lambda: self._actor.read_within.remote(within, call, PROTOCOL), method
            )
        return self._asked(lambda: self._actor.call.remote(call, PROTOCOL), method)

    def _answering(self, method: str, *args: Any) -> Any:
        self._check_open()
        open_batch = self._batches
        if open_batch.depth > 0 and method == "take_commands":
            held, open_batch.held = open_batch.held, []
            open_batch.base += len(held)
            call = StoreCall(method, args)
            return self._told(lambda: self._actor.write_then.remote(held, call, PROTOCOL), method)
        if open_batch.depth > 0:
            raise StoreError(
                f"{method} inside a batch of a cluster's store: its answer cannot wait for the"
                " batch to commit; call it outside the batch"
            )
        answering = StoreCall(method, args)
        return self._told(lambda: self._actor.call.remote(answering, PROTOCOL), method)

    # ---- batches ---------------------------------------------------------------------------

    def batch(self) -> AbstractContextManager[None]:
        return self._batch()

    @contextlib.contextmanager
    def _batch(self) -> Iterator[None]:
        self._check_open()
        mine = self._batches  # this thread's (see the module)
        mark = mine.base + len(mine.held)  # counted over what this batch sent already
        mine.depth += 1
        try:
            yield
        except BaseException:
            # a savepoint's writes, or the whole batch's, undone (but for those a claim of
            # commands committed meanwhile: ``take_commands``)
            del mine.held[max(0, mark - mine.base) :]
            raise
        finally:
            mine.depth -= 1
            if mine.depth == 0:
                mine.base = 0
        if mine.depth == 0 and mine.held:
            calls, mine.held = mine.held, []
            if not self._closed:  # (closed meanwhile by another thread: dropped, as before)
                self._told(lambda: self._actor.write.remote(calls, PROTOCOL), "a batch")

    # ---- runs and transitions --------------------------------------------------------------

    def save_run(self, record: RunRecord) -> None:
        self._write("save_run", record)

    def mail_recording(self) -> MailRecording:
        """Nobody: a sender's record would be a call to the head of its own (a millisecond)
        for each flush of mail, where the supervisor's group commit carries it with the
        rest, so mail goes through the supervisor."""
        return MailRecording.NONE

    def get_run(self, run_id: str) -> RunRecord | None:
        result: RunRecord | None = self._read("get_run", run_id)
        return result

    def get_runs(self, run_ids: Collection[str]) -> dict[str, RunRecord]:
        result: dict[str, RunRecord] = self._read("get_runs", list(run_ids))
        return result

    def ended_among(self, run_ids: Collection[str]) -> list[str]:
        """(The head's store answers with the ids alone: no record sent.)"""
        result: list[str] = self._read("ended_among", list(run_ids))
        return result

    def ended_by_others(self) -> list[str] | None:
        return None  # (the other nodes' and processes' writes are not seen: a round a poll)

    def list_runs(
        self,
        *,
        statuses: Iterable[RunStatus] | None = None,
        root_run_id: str | None = None,
        agent: str | None = None,
        limit: int | None = None,
        include_archived: bool = False,
        damaged: list[DamagedRow] | None = None,
    ) -> list[RunRecord]:
        """(``damaged``: the head leaves a damaged row out and names it, as data, filled in
        here; inside a batch, as the listing would read after its held writes.)"""
        kwargs: dict[str, Any] = {
            "statuses": None if statuses is None else list(statuses),
            "root_run_id": root_run_id,
            "agent": agent,
            "limit": limit,
        }
        if include_archived:  # a keyword only SQLiteStore has
            kwargs["include_archived"] = True
        if damaged is not None:
            return list(self._sparing(StoreCall("list_runs", (), kwargs), damaged))
        result: list[RunRecord] = self._read("list_runs", **kwargs)
        return result

    def _sparing(self, call: StoreCall, damaged: list[DamagedRow]) -> Any:
        """A listing (``call``) read by the head with its damaged rows left out, each named
        back as data and filled in ``damaged`` here; inside a batch, as the listing would
        read after its held writes."""
        self._check_open()
        held = list(self._batches.held)
        found = self._asked(
            lambda: self._actor.list_runs_sparing.remote(call, held, PROTOCOL), call.method
        )
        records, named = found
        damaged.extend(DamagedRow.from_data(data) for data in named)
        return records

    def append_event(self, event: Event) -> None:
        self._write("append_event", event)

    def events(self, run_id: str) -> list[Event]:
        result: list[Event] = self._read("events", run_id)
        return result

    def events_after(self, seq: int, *, limit: int = 1000) -> list[StoredEvent]:
        result: list[StoredEvent] = self._read("events_after", seq, limit=limit)
        return result

    def last_event_seq(self) -> int:
        result: int = self._read("last_event_seq")
        return result

    # ---- live previews ---------------------------------------------------------------------

    def save_preview(self, preview: Preview) -> None:
        self._write("save_preview", preview)

    def drop_preview(self, run_id: str) -> None:
        self._write("drop_preview", run_id)

    def previews(self, run_ids: Collection[str]) -> dict[str, Preview]:
        result: dict[str, Preview] = self._read("previews", list(run_ids))
        return result

    # ---- checkpoints -----------------------------------------------------------------------

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._write("save_checkpoint", checkpoint)

    def add_to_checkpoint(self, delta: CheckpointDelta) -> None:
        self._write("add_to_checkpoint", delta)

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        result: Checkpoint | None = self._read("load_checkpoint", run_id)
        return result

    # ---- mail ------------------------------------------------------------------------------

    def save_mail(self, mail: Mail) -> None:
        self._write("save_mail", mail)

    def save_mails(self, mails: Sequence[Mail]) -> None:
        self._write("save_mails", list(mails))

    def set_mail_state(self, mail_id: str, state: MailState) -> None:
        self._write("set_mail_state", mail_id, state)

    def set_mails_state(self, mail_ids: Sequence[str], state: MailState) -> None:
        self._write("set_mails_state", list(mail_ids), state)

    def mail_for(self, run_id: str, states: Iterable[MailState] | None = None) -> list[Mail]:
        result: list[Mail] = self._read(
            "mail_for", run_id, None if states is None else list(states)
        )
        return result

    # ---- journals --------------------------------------------------------------------------

    def save_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        self._write("save_journal", run_id, list(entries))

    def journal_of(self, run_id: str) -> list[JournalEntry]:
        result: list[JournalEntry] = self._read("journal_of", run_id)
        return result

    # ---- topic subscriptions ---------------------------------------------------------------

    def save_subscription(self, subscription: Subscription) -> None:
        self._write("save_subscription", subscription)

    def drop_subscriptions(self, run_id: str, topics: Collection[str] | None = None) -> None:
        self._write("drop_subscriptions", run_id, None if topics is None else list(topics))

    def subscriptions(self, run_ids: Collection[str] | None = None) -> list[Subscription]:
        result: list[Subscription] = self._read(
            "subscriptions", None if run_ids is None else list(run_ids)
        )
        return result

    # ---- outcomes --------------------------------------------------------------------------

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        self._write("save_outcome", outcome, delivered)

    def mark_outcome_delivered(self, run_id: str) -> None:
        self._write("mark_outcome_delivered", run_id)

    def undelivered_outcomes(self) -> list[Outcome]:
        result: list[Outcome] = self._read("undelivered_outcomes")
        return result

    # ---- commands --------------------------------------------------------------------------

    def post_command(self, kind: str, run_id: str, content: str | None = None) -> int:
        """The command's id; 0 inside a batch, where it is held and committed with the batch
        (see the module)."""
        if self._batches.depth > 0:
            self._write("post_command", kind, run_id, content)
            return 0
        result: int = self._answering("post_command", kind, run_id, content)
        return result

    def take_commands(self, run_ids: Collection[str] | None = None) -> list[Command]:
        result: list[Command] = self._answering(
            "take_commands", None if run_ids is None else list(run_ids)
        )
        return result

    def pending_command_runs(self) -> list[str]:
        result: list[str] = self._read("pending_command_runs")
        return result

    # ---- approvals -------------------------------------------------------------------------

    def save_approval(self, approval: ApprovalRecord) -> None:
        self._write("save_approval", approval)

    def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        result: ApprovalRecord | None = self._read("get_approval", approval_id)
        return result

    def list_approvals(
        self,
        *,
        pending: bool = True,
        root_run_id: str | None = None,
        run_id: str | None = None,
        damaged: list[DamagedRow] | None = None,
    ) -> list[ApprovalRecord]:
        """(``damaged``: as ``list_runs``'s, named by the head as data.)"""
        kwargs = {"pending": pending, "root_run_id": root_run_id, "run_id": run_id}
        if damaged is not None:
            return list(self._sparing(StoreCall("list_approvals", (), kwargs), damaged))
        result: list[ApprovalRecord] = self._read("list_approvals", **kwargs)
        return result

    def answer_approval(
        self,
        approval_id: str,
        allow: bool,
        answer: str | None = None,
        remember: str | None = None,
    ) -> ApprovalRecord:
        result: ApprovalRecord = self._answering(
            "answer_approval", approval_id, allow, answer, remember
        )
        return result

    # ---- leases ----------------------------------------------------------------------------

    def acquire_lease(self, lease: Lease) -> int:
        result: int = self._answering("acquire_lease", lease)
        return result

    def renew_lease(self, lease: Lease) -> bool:
        result: bool = self._answering("renew_lease", lease)
        return result

    def release_lease(self, owner: str, epoch: int | None = None) -> None:
        self._write("release_lease", owner, epoch)

    def check_fence(self, owner: str, epoch: int) -> None:
        """Held with the batch's writes (first, by ``store.fencing``) and run on the head
        inside the transaction that applies them: a fenced batch is refused whole there."""
        self._write("check_fence", owner, epoch)

    def leases(self) -> list[Lease]:
        result: list[Lease] = self._read("leases")
        return result

    def host_listed(self, name: str) -> bool:
        """Whether Ray still lists the detached tree host ``name`` (alive, or being started
        again after its process died): what ``store.leases.Liveness`` asks of a run whose
        lease is gone, to tell a tree being restarted from an orphaned one."""
        from subagents.cluster.tree_hosts import tree_host_listed

        return tree_host_listed(name)

    def __enter__(self) -> ClusterStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """This client is done (the store itself keeps serving the cluster)."""
        self._closed = True
        self._batches.held.clear()  # (another thread's open batch is dropped at its end)


def open_cluster_store(address: str, *, name: str = HEAD_ACTOR) -> ClusterStore:
    """The running store of the cluster at ``address``: a ``ClusterError`` (saying what to do)
    if Ray is missing, the cluster unreachable, or no runtime ever started a store there."""
    try:
        return ClusterStore.connect(address, name=name, create=False)
    except StoreError as exc:
        raise ClusterError(str(exc)) from exc
