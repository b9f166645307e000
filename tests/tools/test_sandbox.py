"""The sandbox of tools' processes, on the real kernel (Landlock) with real processes: what a
command may write, the network, the environment, and a kernel without Landlock.

Each test starts real shells through the launcher; nothing is mocked. The kernel these run
on offers Landlock (docs: /work/shared/notes); on one without it the Landlock tests skip and
the no-Landlock tests (``SUBAGENTS_LANDLOCK_ABI=0``) still run.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from subagents.tools.base import ToolError
from subagents.tools.bash import run_bash
from subagents.tools.context import ToolContext
from subagents.tools.processes import ProcessGroups
from subagents.tools.sandbox import Sandbox, tool_env_of, tool_environment
from subagents.tools.sandbox_exec import FAILED_EXIT, kernel_abi, landlock_abi

from .conftest import make_context, wait_until

landlock = pytest.mark.skipif(kernel_abi() < 4, reason="the kernel offers no Landlock ABI 4+")


def sandboxed(
    root: Path, processes: ProcessGroups, *, read_only: bool, network: bool = True, **settings
) -> ToolContext:
    """A context whose processes run in the sandbox a run with these settings gets."""
    sandbox = Sandbox.coerce(Sandbox(**settings))
    run = sandbox.for_run(workspace=root, read_only=read_only, network=network)
    base = make_context(root, processes)
    return ToolContext(**{**base.__dict__, "sandbox": run})


def bash(ctx: ToolContext, command: str) -> tuple[str, bool]:
    result = run_bash({"command": command}, ctx)
    return result.content, result.is_error


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "victim").write_text("keep me")
    return out


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its content: what must not change."""
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@landlock
def test_a_write_inside_the_workspace_works_and_one_outside_fails(
    repo: Path, processes: ProcessGroups, outside: Path
) -> None:
    ctx = sandboxed(repo, processes, read_only=False)
    text, error = bash(ctx, "echo made > inside.txt && cat inside.txt")
    assert (error, text) == (False, "made")
    assert (repo / "inside.txt").read_text() == "made\n"
    text, error = bash(ctx, f"echo x > {outside}/new")
    assert error and "Permission denied" in text
    assert not (outside / "new").exists()
    text, error = bash(ctx, f"rm -f {outside}/victim; mv {outside}/victim {repo}/stolen")
    assert error and (outside / "victim").read_text() == "keep me"
    text, error = bash(ctx, 'echo tmp > "$TMPDIR/t" && cat "$TMPDIR/t" && echo e >> /dev/stderr')
    assert (error, text) == (False, "tmp\ne")


@landlock
def test_read_only_tricks_change_nothing_outside_the_run_temp_dir(
    repo: Path, processes: ProcessGroups, outside: Path, tmp_path: Path
) -> None:
    """The tricks of the trial: programs the command line does not show, run by commands a
    reading of it would call read-only; a read-only run's sandbox holds them all."""
    (repo / "bin").mkdir()
    for name in ("cat", "ext"):
        script = repo / "bin" / name
        script.write_text(f"#!/bin/sh\necho pwned > {outside}/{name}\necho ran-{name}\n")
        script.chmod(0o755)
    (repo / "a").write_text("a\n")
    (repo / "b").write_text("b\n")
    before = tree(tmp_path)
    ctx = sandboxed(repo, processes, read_only=True)
    tricks = [
        "GIT_EXTERNAL_DIFF=./bin/ext git diff --no-index a b",
        "PATH=./bin:$PATH cat a",
        "./bin/cat a",
        f"setsid -w sh -c 'echo x > {outside}/setsid'",
        f"find {outside} -name victim -delete",
        f"echo x > {repo}/written; touch {outside}/touched; rm -f {repo}/a",
        f"python3 -c \"open('{outside}/py', 'w')\"",
    ]
    outputs = [bash(ctx, command)[0] for command in tricks]
    assert "ran-ext" in outputs[0] and "ran-cat" in outputs[1] and "ran-cat" in outputs[2]
    assert all("Permission denied" in out for out in outputs), outputs
    assert tree(tmp_path) == before  # nothing under the test's tree changed, workspace included
    text, error = bash(ctx, 'echo ok > "$TMPDIR/scratch" && cat "$TMPDIR/scratch"')
    assert (error, text) == (False, "ok")


