"""``HeldStore``: a real SQLite store whose first record of one mail's content waits, in the
writing thread, before its transaction begins, until the test lets it go on.

Why: the fences on a sender's record of mail (the link's, the attempt's) decide inside the
record's transaction; a test must hold a record there while the supervisor moves the run on
(a timeout, a stop, a retry, a lost node), then let it commit, and see what the fence did.
Holding it in the store's own write path needs no change to the code under test."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from subagents.messages import Mail
from subagents.store.sqlite import SQLiteStore


class HeldStore(SQLiteStore):
    """Holds the first record holding a mail of ``content`` until ``release`` (``reached`` says
    it got there), then writes it as any; what that write raised is kept in ``error``, and
    ``done`` is set once it returned or raised."""

    def __init__(self, path: Path, content: str, wait_s: float) -> None:
        super().__init__(path)
        self.content, self.wait_s = content, wait_s
        self.reached, self.release, self.done = (
            threading.Event(),
            threading.Event(),
            threading.Event(),
        )
        self.error: BaseException | None = None
        self._held = False

    def save_mails_fenced(self, mails: Sequence[Mail], *args: Any, **kwargs: Any) -> None:
        if self._held or not any(m.content == self.content for m in mails):
            super().save_mails_fenced(mails, *args, **kwargs)
            return
        self._held = True
        self.reached.set()
        assert self.release.wait(self.wait_s)
        try:
            super().save_mails_fenced(mails, *args, **kwargs)
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            self.done.set()
