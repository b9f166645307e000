"""`subagents doctor`: what the sandbox holds on this machine (session 27). Where commands
get no mount namespace of their own, they read the run store and every other run's scratch
files, which only a warning in the runtime's log said; the doctor says each part's state and
what to change. The real command in a subprocess, on this kernel and, for the weak case, in
a user namespace where no further namespace may be made and `CAP_SYS_ADMIN` is dropped."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import msgspec
import pytest
from clikit import DEADLINE_S, Cli

from subagents.tools.sandbox import private_shm_refusal
from subagents.tools.sandbox_exec import kernel_abi
from subagents.tools.sandbox_report import Found, checks, holds
from subagents.tools.sandbox_shm import ENABLE

PARTS = ["landlock", "network", "filter", "namespace", "scratch"]


@pytest.mark.skipif(
    kernel_abi() < 4 or private_shm_refusal() is not None, reason="a weaker sandbox here"
)
def test_on_this_machine_every_part_holds(tmp_path: Path) -> None:
    done = Cli(tmp_path / "cwd")("doctor", "--json")
    assert done.returncode == 0, done.stderr
    found = msgspec.json.decode(done.stdout)
    assert [(c["name"], c["state"]) for c in found] == [(name, "ok") for name in PARTS]


def test_without_a_namespace_it_says_what_commands_can_read_and_fails(tmp_path: Path) -> None:
    """No user namespace may be made (``max_user_namespaces`` 0 in ours) and the command
    holds no ``CAP_SYS_ADMIN``: the launcher's probe makes no mount namespace."""
    if kernel_abi() < 4 or shutil.which("unshare") is None or shutil.which("setpriv") is None:
        pytest.skip("needs Landlock 4+, unshare(1) and setpriv(1)")
    cli = Cli(tmp_path / "cwd")
    inner = " ".join(
        ["exec setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin", *cli.argv("doctor")]
    )
    script = f"echo 0 > /proc/sys/user/max_user_namespaces && {inner}"
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "sh", "-c", script],
        capture_output=True, text=True, timeout=DEADLINE_S, env=cli.env, cwd=cli.root,
    )  # fmt: skip
    if not done.stdout:  # (the doctor never ran: unshare or the sysctl refused)
        pytest.skip(f"no user namespace of our own here: {done.stderr[-200:]}")
    assert done.returncode == 1, done
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert list(lines) == PARTS, done.stdout
    said = lines["namespace"]
    assert said.split()[1] == "weak", said
    assert "they can READ a SQLite run store" in said
    assert "every other run's, runtime's and MCP server's scratch files" in said
    assert ENABLE in said and "Sandbox(readable=[...])" in said
    assert all(lines[name].split()[1] == "ok" for name in PARTS if name != "namespace")


def test_each_weakness_is_said() -> None:
    """The decision alone, for machines this one is not: no Landlock (nothing else holds),
    an ABI that cannot turn the network off, an architecture the filter does not know, a
    scratch home someone else made."""
    whole = Found(7, None, True, "x86_64", "/tmp/subagents-1000")
    assert holds(checks(whole))
    (alone,) = checks(msgspec.structs.replace(whole, abi=0))
    assert (alone.name, alone.state) == ("landlock", "off")
    assert "the run store included" in alone.says
    unsandboxed = checks(msgspec.structs.replace(whole, abi=0, home_error="it belongs to uid 7"))
    # (an unsandboxed runtime's commands and hooks meet a refused home too: it is said)
    assert [(c.name, c.state) for c in unsandboxed] == [("landlock", "off"), ("scratch", "off")]
    weak = checks(
        msgspec.structs.replace(
            whole, abi=3, filter_known=False, machine="riscv64", home_error="it belongs to uid 7"
        )
    )
    assert [(c.name, c.state) for c in weak] == [
        ("landlock", "ok"),
        ("network", "weak"),
        ("filter", "weak"),
        ("namespace", "ok"),
        ("scratch", "off"),
    ]
    assert "riscv64" in weak[2].says and weak[4].says == "it belongs to uid 7"
    assert not holds(weak)
    fallen = checks(
        msgspec.structs.replace(
            whole, home="/tmp/subagents-1000-x1y2", squatted="/tmp/subagents-1000"
        )
    )  # (session 28: another's home is fallen back from, tests/tools/test_sandbox_scratch_squat)
    assert (fallen[-1].name, fallen[-1].state) == ("scratch", "weak")
    assert "/tmp/subagents-1000 is another user's" in fallen[-1].says
    assert "/tmp/subagents-1000-x1y2" in fallen[-1].says
    assert not holds(fallen)
