"""The console's web application: its pages, its JSON, its stream of changes, its actions.

Why this shape: Starlette routes (no home-made HTTP server), the pages static files (plain
HTML, JS and CSS, shipped in the wheel, no build step) that read JSON from ``/api/`` and
draw every text with ``textContent``; changes come as server-sent events (sse-starlette)
from one poller task that keeps the index equal to the store (``feed.StoreFeed``) and hands
each batch of changed rows to every open stream, which sends what its filter keeps. Store
reads run on worker threads (``anyio.to_thread``) under one lock with the poller, so the
event loop never waits on SQLite and the index is never read while it changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import msgspec
import structlog
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from subagents.cli.state import CliError
from subagents.console import actions
from subagents.console.approvals import answer, listed
from subagents.console.hub import ENDED, Batch, Ended, Hub, Inbox
from subagents.console.index import BadFilter, Page, RunFilter
from subagents.console.limits import Limits, capped, clipped, named_damage
from subagents.console.run_page import run_page
from subagents.store.base import DamagedRow, StoreError

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from subagents.cli.state import InspectedStore
    from subagents.console.feed import StoreFeed
    from subagents.console.store_file import StoreFile

log = structlog.get_logger("subagents.console")

STATIC = Path(__file__).resolve().parent / "static"
POLL_S = 0.1
"""How often the store is asked what changed: an update reaches the page within about this
(benchmarks/console.py measures it)."""
BODY_CAP = 6 * actions.TEXT_CAP + 64 * 1024
"""The most bytes a write's body may have: a text at ``actions.TEXT_CAP`` escaped as JSON at
worst (``\\uXXXX``, 6 bytes a character) and room to spare. A longer one is refused as it comes
(413), not read whole into memory first."""
SHUTDOWN_GRACE_S = 1.0
"""How long a stream has to end by itself once the server stops (Ctrl-C): under uvicorn's
graceful shutdown (``serving``), so that no stream is cut off mid-response (uvicorn says
"ASGI callable returned without completing response" for each one that is)."""


T = TypeVar("T")


_PART = r"(?!\.\.?(?:/|$))[^/]+"
"""One part of a run id between slashes: not empty, not ``.`` or ``..``."""


class _RunIdConvertor(Convertor[str]):
    """A run id in a path, slashes and all (sent as %2F; the server matches the decoded
    path): a store edited by hand, or a cluster peer's, can hold ``a/b``, whose page did not
    open (Starlette's ``{run_id}`` stops at a slash). Parts neither empty nor ``.``/``..``
    (``/api/runs/`` is still redirected to ``/api/runs``; a path climbing with ``..%2f`` is
    404, as for the static files); an action is the path's last part."""

    regex = _PART + "(?:/" + _PART + ")*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("run_id", _RunIdConvertor())


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """What the page is told about the console (``/api/session``)."""

    token: str
    store: str
    continuable: bool
    """Whether runs can be continued from here (not on a cluster's store)."""


class Console:
    """The application over one store: ``app`` is the ASGI application (wrap it in
    ``guard.Guard`` before serving it)."""

    def __init__(
        self,
        feed: StoreFeed,
        settings: Settings,
        *,
        continuation: actions.ContinueCommand | None,
        store_file: StoreFile | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.feed = feed
        self.store: InspectedStore = feed.store
        self.index = feed.index
        self.settings = settings
        self.continuation = continuation
        self.lock = threading.Lock()
        self.hub = Hub()
        self.limits = limits or Limits()
        self.version = 0
        """Batches of changes published so far (each page says which it holds)."""
        self.store_file = store_file
        self.gone: str | None = None
        """Why the store is no longer the file at its path (``store_file.StoreFile``): then
        every data request is answered 503 saying so, and nothing more is polled."""
        self.on_gone: Callable[[str], None] = lambda why: log.error(why)
        self.on_ready: Callable[[], None] | None = None
        """Called once the server has started the console (``serving.serve`` prints the URL
        then: a Ctrl-C from then on is the server's to handle, whenever it comes)."""
        self.routes = Starlette(
            routes=[
                Route("/", self.page_tree),
                Route("/runs/{run_id:run_id}", self.page_run),
                Route("/api/session", self.session),
                Route("/api/runs", self.runs),
                Route("/api/runs/{run_id:run_id}", self.run),
                Route("/api/stream", self.stream),
                Route("/api/runs/{run_id:run_id}/{action}", self.act, methods=["POST"]),
                Route("/api/approvals", self.approvals),
                Route("/api/approvals/{approval_id}/{answer}", self.answer, methods=["POST"]),
                Mount("/static", StaticFiles(directory=STATIC), name="static"),
            ],
            lifespan=self.lifespan,
        )

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI application: the routes, or 503 for data once the store is gone."""
        data = scope["type"] == "http" and scope["path"].startswith("/api/")
        if self.gone is not None and data and scope["path"] != "/api/session":
            await _error(self.gone, 503)(scope, receive, send)
            return
        await self.routes(scope, receive, send)

    async def _locked(self, call: Callable[[], T]) -> T:
        def locked() -> T:
            with self.lock:
                return call()

        return await anyio.to_thread.run_sync(locked)

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        task = asyncio.get_running_loop().create_task(self._poll_forever())
        try:
            if self.on_ready is not None:
                self.on_ready()
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _poll(self) -> Batch:
        """The changes and their batch's number (under the lock, with the index)."""
        changes = self.feed.poll()
        if changes.rows:
            self.version += 1
        return Batch(
            rows=changes.rows,
            touched=changes.touched,
            approvals=changes.approvals,
            version=self.version,
            total=len(self.index),
        )

    async def _poll_forever(self) -> None:
        failing = False
        while True:
            if self.store_file is not None and (why := self.store_file.gone()) is not None:
                self.gone = why
                self.on_gone(why)
                self.hub.end()  # each page reads again, shows why it cannot; streams end
                return
            try:
                batch = await self._locked(self._poll)
            except Exception as exc:  # a poller that died would leave every page stale
                if not failing:
                    log.error("the store cannot be followed", error=str(exc), exc_info=True)
                failing = True
                await asyncio.sleep(1.0)
                continue
            failing = False
            if batch.touched or batch.approvals:
                self.hub.publish(batch)
            await asyncio.sleep(POLL_S)

    # ---- pages --------------------------------------------------------------------------------

    async def page_tree(self, _request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def page_run(self, _request: Request) -> Response:
        return FileResponse(STATIC / "run.html")

    # ---- data ---------------------------------------------------------------------------------

    async def session(self, _request: Request) -> Response:
        return _json(self.settings)

    async def runs(self, request: Request) -> Response:
        try:
            keep = RunFilter.parse(request.query_params)
        except BadFilter as exc:
            return _error(str(exc), 400)
        before = request.query_params.get("before") or None

        def read() -> Page:
            page = self.index.page(keep, before=before)
            damaged = named_damage(self.feed.damaged.items())
            return msgspec.structs.replace(page, version=self.version, damaged=damaged)

        return _json(await self._locked(read))

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]

        def read() -> Any:
            found = actions.find_run(self.store, run_id).run_id  # a short id too
            return run_page(
                self.store, found, self.index, continuable=self.continuation is not None
            )

        try:
            return _json(await self._locked(read))
        except actions.ActionError as exc:
            return _error(str(exc), exc.status)
        except CliError as exc:
            return _error(str(exc), 404)
        except StoreError as exc:
            return _store_failed(exc)

    async def stream(self, request: Request) -> Response:
        try:
            keep = RunFilter.parse(request.query_params)
        except BadFilter as exc:
            return _error(str(exc), 400)
        watched = request.query_params.get("run") or None
        if request.method == "HEAD":  # its head alone: no stream (one would hold a slot for
            # ever, its body never sent and its client's going never heard)
            return Response(media_type="text/event-stream")
        if len(self.hub.inboxes) >= self.limits.streams:
            return _error(
                f"this console already has {self.limits.streams} open streams (a page follows"
                " changes over one): close some pages, or start `subagents serve"
                " --max-streams N` with a larger N",
                503,
            )
        inbox = self.hub.subscribe()
        opened = msgspec.json.encode({"version": self.version}).decode()
        shutdown = anyio.Event()  # set by sse-starlette when the server is stopping

        async def events() -> AsyncIterator[dict[str, str]]:
            try:  # the changes published before this stream opened go up to ``version``
                yield {"event": "ready", "data": opened}
                while True:
                    batch = await _next_batch(inbox, shutdown)
                    if isinstance(batch, Ended):
                        return  # the stream ends as a complete response, not cut off
                    if batch is None:
                        yield {"event": "reload", "data": "{}"}
                        continue
                    if batch.approvals:
                        yield {"event": "approvals", "data": "{}"}
                    if watched is not None:
                        if watched in batch.touched or any(r.parent == watched for r in batch.rows):
                            yield {"event": "run", "data": msgspec.json.encode(watched).decode()}
                    else:
                        shown, gone = self.index.changed(batch.rows, keep)
                        if shown or gone:
                            changed = {"rows": shown, "gone": gone, "version": batch.version}
                            changed["total"] = batch.total
                            yield {"event": "rows", "data": msgspec.json.encode(changed).decode()}
            finally:
                self.hub.unsubscribe(inbox)

        return EventSourceResponse(
            events(), ping=15, shutdown_event=shutdown, shutdown_grace_period=SHUTDOWN_GRACE_S
        )

    # ---- actions ------------------------------------------------------------------------------

    async def act(self, request: Request) -> Response:
        run_id, action = request.path_params["run_id"], request.path_params["action"]
        body = await _json_body(request, self.limits.body_timeout_s)
        if isinstance(body, Response):
            return body
        text = body.get("text")
        store = self.store
        doing: dict[str, Callable[[], actions.Posted]] = {
            "stop": lambda: actions.stop(store, run_id),
            "send": lambda: actions.send(store, run_id, text),
        }
        if self.continuation is not None:
            command = self.continuation
            doing["continue"] = lambda: actions.continue_run(store, run_id, text, command=command)
        if action not in doing:
            return _error(f"no action {clipped(action)!r} here ({', '.join(sorted(doing))})", 404)
        try:
            # continuing starts a process and waits for it: not under the index's lock
            posted = await anyio.to_thread.run_sync(doing[action])
        except actions.ActionError as exc:
            return _error(str(exc), exc.status)
        except StoreError as exc:
            return _store_failed(exc)
        log.info("console action", action=action, run_id=run_id, result=posted.run_id)
        return _json(posted)

    # ---- approvals (console/approvals.py) -----------------------------------------------

    async def approvals(self, request: Request) -> Response:
        run_id, shape = request.query_params.get("run") or None, request.query_params.get("v")
        try:
            return _json(await anyio.to_thread.run_sync(listed, self.store, run_id, shape))
        except actions.ActionError as exc:
            return _error(str(exc), exc.status)
        except StoreError as exc:
            return _store_failed(exc)

    async def answer(self, request: Request) -> Response:
        approval_id, verdict = request.path_params["approval_id"], request.path_params["answer"]
        if verdict not in ("allow", "deny"):
            return _error(f"no answer {clipped(verdict)!r}: allow or deny", 404)
        body = await _json_body(request, self.limits.body_timeout_s)
        if isinstance(body, Response):
            return body

        def give() -> Any:
            return answer(self.store, approval_id, verdict == "allow", body.get("reason"))

        try:
            answered = await anyio.to_thread.run_sync(give)
        except actions.ActionError as exc:
            return _error(str(exc), exc.status)
        except StoreError as exc:
            return _store_failed(exc)
        log.info("console answer", approval_id=approval_id, answer=answered.status)
        return _json(answered)


async def _next_batch(inbox: Inbox, shutdown: anyio.Event) -> Batch | Ended | None:
    """The stream's next batch (``None``: it fell behind), or ``ENDED`` once its inbox is
    ended or ``shutdown`` is set."""
    if shutdown.is_set():
        return ENDED
    getting = asyncio.ensure_future(inbox.get())
    stopping = asyncio.ensure_future(shutdown.wait())
    try:
        await asyncio.wait({getting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not getting.done():
            getting.cancel()
    return getting.result() if getting.done() and not getting.cancelled() else ENDED


async def _json_body(request: Request, timeout_s: float) -> dict[str, Any] | Response:
    """The request's JSON object, or the error to answer with: a body that does not come
    whole within ``timeout_s`` is not waited for (a client dribbling it would hold the
    request, and its connection, forever)."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return _error("send JSON (Content-Type: application/json)", 415)
    too_large = _error(f"the body is too large (over {BODY_CAP} bytes)", 413)
    announced = request.headers.get("content-length", "")
    if announced.isdigit() and int(announced) > BODY_CAP:
        return too_large
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(timeout_s) as late:
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > BODY_CAP:
                    return too_large
                chunks.append(chunk)
        except ClientDisconnect:  # gone before its body came: nobody reads the answer
            return _error("the client went away before its body came", 400)
    if late.cancelled_caught:
        return _error(f"the body did not come whole within {timeout_s:g} s", 408)
    try:
        body = msgspec.json.decode(b"".join(chunks))
    except msgspec.DecodeError as exc:
        return _error(f"the body is not JSON: {exc}", 400)
    except RecursionError:
        return _error("the body is JSON nested too deep", 400)
    if not isinstance(body, dict):
        return _error(f"the body must be a JSON object, not {actions.json_kind(body)}", 400)
    return body


def _json(value: Any, status: int = 200) -> Response:
    return Response(msgspec.json.encode(value), status, media_type="application/json")


def _store_failed(exc: StoreError) -> Response:
    """409 for a damaged row (it is at fault, and asking again will not mend it), else 503."""
    return _error(str(exc), 409 if isinstance(exc, DamagedRow) else 503)


def _error(message: str, status: int) -> Response:
    """An error answered as JSON; its message ``capped``."""
    return JSONResponse({"error": capped(message)}, status)
