"""An outsider's arguments to the `subagents` commands (session 28): argv bytes that are not
UTF-8, control characters, shell metacharacters, huge values. Each is a clear error naming
what was wrong (bad usage, exit 2, or not found, exit 1), never a traceback.

Tried and held (no test of their own here, covered elsewhere or by the same code): a RUN
that is not UTF-8 for every command taking one (tests/cli/test_cli_text_input.py), `#0`,
`#-1`, `#999999`, `'' OR 1=1 --`, `%`, `_`, `*`, 100,000 characters, ANSI escapes and `$(id)`
as a RUN, an agent, a label, a status, a `--since`, a `--tail`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))  # clikit

from clikit import Cli

LATIN1 = "caf\xe9".encode("latin-1")  # 0xe9 at offset 3: not UTF-8


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _run(cli: Cli, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    """Bytes in and out (in this process for the commands that only read the store)."""
    return cli.raw(*args)


@pytest.mark.parametrize("command", ["approve", "deny"])
def test_an_approval_id_that_is_not_utf8_is_a_usage_error(cli: Cli, command: str) -> None:
    """An ID in another encoding (a Latin-1 terminal's bytes, lone surrogates in Python) names
    no approval: the store's look-up raised a bare UnicodeEncodeError (a traceback, exit 1)."""
    assert _run(cli, "run", "quick", "hi", "--agents", str(cli.agents)).returncode == 0
    proc = _run(cli, command, LATIN1)
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    assert proc.returncode == 2, err
    assert "ID is not UTF-8 text: byte 0xe9 at character 3" in err, err


@pytest.mark.parametrize("option", ["--agent", "--label"])
def test_a_ps_filter_that_is_not_utf8_is_a_usage_error(cli: Cli, option: str) -> None:
    """`ps --agent` in another encoding reached the store's query as lone surrogates (a
    UnicodeEncodeError traceback, exit 1); `--label` matched nothing, silently: both name the
    byte now, as a RUN does."""
    assert _run(cli, "run", "quick", "hi", "--agents", str(cli.agents)).returncode == 0
    proc = _run(cli, "ps", "--all", option, LATIN1)
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    assert proc.returncode == 2, err
    assert f"{option} is not UTF-8 text: byte 0xe9 at character 3" in err, err
    assert _run(cli, "ps", "--all", option, "quick").returncode == 0  # a UTF-8 one is taken


LONG = "x" * 300  # over NAME_MAX (255): the system refuses to look it up (ENAMETOOLONG)


@pytest.mark.parametrize(
    "args",
    [
        ["ps", "--state", LONG],
        ["run", "quick", "hi", "--state", f"/tmp/{LONG}/runs.db"],
        ["run", "quick", "hi", "--agents", LONG],
        ["run", "quick", "hi", "--workspace", LONG],
        ["agents", "--dir", LONG],
    ],
    ids=["ps-state", "run-state", "run-agents", "run-workspace", "agents-dir"],
)
def test_a_path_the_system_refuses_to_look_up_is_a_usage_error(cli: Cli, args: list[str]) -> None:
    """A name too long (so a folder not searchable, a loop of links) made ``Path.exists``
    and ``is_dir`` raise: an OSError traceback, exit 1. Now bad usage naming the option and
    the system's reason, and nothing is made."""
    if args[0] == "run" and "--agents" not in args:
        args = [*args, "--agents", str(cli.agents)]
    proc = _run(cli, *args)
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    assert proc.returncode == 2, err
    option = next(a for a in args if a in ("--state", "--agents", "--workspace", "--dir"))
    assert f"{option} " in err and "File name too long" in err, err


@pytest.mark.parametrize("folder", ["missing", LONG], ids=["missing", "too-long"])
def test_serve_refuses_an_agents_folder_that_is_not_there(cli: Cli, folder: str) -> None:
    """`serve --agents DIR` took any value without a word and served: the mistake came out
    only when a continuation started from the page (its host refusing the folder)."""
    pytest.importorskip("uvicorn")
    assert _run(cli, "run", "quick", "hi", "--agents", str(cli.agents)).returncode == 0
    proc = _run(cli, "serve", "--port", "0", "--agents", str(cli.root / folder))
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    assert proc.returncode == 2, err
    assert f"--agents {cli.root / folder}: " in err, err


def test_a_default_store_the_system_refuses_to_look_up_names_its_variable(cli: Cli) -> None:
    """The same refusal of ``$SUBAGENTS_STATE`` names the variable the path came from (it
    named only the path, no option given)."""
    proc = cli.raw("ps", env={"SUBAGENTS_STATE": f"/tmp/{LONG}"})
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    assert proc.returncode == 2, err
    assert f"$SUBAGENTS_STATE /tmp/{LONG}: File name too long" in err, err


def test_an_events_agent_that_is_not_utf8_is_a_usage_error(cli: Cli) -> None:
    """`events --agent` in another encoding matched no event, silently (exit 0, nothing
    printed; followed forever without --no-follow), as `ps --label` did: it names the byte."""
    assert _run(cli, "run", "quick", "hi", "--agents", str(cli.agents)).returncode == 0
    proc = _run(cli, "events", "--no-follow", "--agent", LATIN1)
    err = proc.stderr.decode()
    assert "Traceback" not in err, err
    assert proc.returncode == 2, err
    assert "--agent is not UTF-8 text: byte 0xe9 at character 3" in err, err
    taken = _run(cli, "events", "--no-follow", "--since", "1d", "--agent", "quick")
    assert taken.returncode == 0 and b"quick" in taken.stdout, taken.stderr
