"""The console put together and served by uvicorn on a socket already bound.

Why bound first (``serve_cmd.bind``): with ``--port 0`` the port is known only once bound,
and the guard must know it (the Host header it accepts, the cookie's name) before the first
request; and the URL is printed once the console can answer it.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from subagents.console.actions import ContinueCommand
from subagents.console.app import Console, Settings
from subagents.console.feed import StoreFeed
from subagents.console.guard import Guard, served_hosts
from subagents.console.limits import ACCEPT_BATCH, HEAD_BYTES, Limits
from subagents.console.protocol import protocol_for
from subagents.console.store_file import StoreFile
from subagents.console.tls import Tls

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore


PLAIN_HTTP_WARNING = (
    ". WARNING: plain HTTP (--plain-http): the token and every page travel unencrypted;"
    " anyone who sees the traffic can take the token and steer every run. Serve HTTPS"
    " (--tls-cert FILE --tls-key FILE) or keep it on loopback and tunnel (ssh -L)"
)


def say(text: str) -> None:
    """A line for the person who started the console (stderr: stdout has the URL only)."""
    sys.stderr.write(f"subagents serve: {text}\n")
    sys.stderr.flush()


def build(
    store: InspectedStore,
    *,
    host: str,
    port: int,
    token: str,
    continuation: ContinueCommand | None,
    limits: Limits,
    tls: Tls | None = None,
) -> tuple[Console, Guard]:
    """The console over ``store`` (read whole now) and the guarded application to serve."""
    feed = StoreFeed(store)
    feed.load()
    settings = Settings(token=token, store=str(store.path), continuable=continuation is not None)
    local = not isinstance(getattr(store, "key", None), str)  # not a cluster's store
    store_file = StoreFile(Path(store.path)) if local else None
    console = Console(
        feed, settings, continuation=continuation, store_file=store_file, limits=limits
    )
    secure = tls is not None
    hosts = served_hosts(host, port, tls=secure)
    return console, Guard(console.app, token=token, hosts=hosts, port=port, tls=secure)


def url_of(host: str, port: int, token: str, tls: bool = False) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}/?token={token}"


def _server(app: Guard, limits: Limits, tls: Tls | None = None) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        ssl_certfile=tls.cert if tls is not None else None,
        ssl_keyfile=tls.key if tls is not None else None,
        http=protocol_for(limits, app),  # h11's, with deadlines (console/limits.py)
        h11_max_incomplete_event_size=HEAD_BYTES,
        backlog=ACCEPT_BATCH,
        # no websockets here: with a websocket library installed (uvicorn[standard]) an
        # Upgrade request left ConsoleProtocol for uvicorn's websocket protocol, its close
        # never counted, a stranger's connection held in admission for ever
        ws="none",
        # no proxy in front (the Host and Origin checks refuse one): X-Forwarded-For and
        # -Proto from a loopback client are a stranger's to write, not to be believed
        proxy_headers=False,
        log_config=None,
        log_level="error",  # not a line on the terminal for each bad request a stranger sends
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    return uvicorn.Server(config)


def serve(
    store: InspectedStore,
    sock: socket.socket,
    *,
    host: str,
    token: str,
    agents: Sequence[Path],
    offline: bool,
    exposed: bool,
    limits: Limits,
    tls: Tls | None = None,
) -> int:
    """Serve the console on ``sock`` until Ctrl-C (the way it is meant to end: 0) or
    SIGTERM; prints its URL on stdout."""
    port = sock.getsockname()[1]
    on_cluster = isinstance(getattr(store, "key", None), str)
    continuation = None if on_cluster else ContinueCommand.of(store.path, agents, offline=offline)
    started = time.monotonic()
    console, app = build(
        store, host=host, port=port, token=token, continuation=continuation, limits=limits, tls=tls
    )
    say(
        f"{store.path}: {len(console.index)} runs read in {time.monotonic() - started:.2f}s;"
        " Ctrl-C stops serving (the runs go on)"
    )
    if exposed:
        say(
            f"serving on {host}, which is not loopback: anyone who reaches {host}:{port} with"
            " the token reads every run's conversation and can stop, mail and continue runs"
            + ("; over HTTPS" if tls is not None else PLAIN_HTTP_WARNING)
        )
    console.on_ready = lambda: print(url_of(host, port, token, tls is not None), flush=True)
    console.on_gone = say
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises it again once shut down
        _server(app, limits, tls).run(sockets=[sock])
    say("stopped serving")
    return 0


@contextlib.contextmanager
def serving_in_thread(
    app: Guard, sock: socket.socket, limits: Limits | None = None
) -> Iterator[uvicorn.Server]:
    """Serve ``app`` on ``sock`` from a thread of this process for the block (a program
    embedding the console; benchmarks/console.py)."""
    server = _server(app, limits or Limits())
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="console", daemon=True
    )
    thread.start()
    try:
        while not server.started and thread.is_alive():
            time.sleep(0.01)
        yield server
    finally:
        server.should_exit = True
        thread.join(10)
