"""The command line's test paths are grouped by folder (``collection_order.py``), so a
folder's conftest fixtures reach its tests whatever order the paths were given in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from collection_order import grouped_by_folder

ROOT = Path(__file__).resolve().parents[1]


def test_a_folders_paths_split_by_another_folders_are_brought_together() -> None:
    args = [
        "tests/runtime/test_a.py",
        "tests/test_messages.py",
        "tests/runtime/test_b.py::test_one[x]",
        "tests/store",
        "tests/runtime/deep/test_c.py",
        "tests/test_code_sizes.py",
    ]
    assert grouped_by_folder(args, ROOT) == [
        "tests/runtime/test_a.py",
        "tests/runtime/test_b.py::test_one[x]",
        "tests/runtime/deep/test_c.py",
        "tests/test_messages.py",
        "tests/store",
        "tests/test_code_sizes.py",
    ]


def test_paths_already_grouped_keep_their_order() -> None:
    args = [
        "tests/test_messages.py",
        "tests/runtime/test_b.py::test_two",
        "tests/runtime/test_b.py::test_one",
        "tests/runtime/test_a.py",
        str(ROOT / "tests" / "store"),
        "tests/test_code_sizes.py",
    ]
    assert grouped_by_folder(args, ROOT) == args
    assert grouped_by_folder([], ROOT) == []


def test_a_path_up_a_folder_counts_in_the_folder_it_names() -> None:
    """Run from tests/runtime, ``../test_type_aliases.py`` is a file of tests/, not of
    tests/runtime: the runtime files around it are brought together."""
    args = ["test_handle_repr.py", "../test_type_aliases.py", "test_topics.py"]
    assert grouped_by_folder(args, ROOT / "tests" / "runtime") == [
        "test_handle_repr.py",
        "test_topics.py",
        "../test_type_aliases.py",
    ]


def test_a_subfolders_fixtures_reach_its_tests_when_its_files_were_given_apart() -> None:
    """The command that found it (pytest 9.1.1): without the grouping every test of the
    last file errored with "fixture 'no_new_threads' not found" (seen). ``--setup-plan``
    resolves each test's fixtures without running a test."""
    plain = ("-q", "--setup-plan", "-p", "no:cacheprovider", "-p", "no:randomly")
    files = ("runtime/test_handle_repr.py", "test_type_aliases.py", "runtime/test_topics.py")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plain, *(f"tests/{f}" for f in files)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert "not found" not in done.stdout, done.stdout[-3000:]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "no_new_threads" in done.stdout  # (the fixture was planned: a test of it ran)