@landlock
def test_a_setsid_background_process_cannot_write_outside(
    repo: Path, processes: ProcessGroups, outside: Path
) -> None:
    ctx = sandboxed(repo, processes, read_only=False)
    result = run_bash(
        {
            "command": f"setsid sh -c 'sleep 0.2; echo x > {outside}/late;"
            ' echo $? > "$TMPDIR/done"\'',
            "run_in_background": True,
        },
        ctx,
    )
    assert "background" in result.content
    done = processes.run_dir(ctx.run_id) / "done"
    wait_until(lambda: done.exists() and done.read_text().strip() != "", what="the setsid child")
    assert done.read_text().strip() != "0"  # its write failed
    assert not (outside / "late").exists()


def _listener() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    return server, server.getsockname()[1]


@landlock
@pytest.mark.parametrize("network", [False, True])
def test_network_off_refuses_a_tcp_connect_and_on_allows_it(
    repo: Path, processes: ProcessGroups, network: bool
) -> None:
    server, port = _listener()  # the kernel completes a connect into its backlog
    try:
        ctx = sandboxed(repo, processes, read_only=False, network=network)
        connect = (
            f"import socket; socket.create_connection(('127.0.0.1', {port})); print('connected')"
        )
        text, error = bash(ctx, f'python3 -c "{connect}"')
        server.setblocking(False)
        try:
            server.accept()[0].close()
            arrived = True
        except BlockingIOError:
            arrived = False
    finally:
        server.close()
    if network:
        assert (error, text, arrived) == (False, "connected", True)
    else:
        assert error and "PermissionError" in text and not arrived


