"""How a held command ended, in words, from what its reaper said on its status pipe
(``held.how_it_ended``): its own end, or the runtime's stop (the reaper's ``stopped`` line,
said when a stop reaches it while its command runs: ``reaper.STOPPED``)."""

from __future__ import annotations

import pytest

from subagents.tools.held import how_it_ended
from subagents.tools.process import exit_in


@pytest.mark.parametrize(
    ("said", "words"),
    [
        (b"exit 3\nreaped\n", "exit status 3"),
        (b"exit -9\nreaped\n", "killed by SIGKILL"),
        (b"stopped\nexit -15\nreaped\n", "stopped by the runtime: killed by SIGTERM"),
        (b"stopped\nexit 0\n", "stopped by the runtime: exit status 0"),
        (b"stopped\n", "stopped by the runtime"),  # its reaper killed before it said the end
        (b"", None),
        (b"exit -1", None),  # (not a whole line yet)
    ],
)
def test_an_end_in_words(said: bytes, words: str | None) -> None:
    assert how_it_ended(said) == words


def test_an_exit_after_a_stop_line_is_read() -> None:
    """A Bash command's exit code (``Process.exit_code``) after its reaper said ``stopped``."""
    assert exit_in(b"stopped\nexit 143\nreaped\n") == 143
