"""What importing the runtime, and a command that logs nothing, leave out: the heavy modules
only some runs need (behavioural checks on ``sys.modules`` in a fresh interpreter; the time
itself is measured by benchmarks/cli_startup.py and ``python -X importtime``, never here).

- structlog (it imports rich's tracebacks and pretty-printer and asyncio) comes in at the first
  line logged that its level lets through, or when a Runtime starts;
- anyio (and the mcp SDK) when the first MCP server starts;
- pathspec with the first permission rule that has a path pattern, wcmatch with the first Glob
  or LS given patterns;
- rich where output is drawn (the command line).

One subprocess runs every probe of a case, to keep the suite's cost to a few interpreters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from subagents.store.sqlite import SQLiteStore

HEAVY = ("structlog", "rich", "anyio", "mcp", "pathspec", "wcmatch", "asyncio", "pygments", "attr")

PROBE = """
import json, sys
HEAVY = {heavy!r}

def loaded():
    return sorted({{m.split(".")[0] for m in sys.modules}} & set(HEAVY))

report = {{}}
{body}
print(json.dumps(report))
"""


def _pythonpath() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": path} if path else {}


def _probe(body: str, tmp_path: Path, **env: str) -> dict[str, Any]:
    code = PROBE.format(heavy=HEAVY, body=body)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        # PYTHONPATH kept: the probe must import the code under test, not an installed copy
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **_pythonpath(), **env},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def test_importing_the_runtime_leaves_the_heavy_modules_out(tmp_path: Path) -> None:
    report = _probe(
        "import subagents.runtime\n"
        "import subagents\n"
        "from subagents.logs import get_logger, debug_enabled\n"
        "report['import'] = loaded()\n"
        "get_logger('probe').debug('filtered out at the default WARNING')\n"
        "report['debug_enabled'] = debug_enabled()\n"
        "report['after_a_filtered_line'] = loaded()\n"
        "import structlog\n"
        "report['configured'] = structlog.is_configured()\n",
        tmp_path,
    )
    assert report["import"] == []
    assert report["debug_enabled"] is False
    assert report["after_a_filtered_line"] == []
    assert report["configured"] is False  # a filtered line configured nothing


def test_a_line_that_passes_the_level_brings_structlog_and_its_quiet_default(
    tmp_path: Path,
) -> None:
    report = _probe(
        "from subagents.logs import get_logger, debug_enabled\n"
        "report['debug_enabled'] = debug_enabled()\n"
        "get_logger('probe').debug('written: the level is debug', probe=1)\n"
        "import structlog\n"
        "report['configured'] = structlog.is_configured()\n",
        tmp_path,
        SUBAGENTS_LOG_LEVEL="debug",
        SUBAGENTS_LOG_JSON="1",
    )
    assert report["debug_enabled"] is True
    assert report["configured"] is True
    line = json.loads(str(report["stderr"]).strip().splitlines()[-1])
    assert line["event"] == "written: the level is debug" and line["probe"] == 1


def test_the_command_lines_settings_wait_for_the_first_line(tmp_path: Path) -> None:
    """``configure_on_first_use`` refuses a bad level at once, imports nothing for a filtered
    line, and installs its own settings (not the environment's) at the first line written."""
    report = _probe(
        "from subagents.logs import configure_on_first_use, get_logger\n"
        "try:\n"
        "    configure_on_first_use(level='loud')\n"
        "except ValueError as exc:\n"
        "    report['refused'] = str(exc)\n"
        "configure_on_first_use(level='info', json=True)\n"
        "get_logger('probe').debug('below info')\n"
        "report['after_debug'] = loaded()\n"
        "get_logger('probe').info('at info')\n"
        "report['after_info'] = 'structlog' in loaded()\n",
        tmp_path,
        SUBAGENTS_LOG_LEVEL="error",
    )
    assert "unknown log level 'loud'" in str(report["refused"])
    assert report["after_debug"] == []
    assert report["after_info"] is True
    lines = [json.loads(line) for line in str(report["stderr"]).strip().splitlines()]
    assert [line["event"] for line in lines] == ["at info"]


def test_ps_on_an_empty_store_imports_no_structlog(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    SQLiteStore(tmp_path / "state" / "runs.sqlite3").close()  # `ps` creates none
    report = _probe(
        "from subagents.cli.main import main\n"
        "report['status'] = main(['ps'])\n"
        "report['loaded'] = loaded()\n",
        tmp_path,
        SUBAGENTS_STATE_DIR=str(tmp_path / "state"),
    )
    assert report["status"] == 0
    assert "structlog" not in report["loaded"] and "asyncio" not in report["loaded"]
    assert "rich" in report["loaded"]  # it draws its output with rich
