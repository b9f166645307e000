"""What an operator watching runs expects of the command line: labels and their filters,
`ps --watch`, `log --tail/--since`, `subagents events`; each against real runs in a store
in a tmp dir, through the real command in subprocesses."""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from clikit import DEADLINE_S, Cli, by_agent, finish

from subagents.cli.since import SinceError, parse_time


class Lines:
    """The lines a background command prints, read on a thread of their own so that a test
    waits for a line with a deadline, never for a fixed time."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, done: Callable[[list[str]], bool], what: str) -> list[str]:
        deadline = time.monotonic() + DEADLINE_S
        while not done(self.seen):
            left = deadline - time.monotonic()
            if left <= 0:
                self.proc.kill()
                raise AssertionError(f"no {what} in: {self.seen}")
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"the command ended before {what}: {self.seen}")
            self.seen.append(line)
        return self.seen

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C, as a person ends a watch: its exit code and what it printed on stderr."""
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=DEADLINE_S)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """One labelled `pair` tree (a root and two children) and one unlabelled `quick` run."""
    cli = Cli(tmp_path_factory.mktemp("operator"))
    done = cli("run", "pair", "alpha", "--agents", str(cli.agents), "--json", "--label", "nightly")
    assert done.returncode == 0, done.stderr
    done = cli("run", "quick", "beta", "--agents", str(cli.agents), "--json")
    assert done.returncode == 0, done.stderr
    return cli


def test_run_label_is_recorded_and_ps_filters_by_label_and_requester(cli: Cli) -> None:
    rows = cli.json("ps", "--all")
    pair = next(r for r in rows if r["agent"] == "pair")
    assert pair["label"] == "nightly"
    labelled = cli.json("ps", "--all", "--label", "nightly")
    assert [r["run_id"] for r in labelled] == [pair["run_id"]]
    assert cli.json("ps", "--all", "--label", "weekly") == []
    both = cli.json("ps", "--all", "--label", "weekly", "--label", "nightly")
    assert [r["run_id"] for r in both] == [pair["run_id"]]
    children = cli.json("ps", "--all", "--requester", pair["run_id"][-8:])
    assert len(children) == 2 and {r["agent"] for r in children} == {"quick"}
    assert {r["parent_run_id"] for r in children} == {pair["run_id"]}
    table = cli("ps", "--all", "--label", "nightly")
    assert table.returncode == 0 and "nightly" in table.stdout and "beta" not in table.stdout


def test_a_label_over_the_cap_is_a_usage_error_before_anything_runs(cli: Cli) -> None:
    before = len(cli.json("ps", "--all"))
    proc = cli("run", "quick", "x", "--agents", str(cli.agents), "--label", "L" * 201)
    assert proc.returncode == 2 and "the label is 201 characters" in proc.stderr
    assert len(cli.json("ps", "--all")) == before


def test_log_tail_and_since_pick_the_entries_shown(cli: Cli) -> None:
    pair = next(r for r in cli.json("ps", "--all") if r["agent"] == "pair")
    everything = cli.json("log", pair["run_id"])["entries"]
    assert len(everything) > 3
    assert cli.json("log", pair["run_id"], "--tail", "2")["entries"] == everything[-2:]
    assert cli.json("log", pair["run_id"], "-n", "0")["entries"] == []
    assert cli.json("log", pair["run_id"], "--tail", "999")["entries"] == everything
    assert cli.json("log", pair["run_id"], "--since", "1h")["entries"] == everything
    assert cli.json("log", pair["run_id"], "--since", "2999-01-01")["entries"] == []
    cut = everything[2]["ts"]
    since = cli.json("log", pair["run_id"], "--since", repr(cut))["entries"]
    assert since == [e for e in everything if e["ts"] >= cut] and since != everything
    plain = cli("log", pair["run_id"], "--tail", "1")
    assert plain.returncode == 0 and len(plain.stdout.strip().splitlines()) == 2  # title + 1
    bad = cli("log", pair["run_id"], "--since", "yesterdayish")
    assert bad.returncode == 2 and "'yesterdayish' is not a time" in bad.stderr


