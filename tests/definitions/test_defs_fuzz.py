"""Mangled definitions never crash the parser: each gives a spec or issues, nothing else.

Seeded mutations of definition files (colons, anchors, brackets, tabs, stray delimiters, NULs,
BOMs, truncation) -- the kind of damage editors, merges and copy-paste do. The files are the
synthetic messy corpus kept in the repository, and a sample of the public corpus when it is on
this machine (``corpora``).
"""

from __future__ import annotations

import random

from corpora import SYNTHETIC, definition_files, public_corpus
from subagents.definitions import AgentSpec, LoadIssue
from subagents.definitions.parse import read_markdown

PIECES = [
    ":", ": ", "&a ", "*a", "[", "]", "{", "}", "\t", "\n", "---", "\n---\n", '"', "'", "|",
    ">", "- ", "#", "  ", "\r", "\ufeff", "!!binary ", "!foo ", "? ", "%YAML 1.1\n", "...",
    "\x7f", "\x00", "é", "<<: *a\n",
]  # fmt: skip


def test_mangled_corpus_files_never_raise():
    rng = random.Random(20261122)
    files = definition_files(SYNTHETIC)
    public = public_corpus()
    if public is not None:
        files += rng.sample(definition_files(public), 60)
    texts = [p.read_bytes().decode("utf-8") for p in files]
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
