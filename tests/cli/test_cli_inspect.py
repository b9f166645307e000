"""`subagents ps`, `info`, `tree`, `log` on a store of finished runs: filters, run references
(prefix, suffix, #N), JSON, plain and coloured output, and errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from clikit import SGR, Cli, on_terminal

from subagents.store.sqlite import SQLiteStore


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """Two `pair` trees (a root and two quick children each) and one failed run."""
    cli = Cli(tmp_path_factory.mktemp("inspect"))
    for agent, task in (("pair", "alpha"), ("pair", "beta"), ("failer", "gamma")):
        proc = cli("run", agent, task, "--agents", str(cli.agents), "--json")
        assert proc.returncode in (0, 1), proc.stderr
    return cli


@pytest.fixture(scope="module")
def rows(cli: Cli) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = cli.json("ps", "--all")
    return listed


def test_ps_lists_live_runs_by_default_and_all_with_a_flag(
    cli: Cli, rows: list[dict[str, Any]]
) -> None:
    assert cli.json("ps") == []
    plain = cli("ps")
    assert plain.returncode == 0 and plain.stdout == ""
    assert "`subagents ps --all` lists finished runs too" in plain.stderr
    assert [r["row"] for r in rows] == list(range(1, 8))
    assert [r["agent"] for r in rows].count("quick") == 4
    created = [r["created_at"] for r in rows]
    assert created == sorted(created)


def test_ps_filters(cli: Cli, rows: list[dict[str, Any]]) -> None:
    failed = cli.json("ps", "--status", "failed")
    assert [r["agent"] for r in failed] == ["failer"]
    both = cli.json("ps", "--status", "completed,failed")
    assert len(both) == 7
    assert len(cli.json("ps", "--all", "--agent", "quick")) == 4
    first_child = next(r for r in rows if r["agent"] == "quick")
    tree = cli.json("ps", "--all", "--root", first_child["run_id"])
    assert {r["root_run_id"] for r in tree} == {first_child["root_run_id"]}
    assert len(tree) == 3
    assert [r["run_id"] for r in cli.json("ps", "--all", "-n", "2")] == [
        r["run_id"] for r in rows[-2:]
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--status", "bogus"), "--status 'bogus': unknown status; use one of queued"),
        (("--limit", "0"), "--limit must be a positive number"),
    ],
)
def test_ps_bad_filters_are_usage_errors(cli: Cli, args: tuple[str, ...], message: str) -> None:
    proc = cli("ps", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stdout == ""


def test_ps_table_shows_short_ids_that_resolve(cli: Cli, rows: list[dict[str, Any]]) -> None:
    proc = cli("ps", "--all")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].split() == [
        "#", "RUN", "AGENT", "STATUS", "DEPTH", "PARENT", "AGE", "TIME", "STEPS", "TOKENS",
        "LABEL", "TASK",
    ]  # fmt: skip
    assert "\x1b[" not in proc.stdout
    for line, row in zip(lines[1:], rows, strict=True):
        number, short, agent, status = line.split()[:4]
        assert (number, agent, status) == (str(row["row"]), row["agent"], row["status"])
        assert row["run_id"].endswith(short) and 8 <= len(short) < len(row["run_id"])
        assert cli.json("info", short)["run"]["run_id"] == row["run_id"]


def test_row_numbers_pick_from_the_last_listing(cli: Cli, rows: list[dict[str, Any]]) -> None:
    assert cli("ps", "--all").returncode == 0
    assert cli.json("info", "#3")["run"]["run_id"] == rows[2]["run_id"]
    assert cli("ps", "--status", "failed").returncode == 0  # a new listing: #1 is the failure
    assert cli.json("info", "#1")["run"]["agent"] == "failer"
    cli.json("ps", "--all")  # a script's listing leaves what #N means alone
    assert cli.json("info", "#1")["run"]["agent"] == "failer"
    for ref, message in (
        ("#2", "the last `subagents ps` listed 1 run(s)"),
        ("#0", "expected #N with N a row number"),
        ("#x", "expected #N with N a row number"),
    ):
        proc = cli("info", ref)
        assert proc.returncode == 1, ref
        assert message in proc.stderr and proc.stdout == ""


def test_row_numbers_need_a_listing_first(tmp_path: Path) -> None:
    fresh = Cli(tmp_path)
    fresh.state.parent.mkdir(parents=True)
    SQLiteStore(fresh.state).close()  # a store with no listing yet (a missing one: an error)
    proc = fresh("log", "#1")
    assert proc.returncode == 1
    assert "no listing to pick from; run `subagents ps` first" in proc.stderr


def test_prefixes_and_suffixes(cli: Cli, rows: list[dict[str, Any]]) -> None:
    target = rows[4]["run_id"]
    assert cli.json("tree", target[-8:])["run_id"] == target
    ambiguous = cli("info", "r")
    assert ambiguous.returncode == 1
    assert "'r' is ambiguous: it matches" in ambiguous.stderr
    assert rows[0]["run_id"] in ambiguous.stderr
    unknown = cli("log", "zzzzzzzz")
    assert unknown.returncode == 1
    assert "no run matches 'zzzzzzzz'" in unknown.stderr


def test_tree_totals_and_rendering(cli: Cli, rows: list[dict[str, Any]]) -> None:
    root = rows[0]
    tree = cli.json("tree", root["run_id"])
    assert tree["agent"] == "pair" and len(tree["children"]) == 2
    kids = tree["children"]
    assert {k["agent"] for k in kids} == {"quick"}
    assert all(k["depth"] == 1 and k["status"] == "completed" for k in kids)
    expected = tree["usage"]["input_tokens"] + sum(k["usage"]["input_tokens"] for k in kids)
    assert tree["subtree_usage"]["input_tokens"] == expected
    assert cli.json("tree", kids[0]["run_id"])["children"] == []  # a subtree
    plain = cli("tree", root["run_id"])
    assert plain.returncode == 0
    lines = plain.stdout.splitlines()
    assert lines[0].startswith("pair ") and "(subtree " in lines[0]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["├──", "quick"],
        ["└──", "quick"],
    ]
    assert "\x1b[" not in plain.stdout


def test_info(cli: Cli, rows: list[dict[str, Any]]) -> None:
    root = rows[0]
    info = cli.json("info", root["run_id"])
    assert info["run"]["task"] == "alpha"
    assert (
        info["run"]["outcome"]["result"]
        == "joined: quick answer to first alpha + quick answer to second alpha"
    )
    assert [c["agent"] for c in info["children"]] == ["quick", "quick"]
    plain = cli("info", root["run_id"])
    assert "task          alpha" in plain.stdout
    assert "result" in plain.stdout and "children" in plain.stdout


def test_log_orders_the_conversation_and_ends_with_the_outcome(
    cli: Cli, rows: list[dict[str, Any]]
) -> None:
    log = cli.json("log", rows[0]["run_id"])
    entries = log["entries"]
    kinds = [e["kind"] for e in entries]
    assert kinds.count("tool_use") == 2 and kinds.count("tool_result") == 2
    assert kinds.index("tool_use") < kinds.index("tool_result")
    assert kinds[-1] == "completed"
    assert entries[-1]["text"].startswith("joined: quick answer to first alpha")
    stamps = [e["ts"] for e in entries]
    assert stamps == sorted(stamps)
    failed = cli.json("log", rows[-1]["run_id"])["entries"]
    assert failed[-1]["kind"] == "failed"
    assert failed[-1]["text"] == "model_boom: scripted failure"


def test_state_errors(cli: Cli, tmp_path: Path) -> None:
    as_dir = cli("ps", "--state", str(tmp_path))
    assert as_dir.returncode == 2
    assert f"--state {tmp_path}: is a directory; give the database file" in as_dir.stderr
    # from the variable: named as such (it said --state, which the user never gave)
    for command in (["ps"], ["run", "quick", "x", "--agents", str(cli.agents)]):
        env_dir = cli(*command, env={"SUBAGENTS_STATE": str(tmp_path)})
        assert env_dir.returncode == 2, env_dir.stderr
        assert f"$SUBAGENTS_STATE {tmp_path}: is a directory; give the" in env_dir.stderr
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"this is not a database" * 100)
    bad = cli("ps", "--state", str(garbage))
    assert bad.returncode == 1
    assert str(garbage) in bad.stderr and bad.stdout == ""


@pytest.mark.parametrize("command", ["ps --all", "tree #1", "log #1", "info #1"])
def test_terminal_output_is_coloured_unless_no_color(cli: Cli, command: str) -> None:
    # a plain listing says what #1 is (a --json one leaves it alone): without it, #1 was
    # whatever listing an earlier test left, or none when this test ran first
    assert cli("ps", "--all").returncode == 0
    args = command.split()
    code, coloured = on_terminal(cli, *args)
    assert code == 0
    assert SGR.search(coloured), coloured
    code, plain = on_terminal(cli, *args, env={"NO_COLOR": "1"})
    assert code == 0 and plain.strip()
    assert not SGR.search(plain), plain


def test_every_command_prints_json(cli: Cli, rows: list[dict[str, Any]]) -> None:
    ref = rows[0]["run_id"]
    for args in (("ps", "--all"), ("info", ref), ("tree", ref), ("log", ref)):
        proc = cli(*args, "--json")
        assert proc.returncode == 0, proc.stderr
        assert msgspec.json.decode(proc.stdout), args


def test_inspecting_commands_do_not_load_the_runtime(cli: Cli) -> None:
    """`ps` & co must stay quick: the runtime, pykka and the anthropic SDK are for `run`."""
    code = (
        "import sys\n"
        "from subagents.cli.main import main\n"
        # the plain ps first: it is the listing #1 refers to (a --json one leaves it alone)
        "for args in (['ps', '--all'], ['ps', '--all', '--json'], ['tree', '#1', '--json'],"
        " ['log', '#1']):\n"
        "    assert main(args) == 0, args\n"
        "heavy = [m for m in ('anthropic', 'pykka', 'subagents.runtime') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli.env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("HEAVY []")
