"""The console (`subagents serve`) over a store of 100,000 runs: how long its first page takes,
and how long after a run's change is committed the change reaches an open page.

A store of ``--runs`` runs (10,000 trees of ten: a root and nine children, ended, each with
its events) is written first; then the real `subagents serve` is started on it in a
subprocess, as a person would. Measured:

- ``load_s``: how long the command takes to read the store into its index before it prints
  its URL (it says so on stderr);
- ``first_page_ms``: a fresh visit's requests, one after another, each a new connection:
  the page (``/``), ``/api/session``, and the first page of the tree (``/api/runs``: the
  25 newest trees), median and worst of ``--repeats``; and, with Playwright and Chromium
  at hand, ``browser_first_page_ms``: from ``goto`` of the URL to the first row drawn (a
  new browser context each time, after one visit that warms the browser up), which is then
  the figure held to the target; its floor, ``browser_static_file_ms``, the same visit
  (token, redirect, cookie) to a static file;
- ``update_ms``: a run admitted by another writer (a ``SaveRun`` and its ``spawned`` event
  committed in one transaction, as the supervisor writes them) until a stream opened on
  ``/api/stream`` delivers its row, for ``--updates`` runs written at random moments
  (so the poll's phase is sampled): median, p95 and worst.

Target (issue 25): the first page under a second, each update within 200 ms (its p95
here). Baselines: a static file's request (the floor of any page), the console's poll
interval (the floor of an update's wait). ``ratio``: the worse of the two figures over its
target. Measured, not asserted. The writer and the stream's reader share this process; the
console has its own.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from _common import emit, median, parse_args, percentile, rounded
from subagents.console.app import POLL_S
from subagents.messages import Event, EventKind, Outcome, RunRecord, RunStatus, Usage
from subagents.store.sqlite import SQLiteStore

TARGET_FIRST_PAGE_S = 1.0
TARGET_UPDATE_S = 0.2
TREE = 10


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the store")
    parser.add_argument("--repeats", type=int, default=9, help="first pages measured")
    parser.add_argument("--updates", type=int, default=40, help="updates measured")


def build_store(path: Path, runs: int) -> float:
    """``runs`` ended runs in trees of ``TREE``; the seconds it took."""
    started = time.perf_counter()
    now = time.time() - runs  # one run a second, ending before now
    with SQLiteStore(path) as store:
        for first in range(0, runs, 1000):
            with store.batch():
                for i in range(first, min(first + 1000, runs)):
                    root = f"r{(i // TREE) * TREE:09d}"
                    run_id = f"r{i:09d}"
                    parent = None if run_id == root else root
                    status = RunStatus.COMPLETED if i % 17 else RunStatus.FAILED
                    record = RunRecord(
                        run_id=run_id,
                        agent="lead" if parent is None else f"worker-{i % 7}",
                        task=f"task {i}: look into part {i % 97} of the question and report",
                        root_run_id=root,
                        parent_run_id=parent,
                        depth=0 if parent is None else 1,
                        status=status,
                        created_at=now + i,
                        started_at=now + i,
                        ended_at=now + i + 0.5,
                        usage=Usage(input_tokens=100 + i % 50, output_tokens=40, cost_usd=0.001),
                        steps=2,
                        outcome=Outcome(run_id=run_id, status=status, result="done"),
                    )
                    store.save_run(record)
                    for kind in (EventKind.SPAWNED, EventKind.STARTED, EventKind(status.value)):
                        store.append_event(
                            Event(kind=kind, run_id=run_id, agent=record.agent, root_run_id=root)
                        )
    return time.perf_counter() - started


class Console:
    """`subagents serve` in a subprocess, and requests to it."""

    def __init__(self, state: Path) -> None:
        self.err = state.parent / "serve.err"
        command = [sys.executable, "-m", "subagents.cli.main", "serve", "--state", str(state)]
        with self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [*command, "--port", "0"],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 600)
        self.url = self.proc.stdout.readline().strip() if ready else ""
        if not self.url.startswith("http://"):
            raise SystemExit(f"serve printed {self.url!r}: {self.err.read_text()}")
        parts = urlsplit(self.url)
        self.host, self.port = parts.hostname or "", parts.port or 0
        self.token = parts.query.removeprefix("token=")
        said = re.search(r"(\d+) runs read in ([\d.]+)s", self.err.read_text())
        self.load_s = float(said[2]) if said else None
        self.loaded = int(said[1]) if said else None

    def get(self, path: str) -> bytes:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            conn.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
            response = conn.getresponse()
            body = response.read()
            assert response.status == 200, (path, response.status, body[:200])
            return body
        finally:
            conn.close()

    def close(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def first_page(console: Console, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        console.get("/")
        console.get("/api/session")
        page = json.loads(console.get("/api/runs"))
        times.append(time.perf_counter() - started)
        assert page["rows"], "the first page is empty"
    return times


def browser_first_page(console: Console, repeats: int) -> tuple[list[float], list[float]] | None:
    """From ``goto`` to the first row drawn, in headless Chromium, and (the floor) from
    ``goto`` of a static file with the token to its load, in turns (None without one)."""
    chromium = os.environ.get("SUBAGENTS_CHROMIUM") or shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if chromium is None:
        return None
    times: list[float] = []
    floor: list[float] = []
    static = console.url.replace("/?token=", "/static/console.css?token=")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for attempt in range(repeats + 1):  # the first warms the browser up: not counted
            for url, into in ((console.url, times), (static, floor)):
                context = browser.new_context()
                page = context.new_page()
                started = time.perf_counter()
                page.goto(url)
                if url == console.url:
                    page.locator("#tree tr[data-run]").first.wait_for(timeout=60_000)
                if attempt:
                    into.append(time.perf_counter() - started)
                context.close()
        browser.close()
    return times, floor


def updates(console: Console, state: Path, count: int) -> list[float]:
    """Seconds from a run's commit until the stream delivers its row, for ``count`` runs."""
    conn = http.client.HTTPConnection(console.host, console.port, timeout=60)
    conn.request("GET", "/api/stream", headers={"Authorization": f"Bearer {console.token}"})
    response = conn.getresponse()
    assert response.status == 200
    arrived: dict[str, float] = {}
    ready = threading.Event()
    done = threading.Event()

    def read() -> None:
        event = ""
        while not done.is_set():
            line = response.fp.readline()
            if not line:
                return
            text = line.decode().rstrip("\r\n")
            if text.startswith("event:"):
                event = text.split(":", 1)[1].strip()
                ready.set()
            elif text.startswith("data:") and event == "rows":
                seen = time.perf_counter()
                for row in json.loads(text.split(":", 1)[1])["rows"]:
                    arrived.setdefault(row["id"], seen)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert ready.wait(60), "the stream never said it was ready"
    committed: dict[str, float] = {}
    rng = random.Random(7)
    with SQLiteStore(state) as store:
        for i in range(count):
            time.sleep(rng.uniform(0.05, 0.35))
            run_id = f"u{i:06d}"
            record = RunRecord(
                run_id=run_id,
                agent="lead",
                task=f"update {i}",
                root_run_id=run_id,
                status=RunStatus.RUNNING,
                created_at=time.time(),
                started_at=time.time(),
            )
            with store.batch():
                store.save_run(record)
                store.append_event(
                    Event(kind=EventKind.SPAWNED, run_id=run_id, agent="lead", root_run_id=run_id)
                )
            committed[run_id] = time.perf_counter()
        deadline = time.monotonic() + 30
        while len(arrived) < count and time.monotonic() < deadline:
            time.sleep(0.05)
    done.set()
    conn.close()
    missing = sorted(set(committed) - set(arrived))
    if missing:
        raise SystemExit(f"the stream never delivered {missing[:5]}...")
    return [arrived[r] - committed[r] for r in committed]


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    runs = 2000 if args.quick else args.runs
    repeats = 3 if args.quick else args.repeats
    count = 5 if args.quick else args.updates
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "runs.sqlite3"
        build_s = build_store(state, runs)
        console = Console(state)
        try:
            floor = [_timed(lambda: console.get("/static/console.css")) for _ in range(repeats)]
            pages = first_page(console, repeats)
            seen = browser_first_page(console, repeats)
            lags = updates(console, state, count)
        finally:
            console.close()
    ms = 1000.0
    in_browser, browser_floor = seen if seen is not None else (None, None)
    # a person's first page is what the browser shows, when there is one to ask
    first_worst = max(in_browser) if in_browser else max(pages)
    update_p95 = percentile(lags, 95)
    result = {
        "figures": {
            "runs": runs,
            "build_store_s": rounded(build_s),
            "load_s": console.load_s,
            "runs_loaded": console.loaded,
            "first_page_ms": {
                "median": rounded(median(pages) * ms),
                "worst": rounded(max(pages) * ms),
            },
            "browser_first_page_ms": None
            if in_browser is None
            else {
                "median": rounded(median(in_browser) * ms),
                "worst": rounded(max(in_browser) * ms),
            },
            "update_ms": {
                "median": rounded(median(lags) * ms),
                "p95": rounded(update_p95 * ms),
                "worst": rounded(max(lags) * ms),
                "updates": len(lags),
            },
        },
        "baseline": {
            "static_file_ms": rounded(median(floor) * ms),
            "browser_static_file_ms": None
            if browser_floor is None
            else rounded(median(browser_floor) * ms),
            "poll_interval_ms": POLL_S * ms,
        },
        "target": {"first_page_s": TARGET_FIRST_PAGE_S, "update_p95_s": TARGET_UPDATE_S},
        "ratio": rounded(max(first_worst / TARGET_FIRST_PAGE_S, update_p95 / TARGET_UPDATE_S)),
        "pass": first_worst < TARGET_FIRST_PAGE_S and update_p95 < TARGET_UPDATE_S,
    }
    emit("console", result)


if __name__ == "__main__":
    main()
