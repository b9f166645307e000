"""Which runtime hosts a run: so that two runtimes sharing one store never both run it.

Each runtime stamps the runs it hosts with its owner id, ``host:pid:nonce``. When a runtime
starts on a store, it takes up only unfinished runs whose owner is gone: a runtime of this
process that was closed, a process on this host that no longer exists, or a run never
stamped. Runs of a live runtime, or of another host (which cannot be checked from here), are
left to their owner.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading

_live: set[str] = set()
_lock = threading.Lock()


def new_owner() -> str:
    """A fresh owner id for a runtime of this process, alive until ``release_owner``."""
    owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    with _lock:
        _live.add(owner)
    return owner


def release_owner(owner: str) -> None:
    """The runtime of ``owner`` closed: its unfinished runs may be taken up."""
    with _lock:
        _live.discard(owner)


def owner_alive(owner: str | None) -> bool:
    """Whether the runtime named by ``owner`` may still be running its runs."""
    if not owner:
        return False
    parts = owner.split(":")
    if len(parts) != 3:
        return False
    host, pid_text, _ = parts
    if host != socket.gethostname():
        return True  # cannot tell from here: assume its owner still has it
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    if pid == os.getpid():
        with _lock:
            return owner in _live
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
