"""The `subagents` command's entry point (``subagents.cli.main.main``) called in the test's own
process, isolated as a new interpreter would isolate it, and answered as ``subprocess.run``
answers (a ``CompletedProcess`` with the exit code, stdout and stderr as text).

Why: a command in a subprocess is an interpreter start and the package's imports, ~0.3-0.5 s
each and more under load; the CLI tests ran hundreds of them (session 29's census: tests/cli
was 35% of the suite's time). Most are a command that reads or answers the store (`ps`,
`info`, `approve`, an unknown run id, a bad flag) where the new interpreter is not what is
tested. Those run here; what needs a process of its own (a run's host, a fork, signals, a
terminal, bytes that are not UTF-8 in argv, the console script, a second writer at the same
time) stays a subprocess (``clikit.Cli``'s ``process``).

What a subprocess isolated, and what is done here for each:
- the environment: ``os.environ`` is the command's for the call, then restored whole;
- the working directory: changed for the call, then restored;
- stdin, stdout, stderr: byte buffers under text streams with the encoding and error handler
  a child's pipes get (``_child_streams``, asked once of a real child), never a terminal;
  the output decoded as ``subprocess.run(text=True)`` decodes a child's (the locale's
  encoding, strictly; line ends made ``\\n``);
- the exit code: ``main``'s return, or ``SystemExit``'s code as the interpreter reads it
  (argparse's usage errors), or 1 with the traceback on stderr for an exception (as an
  interpreter prints it);
- logging: structlog's configuration and ``subagents.logs``'s pending settings, which the
  command's flags set, restored after it;
- signal handlers: the ones a command could install, restored after it;
- module state: none of the commands run here keeps any a second call would see (their
  caches hold pure values: ``functools.cache`` of types and parsed built-ins); threads and
  files are checked instead: a command that leaves a thread an interpreter would wait for,
  or a file open (a store not closed), fails the test that ran it, naming what it left.
"""

from __future__ import annotations

import contextlib
import io
import locale
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import structlog

from subagents import logs
from subagents.cli.main import main

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGUSR1)
"""Those a command could take over (a subprocess's own die with it)."""

LINGER_S = 5.0
"""How long a thread the command started may take to end after it returned (a store's
closing thread, say) before it counts as left behind."""

_STREAMS: list[tuple[str, str]] = []


def _child_streams() -> tuple[str, str]:
    """The encoding and error handler of a child's stdio on pipes (``surrogateescape`` under a
    C or C.UTF-8 locale, ``strict`` under another UTF-8 one): asked once of a real child with
    this process's environment, so the output here is the bytes a child would write."""
    if not _STREAMS:
        probe = subprocess.run(
            [
                sys.executable,
                "-S",
                "-c",
                "import sys; print(sys.stdout.encoding, sys.stdout.errors)",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        encoding, errors = probe.stdout.split()
        _STREAMS.append((encoding, errors))
    return _STREAMS[0]


def _stream(data: bytes = b"") -> io.TextIOWrapper:
    encoding, errors = _child_streams()
    return io.TextIOWrapper(io.BytesIO(data), encoding=encoding, errors=errors)


def _bytes(stream: io.TextIOWrapper) -> bytes:
    """The bytes written to ``stream``."""
    stream.flush()
    raw: bytes = stream.buffer.getvalue()  # type: ignore[attr-defined]
    return raw


def _read(stream: io.TextIOWrapper) -> str:
    """What ``subprocess.run(text=True)`` makes of the bytes written to ``stream``."""
    text = _bytes(stream).decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _exit_code(exc: SystemExit) -> tuple[int, str]:
    """The exit status and what the interpreter prints for ``SystemExit(code)``."""
    code = exc.code
    if code is None:
        return 0, ""
    if isinstance(code, int):
        return code, ""
    return 1, f"{code}\n"


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@contextlib.contextmanager
def _environment(env: dict[str, str], cwd: Path) -> Iterator[None]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


@contextlib.contextmanager
def _logging_and_signals() -> Iterator[None]:
    configured = structlog.is_configured()
    saved = structlog.get_config()
    pending = logs._pending
    handlers = {number: signal.getsignal(number) for number in SIGNALS}
    try:
        yield
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
        logs._pending = pending
        if configured:
            structlog.configure(**saved)
        else:
            structlog.reset_defaults()


def _left_behind(threads: set[threading.Thread], fds: set[str]) -> str | None:
    """What the command left running or open, if anything (after letting its threads end):
    a thread that is not a daemon (an interpreter would wait for it at its exit: the command
    would not end) or a file (a store not closed). Only those: a server of the test's own
    (``FakeMessagesAPI``) starts daemon threads and opens sockets meanwhile, which are not
    the command's."""
    deadline = time.monotonic() + LINGER_S
    new = [t for t in set(threading.enumerate()) - threads if not t.daemon]
    for thread in new:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in new if t.is_alive()]
    if alive:
        return f"threads running: {alive}"
    files = []
    for fd in sorted(_open_fds() - fds):
        with contextlib.suppress(OSError):  # (gone since the listing: the listing's own)
            if stat.S_ISREG(os.stat(f"/proc/self/fd/{fd}").st_mode):
                files.append(f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}")
    return f"files open: {files}" if files else None


def run_main(
    argv: Sequence[str | bytes],
    *,
    env: dict[str, str],
    cwd: Path,
    stdin: str | bytes | None = None,
    text: bool = True,
) -> subprocess.CompletedProcess[Any]:
    """``subagents ARGV`` run by ``main`` here, with ``env`` as its whole environment, ``cwd``
    its working directory and ``stdin`` its input (none: an empty pipe); answered as
    ``subprocess.run(..., capture_output=True, text=text)`` would answer for a child: with
    ``text`` False, stdout and stderr are the bytes written. A word of ``argv`` given as
    bytes reaches ``main`` as an interpreter decodes its command line (``os.fsdecode``: a
    byte that is not UTF-8 becomes a lone surrogate)."""
    encoding, _errors = _child_streams()
    words = [os.fsdecode(word) for word in argv]
    out, err = _stream(), _stream()
    data = stdin.encode(encoding) if isinstance(stdin, str) else (stdin or b"")
    given = _stream(data)
    threads, fds = set(threading.enumerate()), _open_fds()
    streams = sys.stdin, sys.stdout, sys.stderr
    with _environment(env, cwd), _logging_and_signals():
        sys.stdin, sys.stdout, sys.stderr = given, out, err
        try:
            code = main(words)
        except SystemExit as exc:
            code, said = _exit_code(exc)
            err.write(said)
        except Exception:  # as an interpreter ends on an uncaught exception
            # (not a BaseException: pytest-timeout's hang guard and pytest's own outcomes
            # raise one in this thread, and must end the test, not become an exit code 1)
            traceback.print_exc(file=err)
            code = 1
        finally:
            sys.stdin, sys.stdout, sys.stderr = streams
    stdout, stderr = (_read(out), _read(err)) if text else (_bytes(out), _bytes(err))
    for stream in (given, out, err):
        stream.close()
    left = _left_behind(threads, fds)
    if left is not None:
        raise AssertionError(f"`subagents {' '.join(words)}` in process left {left}")
    return subprocess.CompletedProcess(["subagents", *words], code, stdout, stderr)