def test_the_api_key_is_not_passed_on_unless_named(
    repo: Path, processes: ProcessGroups, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("SUBAGENTS_MODEL", "opus")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    show = 'echo "key=${ANTHROPIC_API_KEY:-none} model=${SUBAGENTS_MODEL:-none} lc=$LC_ALL"'
    plain = sandboxed(repo, processes, read_only=False, enabled=False)
    assert bash(plain, show)[0] == "key=none model=none lc=C.UTF-8"
    named = sandboxed(
        repo, processes, read_only=False, enabled=False, tool_env=tool_env_of(["ANTHROPIC_API_KEY"])
    )
    assert bash(named, show)[0] == "key=sk-secret model=none lc=C.UTF-8"
    given = sandboxed(
        repo, processes, read_only=False, enabled=False, tool_env=tool_env_of({"X_TOKEN": "t"})
    )
    assert bash(given, 'echo "$X_TOKEN"')[0] == "t"


def test_the_environment_is_the_allowlist_plus_what_is_named(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "HOME": "/h", "ANTHROPIC_API_KEY": "k", "LC_CTYPE": "C", "OTHER": "o"}
    env = tool_environment(
        base, tool_env_of(["OTHER", "MISSING"]), workspace=tmp_path, temp_dir=None
    )
    assert env == {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_CTYPE": "C",
        "OTHER": "o",
        "CLAUDE_PROJECT_DIR": str(tmp_path),
    }
    with pytest.raises(ValueError, match="'1BAD' is not an environment variable name"):
        tool_env_of(["1BAD"])


def test_without_landlock_a_read_only_run_refuses_bash_and_another_runs_with_a_warning(
    repo: Path, processes: ProcessGroups, monkeypatch: pytest.MonkeyPatch, outside: Path
) -> None:
    monkeypatch.setenv("SUBAGENTS_LANDLOCK_ABI", "0")
    assert landlock_abi() == 0
    read_only = sandboxed(repo, processes, read_only=True)
    with pytest.raises(ToolError, match=r"this run is read-only .* no Landlock"):
        bash(read_only, f"echo x > {outside}/x")
    assert not (outside / "x").exists()
    writer = sandboxed(repo, processes, read_only=False)
    assert bash(writer, "echo ran") == ("ran", False)  # unsandboxed, after the warning


def test_a_bad_abi_override_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBAGENTS_LANDLOCK_ABI", "many")
    with pytest.raises(ValueError, match="SUBAGENTS_LANDLOCK_ABI='many'"):
        landlock_abi()


@landlock
def test_the_launcher_refuses_to_run_what_it_cannot_restrict(
    repo: Path, processes: ProcessGroups, tmp_path: Path
) -> None:
    """A writable directory that is not there: the launcher fails, the command never runs."""
    ctx = sandboxed(repo, processes, read_only=False)
    assert ctx.sandbox is not None
    argv = ctx.sandbox.argv(["sh", "-c", f"touch {tmp_path}/ran"], tmp_path / "missing")
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == FAILED_EXIT and "could not restrict" in done.stderr
    assert not (tmp_path / "ran").exists()


def test_bad_sandbox_settings_are_errors_naming_them() -> None:
    with pytest.raises(ValueError, match="'plann' is not one of"):
        Sandbox.coerce(Sandbox(network={"plann": "off"}))
    with pytest.raises(ValueError, match="network must be 'on' or 'off', got 'maybe'"):
        Sandbox.coerce(Sandbox(network={"plan": "maybe"}))
    with pytest.raises(TypeError, match="sandbox must be True, False or a Sandbox"):
        Sandbox.coerce("yes")  # type: ignore[arg-type]
    opened = Sandbox.coerce(Sandbox(network={"plan": "on", "default": False}))
    assert opened.network_for("plan", None) and not opened.network_for("default", None)
    assert not opened.network_for("plan", "off")  # a definition can turn it off
    assert not Sandbox.coerce(True).network_for("plan", "on")  # never on where the owner said off


def test_a_definitions_network_field_reads_yaml_on_and_off() -> None:
    from subagents.definitions import DefinitionError, parse_markdown

    def network(value: str) -> str | None:
        text = f"---\nname: a\ndescription: d\nnetwork: {value}\n---\nPrompt.\n"
        return parse_markdown(text).network

    assert (network("off"), network("on"), network('"off"'), network("ON")) == (
        "off",
        "on",
        "off",
        "on",
    )
    with pytest.raises(DefinitionError, match="network must be on or off, got 'sometimes'"):
        network("sometimes")


def test_the_command_line_options(tmp_path: Path) -> None:
    import argparse

    from subagents.cli.runtime_args import add_runtime_arguments, runtime_options
    from subagents.cli.state import CliError

    parser = argparse.ArgumentParser()
    add_runtime_arguments(parser)
    args = parser.parse_args(["--no-sandbox", "--tool-env", "GITHUB_TOKEN", "--tool-env", "X=1"])
    options = runtime_options(args)
    assert (options["sandbox"], options["tool_env"]) == (False, ["GITHUB_TOKEN", "X=1"])
    assert runtime_options(parser.parse_args([]))["sandbox"] is True
    with pytest.raises(CliError, match="--tool-env: tool_env: '1X' is not an environment"):
        runtime_options(parser.parse_args(["--tool-env", "1X"]))


@landlock
def test_an_older_landlock_still_bounds_writes_and_says_the_network_stays_on(
    repo: Path, processes: ProcessGroups, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import structlog

    monkeypatch.setenv("SUBAGENTS_LANDLOCK_ABI", "3")  # before TCP rules (ABI 4)
    with structlog.testing.capture_logs() as logs:
        ctx = sandboxed(repo, processes, read_only=True, network=False)
    assert any("cannot turn the network off" in e["event"] for e in logs)
    assert ctx.sandbox is not None and ctx.sandbox.abi == 3
    assert "--no-network" not in ctx.sandbox.argv(["true"], repo)
    text, error = bash(ctx, f"echo x > {outside}/x")
    assert error and "Permission denied" in text and not (outside / "x").exists()


@landlock
def test_a_link_planted_in_the_run_dir_does_not_redirect_the_next_output(
    repo: Path, processes: ProcessGroups, outside: Path
) -> None:
    """A command may write in its run's directory; the runtime (unsandboxed) creates each
    output file there afresh, so a planted link cannot make it write elsewhere."""
    target = outside / "victim"
    ctx = sandboxed(repo, processes, read_only=True)
    plant = f'for i in $(seq 1 50); do ln -sf {target} "$TMPDIR/bash_$i.out"; done; echo planted'
    assert bash(ctx, plant) == ("planted", False)
    assert bash(ctx, "echo leaked") == ("leaked", False)
    run_bash({"command": "echo leaked", "run_in_background": True}, ctx)
    assert target.read_text() == "keep me"


@landlock
def test_no_device_node_can_be_made_even_where_writes_are_allowed(
    repo: Path, processes: ProcessGroups
) -> None:
    """As root, a device node of the disk would write around every rule."""
    ctx = sandboxed(repo, processes, read_only=False)
    text, error = bash(ctx, 'mknod "$TMPDIR/null" c 1 3 || mknod ./null c 1 3')
    assert error and not (repo / "null").exists()
    assert "Permission denied" in text or os.geteuid() != 0  # not root: EPERM anyway


@landlock
@pytest.mark.parametrize("plant", ["mkfifo {f}", "ln -s /dev/zero {f}"])
def test_what_a_command_leaves_at_its_cwd_file_is_read_safely(
    repo: Path, processes: ProcessGroups, plant: str
) -> None:
    """A fifo or a link to /dev/zero where the runtime reads the directory a command ended
    in: it is not read (the call returns, its output intact)."""
    ctx = sandboxed(repo, processes, read_only=True)
    cwd_file = f'"$TMPDIR/cwd-{ctx.run_id}-{ctx.tool_use_id}"'
    command = f"trap - EXIT; {plant.format(f=cwd_file)}; echo planted"
    assert bash(ctx, command) == ("planted", False)
    assert ctx.session.cwd == repo


@landlock
def test_the_owner_can_add_a_writable_directory_for_runs_that_write(
    repo: Path, processes: ProcessGroups, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    writer = sandboxed(repo, processes, read_only=False, writable=(str(cache),))
    assert bash(writer, f"echo c > {cache}/c && cat {cache}/c") == ("c", False)
    reader = sandboxed(repo, processes, read_only=True, writable=(str(cache),))
    text, error = bash(reader, f"echo c > {cache}/d")
    assert error and "Permission denied" in text and not (cache / "d").exists()
    with pytest.raises(ValueError, match="is not a directory"):
        Sandbox.coerce(Sandbox(writable=(str(tmp_path / "nowhere"),)))


@landlock
@pytest.mark.parametrize("read_only", [False, True])
def test_reads_can_be_limited_to_the_system_the_workspace_and_what_the_owner_lists(
    repo: Path, processes: ProcessGroups, outside: Path, tmp_path: Path, read_only: bool
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "doc").write_text("shared doc")
    ctx = sandboxed(repo, processes, read_only=read_only, readable=(str(shared),))
    text, error = bash(ctx, f"cat {outside}/victim")
    assert error and "Permission denied" in text
    commands = f"/bin/cat src/calc.py | head -1; cat {shared}/doc; echo; git log --oneline | wc -l"
    assert bash(ctx, commands) == ("def add(a, b):\nshared doc\n1", False)
    unlimited = sandboxed(repo, processes, read_only=read_only)
    assert bash(unlimited, f"cat {outside}/victim") == ("keep me", False)
