"""Options a run could not keep as given are refused at the call, naming them:

- ``shared={"k": nan}`` (or an infinity): JSON has no such number, so the store kept
  ``null`` and a run restored from SQLite read ``{"k": None}`` (shown below on main: the
  live record and the reopened store both said ``None``), silently;
- ``model=""``: no model's name, taken as given (a run recorded with an empty model).

An ``AdmissionError`` naming the key or the option, raised by ``spawn`` and ``run`` before
anything starts (``supervision.requests``), as any request the supervisor would refuse."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from subagents import FunctionAgent, Runtime
from subagents.behaviour.function import AgentContext
from subagents.runtime import AdmissionError
from subagents.store.sqlite import SQLiteStore

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


def echo(ctx: AgentContext) -> str:
    return ctx.task


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"shared": {"k": math.nan}}, "shared['k'] holds nan"),
        ({"shared": {"k": {"deep": [1.0, -math.inf]}}}, "shared['k'] holds -inf"),
        ({"model": ""}, "model is empty"),
        ({"model": "  "}, "model is empty"),
    ],
)
def test_an_option_a_run_cannot_keep_is_refused_at_the_call_naming_it(
    tmp_path: Path, options: dict[str, Any], named: str
) -> None:
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    with Runtime([FunctionAgent.create("echo", echo)], store=store) as rt:
        with pytest.raises(AdmissionError, match=re.escape(named)):
            rt.spawn("echo", "t", **options)
        with pytest.raises(AdmissionError, match=re.escape(named)):
            rt.run("echo", "t", wait=WAIT, **options)
        assert rt.runs() == []
        kept = rt.run("echo", "t", wait=WAIT, shared={"k": 1.5, "n": None}, model="m")
        record = rt.store.get_run(kept.run_id)
        assert record is not None and record.shared == {"k": 1.5, "n": None}