def test_events_prints_the_stores_events_in_order_with_filters(cli: Cli) -> None:
    proc = cli("events", "--since", "1h", "--no-follow", "--json")
    assert proc.returncode == 0, proc.stderr
    stored = [msgspec.json.decode(line) for line in proc.stdout.splitlines()]
    seqs = [s["seq"] for s in stored]
    assert seqs == sorted(set(seqs)) and len(seqs) > 6
    runs = {r["run_id"]: r for r in cli.json("ps", "--all")}
    assert {s["event"]["run_id"] for s in stored} == set(runs)
    pair = next(r for r in runs.values() if r["agent"] == "pair")
    tree = cli("events", "--since", "1h", "--no-follow", "--json", "--root", pair["run_id"])
    in_tree = [msgspec.json.decode(line)["event"] for line in tree.stdout.splitlines()]
    assert in_tree and {e["root_run_id"] for e in in_tree} == {pair["run_id"]}
    ends = cli("events", "--since", "1h", "--no-follow", "--json", "--kind", "completed")
    kinds = {msgspec.json.decode(line)["event"]["kind"] for line in ends.stdout.splitlines()}
    assert kinds == {"completed"}
    human = cli("events", "--since", "1h", "--no-follow", "--agent", "pair")
    assert human.returncode == 0 and "completed" in human.stdout
    assert all(" pair " in line for line in human.stdout.splitlines())
    assert cli("events", "--no-follow").stdout == ""  # without --since: only what comes next


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--kind", "exploded"), "--kind 'exploded': unknown event kind"),
        (("--since", "soon"), "'soon' is not a time"),
        (("--root", "r1", "--run", "r2"), "give --root RUN or --run RUN, not both"),
    ],
)
def test_events_bad_options_are_usage_errors(cli: Cli, args: tuple[str, ...], message: str) -> None:
    proc = cli("events", "--no-follow", *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_events_follows_new_events_until_interrupted(cli: Cli) -> None:
    # from an instant before the run: whenever the command gets going, it misses nothing
    follower = Lines(cli.start("events", "--json", "--since", repr(time.time())))
    proc = cli.run_team("lead", "followed")
    worker = cli.wait_runs(
        lambda rows: by_agent(rows, "worker", "waiting") or by_agent(rows, "worker", "running"),
        "the worker started",
        proc,
    )
    assert cli("send", worker["run_id"], "finish now").returncode == 0
    assert finish(proc)[0] == 0

    def lead_ended(lines: list[str]) -> bool:
        events = [msgspec.json.decode(line)["event"] for line in lines]
        return any(e["kind"] == "completed" and e["agent"] == "lead" for e in events)

    lines = follower.until(lead_ended, "the lead's completed event")
    events = [msgspec.json.decode(line)["event"] for line in lines]
    assert {e["agent"] for e in events} >= {"lead", "worker"}
    kinds = [e["kind"] for e in events if e["run_id"] == worker["run_id"]]
    assert kinds[0] == "spawned" and "mail_delivered" in kinds and kinds[-1] == "completed"
    code, err = follower.interrupt()
    assert code == 0 and "Traceback" not in err


def test_ps_watch_prints_a_row_as_each_run_changes(cli: Cli) -> None:
    watcher = Lines(cli.start("ps", "--watch", "--json"))
    assert watcher.until(bool, "the listing")[0] == "[]"  # no live run: it watches from here
    proc = cli.run_team("lead", "watched")
    worker = cli.wait_runs(lambda rows: by_agent(rows, "worker", "waiting"), "worker waits", proc)
    assert cli("send", worker["run_id"], "done").returncode == 0
    assert finish(proc)[0] == 0

    def rows(lines: list[str]) -> list[dict[str, Any]]:
        return [msgspec.json.decode(line) for line in lines if line.startswith("{")]

    def both_completed(lines: list[str]) -> bool:
        done = {r["agent"] for r in rows(lines) if r["status"] == "completed"}
        return {"lead", "worker"} <= done

    seen = rows(watcher.until(both_completed, "the lead and the worker completed"))
    statuses = [r["status"] for r in seen if r["run_id"] == worker["run_id"]]
    assert statuses[-1] == "completed" and len(statuses) >= 2
    assert statuses.index("completed") == len(statuses) - 1  # nothing after its end
    assert {r["run_id"] for r in seen} <= {r["run_id"] for r in cli.json("ps", "--all")}
    code, err = watcher.interrupt()
    assert code == 0 and "Traceback" not in err


def test_ps_watch_leaves_out_runs_that_do_not_match(cli: Cli) -> None:
    watcher = Lines(cli.start("ps", "--watch", "--all", "--agent", "quick"))
    listed = watcher.until(lambda lines: len(lines) >= 3, "the listing: a header, 2 quick runs")
    assert listed[0].split()[:3] == ["#", "RUN", "AGENT"]  # the watch follows from here on
    proc = cli.run_team("pair", "gamma")
    assert finish(proc)[0] == 0
    lines = watcher.until(
        lambda lines: sum("completed" in line for line in lines[3:]) >= 2, "2 quick runs completed"
    )
    rows = [line for line in lines[3:] if line.startswith("- ")]
    assert rows and all(" quick " in line for line in rows) and not any(" pair " in r for r in rows)
    assert all("gamma" in line for line in rows), rows  # the new runs, not the listed ones
    assert watcher.interrupt()[0] == 0


def test_times_a_person_gives() -> None:
    now = 1_800_000_000.0
    assert parse_time("90s", now) == now - 90
    assert parse_time("10m", now) == now - 600
    assert parse_time("1h30m", now) == now - 5400
    assert parse_time("2d", now) == now - 172800
    assert parse_time("45", now) == now - 45
    assert parse_time("1764176700.5", now) == 1764176700.5
    assert parse_time("2026-11-26T17:05:00+00:00", now) == 1795712700.0
    assert parse_time("2026-11-26T18:05:00+01:00", now) == 1795712700.0
    for bad in ("", "soon", "10x", "-5m"):
        with pytest.raises(SinceError):
            parse_time(bad, now)


@pytest.mark.parametrize("where", ["sqlite", "postgres"])
def test_prune_archives_cleans_and_deletes_finished_runs(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    database = request.getfixturevalue("pg_url") if where == "postgres" else None
    cli = Cli(tmp_path, database=database)
    for task, cleanup in (("one", "delete"), ("two", "keep")):
        done = cli("run", "quick", task, "--agents", str(cli.agents), "--cleanup", cleanup)
        assert done.returncode == 0, done.stderr
    ids = [r["run_id"] for r in cli.json("ps", "--all")]
    with cli.store() as store:
        assert {r.run_id for r in store.list_runs()} == set(ids)  # none archived yet
    kept = cli.json("prune", "--archive-after", "60")  # they ended just now
    assert kept["archived"] == [] and kept["deleted"] == []
    plan = cli.json("prune", "--archive-after", "0", "--dry-run")
    assert sorted(plan["archived"]) == sorted(ids) and plan["cleaned"] == [ids[0]]
    with cli.store() as store:  # the dry run wrote nothing
        assert {r.run_id for r in store.list_runs()} == set(ids)
        assert all(store.events(i) for i in ids)
    done = cli("prune", "--archive-after", "0")
    assert done.returncode == 0, done.stderr
    assert "archived 2 run(s) (1 with their transcripts and events deleted)" in done.stdout
    with cli.store() as store:
        assert store.list_runs() == [] and not store.events(ids[0]) and store.events(ids[1])
        assert all(store.get_run(i) is not None for i in ids)  # archived, not gone
    gone = cli.json("prune", "--archive-after", "0", "--retention-days", "0")
    assert sorted(gone["deleted"]) == sorted(ids)
    assert cli("info", ids[0]).returncode == 1
    assert cli.json("ps", "--all") == []


@pytest.mark.parametrize("where", ["sqlite", "postgres"])
def test_prune_after_an_infinite_time_is_never(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    """``--archive-after inf`` (or a number past the float range: ``1e999``, a huge integer)
    archives nothing, and ``--retention-days inf`` deletes nothing: never, as documented
    (docs/cli.md), however long ago a run ended; a finite bound still acts."""
    database = request.getfixturevalue("pg_url") if where == "postgres" else None
    cli = Cli(tmp_path, database=database)
    done = cli("run", "quick", "one", "--agents", str(cli.agents))
    assert done.returncode == 0, done.stderr
    (ran,) = [r["run_id"] for r in cli.json("ps", "--all")]
    run_id = "r-ended-at-the-epoch"
    with cli.store() as store:  # a run like it that ended long ago (the epoch)
        record = store.get_run(ran)
        assert record is not None
        # (a run of its own: an end is written once and never undone, AlreadyEnded)
        store.save_run(
            msgspec.structs.replace(
                record, run_id=run_id, root_run_id=run_id, created_at=0.0, ended_at=0.0
            )
        )
    for never in ("inf", "1e999", "9" * 400, "Infinity"):
        kept = cli.json("prune", "--archive-after", never)
        assert kept["archived"] == [] and kept["deleted"] == [], never
    assert cli.json("prune", "--archive-after", "1000000")["archived"] == [run_id]
    for never in ("inf", "1e999"):
        kept = cli.json("prune", "--archive-after", "0", "--retention-days", never)
        assert kept["deleted"] == [], never
    deleted = cli.json("prune", "--archive-after", "0", "--retention-days", "0")["deleted"]
    assert run_id in deleted


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--archive-after", "-1"), "--archive-after must be >= 0 minutes"),
        (("--retention-days", "nan"), "--retention-days must be >= 0"),
    ],
)
def test_prune_bad_options_are_usage_errors(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    cli = Cli(tmp_path)
    assert cli("run", "quick", "x", "--agents", str(cli.agents)).returncode == 0
    proc = cli("prune", *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
