"""Serve the console: a web page over the store, live (`subagents serve`).

`subagents serve [--state DB | --ray ADDRESS] [--port P] [--host 127.0.0.1] [--expose]
[--tls-cert FILE [--tls-key FILE] | --plain-http] [--max-connections N] [--max-streams N]`
reads the store, listens on HOST:P (127.0.0.1 by default; --port 0 picks a free port) and
prints the console's URL with a token, `http://127.0.0.1:P/?token=...`, as Jupyter does:
open it in a browser. The page shows the tree of runs as it changes (status, agent, depth,
elapsed time, tokens, cost), filtered by status, agent, label or requester; each run's page
shows its conversation, tool calls, mail, events and usage, and can stop it, mail it or
continue it. Without the token every request is refused; a request naming another host is
refused (DNS rebinding); writes must come from the console's own page. An address that is not
loopback needs --expose, and --tls-cert (HTTPS) or --plain-http (the token in clear on the
network, said at start). --agents DIR and --offline are what a continuation is started with
(as `subagents continue` takes them). Past --max-connections open connections or
--max-streams pages following changes, a request is answered 503 saying which; a client
that sends its request too slowly, or reads nothing of its answer, is cut off
(console/limits.py). Ctrl-C stops serving; the runs go on.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import ipaddress
import secrets
import socket
from pathlib import Path

from subagents.cli.command import reports_errors, store_errors
from subagents.cli.state import (
    EXIT_USAGE,
    CliError,
    add_store_arguments,
    is_directory,
    open_inspected_store,
)
from subagents.console.limits import DEFAULT_CONNECTIONS, DEFAULT_STREAMS, Limits
from subagents.console.tls import Tls, checked_tls

NAME = "serve"
DEFAULT_PORT = 8765
WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_arguments(parser)
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        metavar="P",
        help=f"the port to listen on (default {DEFAULT_PORT}; 0: a free one)",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="the address to listen on (default 127.0.0.1: this machine only)",
    )
    _add_exposure_arguments(parser)
    parser.add_argument(
        "--agents",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="definitions' folder a continuation loads (repeatable; as `subagents continue`)",
    )
    parser.add_argument(
        "--max-connections",
        type=_positive,
        default=DEFAULT_CONNECTIONS,
        metavar="N",
        help=f"open connections with the token (pages, scripts) answered; past them, 503"
        f" (default {DEFAULT_CONNECTIONS}; those without it are bounded apart)",
    )
    parser.add_argument(
        "--max-streams",
        type=_positive,
        default=DEFAULT_STREAMS,
        metavar="N",
        help=f"pages following changes at once; past them, 503 (default {DEFAULT_STREAMS})",
    )
    parser.add_argument(
        "--offline",
        action="store_true",
        help="continuations run on the offline scripted model (as `subagents continue`)",
    )


def _add_exposure_arguments(parser: argparse.ArgumentParser) -> None:
    """--expose and how the token travels off loopback (HTTPS, or plain HTTP acknowledged)."""
    parser.add_argument(
        "--expose",
        action="store_true",
        help="allow a --host that is not loopback: whoever reaches it with the token sees and"
        " steers every run",
    )
    how = parser.add_mutually_exclusive_group()  # HTTPS, or plain HTTP acknowledged: one
    how.add_argument(
        "--tls-cert",
        type=Path,
        metavar="FILE",
        help="serve HTTPS with this certificate (PEM; with its private key, or give --tls-key)",
    )
    parser.add_argument(
        "--tls-key", type=Path, metavar="FILE", help="the certificate's private key (PEM)"
    )
    how.add_argument(
        "--plain-http",
        action="store_true",
        help="with --expose and no --tls-cert: serve plain HTTP anyway (the token travels in"
        " clear: anyone on the network path can read it)",
    )


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return number


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def canonical(host: str) -> str:
    """``host`` as a browser writes it in the Host header: lower case, an IP address in its
    short form (``0:0:0:0:0:0:0:1`` is ``::1``, ``127.1`` is ``127.0.0.1``), since the
    console answers only the names it serves as."""
    host = host.strip().strip("[]").lower()
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:  # the short IPv4 forms a browser accepts too (127.1): as inet_aton reads them
        return socket.inet_ntoa(socket.inet_aton(host)) if host[:1].isdigit() else host
    except OSError:
        return host


def checked_host(host: str, expose: bool, tls: Tls | None = None, plain: bool = False) -> str:
    """The address to bind; ``CliError`` for a wildcard, or another than loopback without
    ``expose``, or without ``tls`` unless ``plain`` (plain HTTP acknowledged)."""
    host = canonical(host)
    if host in WILDCARDS:
        raise CliError(
            f"--host {host or '(empty)'}: give the one address people will open (the console"
            " refuses requests naming any other host, so a wildcard would refuse them all)",
            EXIT_USAGE,
        )
    if not loopback(host) and not expose:
        raise CliError(
            f"--host {host} is not loopback: anyone who can reach {host} and has the token"
            " could read every run's conversation and stop, mail and continue runs; give"
            " --expose (with --tls-cert FILE, or --plain-http) to serve it there anyway",
            EXIT_USAGE,
        )
    if not loopback(host) and tls is None and not plain:
        raise CliError(
            f"--host {host} --expose over plain HTTP: the token (in the URL, then in a cookie"
            " on every request) would travel in clear, readable by anyone on the network path;"
            " give --tls-cert FILE (and --tls-key FILE) to serve HTTPS, or --plain-http to"
            " serve plain HTTP anyway (or keep the console on loopback and tunnel: ssh -L)",
            EXIT_USAGE,
        )
    return "127.0.0.1" if host == "localhost" else host


def bind(host: str, port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise CliError(f"--port {port}: not a port (0 to 65535)", EXIT_USAGE)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CliError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            + ("; --port 0 picks a free port" if port else "")
        ) from exc
    sock.listen(128)
    sock.setblocking(False)
    return sock


@reports_errors(NAME)
def run(args: argparse.Namespace) -> int:
    try:
        from subagents.console.protocol import uvicorn_problem
        from subagents.console.serving import serve
    except ImportError as exc:  # the `console` extra is not installed
        raise CliError(
            f"the console needs Starlette, uvicorn and sse-starlette ({exc.msg}): pip install"
            " 'subagents[console]'"
        ) from exc
    changed = uvicorn_problem()
    if changed is not None:  # a uvicorn release changed what the console's deadlines extend
        raise CliError(
            f"the console extends uvicorn's HTTP/1.1 protocol, and the installed uvicorn"
            f" {importlib.metadata.version('uvicorn')} lacks {changed}: install the one the"
            " `console` extra was tested with (pip install 'uvicorn>=0.31.1,<0.55')"
        )
    tls = checked_tls(args.tls_cert, args.tls_key)
    host = checked_host(args.host, args.expose, tls, args.plain_http)
    for folder in args.agents:  # said now, as `run` says it, not at a continuation's start
        if not is_directory(folder, f"--agents {folder}"):
            raise CliError(f"--agents {folder}: not a directory", EXIT_USAGE)
    with open_inspected_store(args) as store, store_errors():
        sock = bind(host, args.port)
        try:
            return serve(
                store,
                sock,
                host=host,
                token=secrets.token_hex(24),
                agents=args.agents,
                offline=args.offline,
                exposed=not loopback(host),
                tls=tls,
                limits=Limits(connections=args.max_connections, streams=args.max_streams),
            )
        finally:
            sock.close()
