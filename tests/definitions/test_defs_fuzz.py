"""Mangled definitions never crash the parser: each gives a spec or issues, nothing else.

Seeded mutations of real corpus files (colons, anchors, brackets, tabs, stray delimiters, NULs,
BOMs, truncation) -- the kind of damage editors, merges and copy-paste do.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from subagents.definitions import AgentSpec, LoadIssue
from subagents.definitions.parse import read_markdown

CORPUS = Path(__file__).parents[2].parent / "shared" / "corpus" / "claude-agents"

PIECES = [
    ":", ": ", "&a ", "*a", "[", "]", "{", "}", "\t", "\n", "---", "\n---\n", '"', "'", "|",
    ">", "- ", "#", "  ", "\r", "\ufeff", "!!binary ", "!foo ", "? ", "%YAML 1.1\n", "...",
    "\x7f", "\x00", "é", "<<: *a\n",
]  # fmt: skip


def test_mangled_corpus_files_never_raise():
    rng = random.Random(20261122)
    if not CORPUS.is_dir():
        pytest.fail(f"the shared corpus is missing: expected {CORPUS}")
    files = sorted(p for p in CORPUS.rglob("*.md") if not p.name.lower().startswith("readme"))
    texts = [p.read_text(encoding="utf-8") for p in rng.sample(files, 60)]
    outcomes = {"loaded": 0, "refused": 0}
    for _ in range(1500):
        text = rng.choice(texts)[: rng.choice([120, 600, 4000])]
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(min(len(text), rng.choice([300, 100_000])) + 1)
            if rng.random() < 0.3:
                text = text[:pos] + text[pos + rng.randint(1, 5) :]
            else:
                text = text[:pos] + rng.choice(PIECES) + text[pos:]
        spec, issues = read_markdown(text, source="mangled.md")
        assert spec is None or isinstance(spec, AgentSpec)
        assert all(isinstance(i, LoadIssue) and i.reason and i.file == "mangled.md" for i in issues)
        if spec is None:
            assert any(i.severity == "error" for i in issues)
            outcomes["refused"] += 1
        else:
            assert spec.name and spec.description
            outcomes["loaded"] += 1
    # the mutations are mild enough that many files still load, and harsh enough to break many
    assert outcomes["loaded"] > 100 and outcomes["refused"] > 100, outcomes
