"""Read of images, PDFs and notebooks (as Claude Code's Read): real files in a temp repo, and
the image reaching Claude's API (the real anthropic SDK against the local fake Messages API)."""

from __future__ import annotations

import base64
import io
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfReader, PdfWriter

from fake_messages_api import FakeMessagesAPI, Recorded, text_message, tool_use_message
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus, ToolResultBlock
from subagents.models import AnthropicModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.tools.base import ToolError, ToolResult
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext

from .conftest import WAIT

READ = builtin_tools()["Read"]


def png(width: int = 2, height: int = 2) -> bytes:
    """A real PNG: red pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def read(ctx: ToolContext, **arguments: Any) -> ToolResult:
    out = READ.run(arguments, ctx)
    assert isinstance(out, ToolResult), out
    return out


def refused(ctx: ToolContext, **arguments: Any) -> str:
    with pytest.raises(ToolError) as caught:
        READ.run(arguments, ctx)
    return str(caught.value)


@pytest.mark.parametrize(
    "name, body, media_type",
    [
        ("dot.png", png(), "image/png"),
        ("photo.JPG", b"\xff\xd8\xff\xe0" + b"\x00" * 20, "image/jpeg"),
        ("anim.gif", b"GIF89a" + b"\x00" * 20, "image/gif"),
        ("pic.webp", b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 20, "image/webp"),
    ],
)
def test_read_shows_an_image_as_an_image(
    context: ToolContext, repo: Path, name: str, body: bytes, media_type: str
) -> None:
    (repo / name).write_bytes(body)
    shown = read(context, file_path=str(repo / name))
    (image,) = shown.attachments
    assert (image.kind, image.media_type) == ("image", media_type)
    assert base64.b64decode(image.data) == body
    assert f"Image {repo / name} ({media_type}, {len(body):,} bytes)" in shown.content


def test_an_image_that_is_not_one_or_too_big_is_an_error_naming_it(
    context: ToolContext, repo: Path
) -> None:
    (repo / "fake.png").write_text("just text\n")
    assert "is not a PNG image" in refused(context, file_path=str(repo / "fake.png"))
    (repo / "huge.png").write_bytes(png() + b"\x00" * 4_000_000)
    assert "too large to show as an image" in refused(context, file_path=str(repo / "huge.png"))


def pdf(pages: int) -> bytes:
    """A real PDF of ``pages`` blank pages of different widths (to tell them apart)."""
    writer = PdfWriter()
    for n in range(pages):
        writer.add_blank_page(width=100 + n, height=200)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_read_attaches_a_pdf_or_the_pages_asked_for(context: ToolContext, repo: Path) -> None:
    body = pdf(5)
    (repo / "paper.pdf").write_bytes(body)
    whole = read(context, file_path=str(repo / "paper.pdf"))
    (document,) = whole.attachments
    assert (document.kind, document.media_type) == ("document", "application/pdf")
    assert base64.b64decode(document.data) == body
    paged = read(context, file_path=str(repo / "paper.pdf"), pages="2-3")
    assert paged.content == f"PDF {repo / 'paper.pdf'}: pages 2-3 of 5 are attached."
    (cut,) = paged.attachments
    pages = PdfReader(io.BytesIO(base64.b64decode(cut.data))).pages
    assert [float(p.mediabox.width) for p in pages] == [101.0, 102.0]
    tail = read(context, file_path=str(repo / "paper.pdf"), pages="5-9")
    assert "pages 5-5 of 5" in tail.content
    assert "has 5 pages" in refused(context, file_path=str(repo / "paper.pdf"), pages="6")
    assert "more than 20 pages" in refused(context, file_path=str(repo / "paper.pdf"), pages="1-21")
    assert "pages must be a page or a range" in refused(
        context, file_path=str(repo / "paper.pdf"), pages="two"
    )
    assert "not a range of pages" in refused(
        context, file_path=str(repo / "paper.pdf"), pages="5-2"
    )
    calc = str(repo / "src" / "calc.py")
    assert "pages applies to PDF files only" in refused(context, file_path=calc, pages="1")
    (repo / "fake.pdf").write_text("not a pdf")
    assert "is not a PDF" in refused(context, file_path=str(repo / "fake.pdf"))


def notebook_cells(image: bytes) -> dict[str, Any]:
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"language_info": {"name": "python"}},
        "cells": [
            {
                "id": "intro",
                "cell_type": "markdown",
                "metadata": {},
                "source": ["# Title\n", "Text"],
            },
            {
                "id": "calc",
                "cell_type": "code",
                "metadata": {},
                "execution_count": 1,
                "source": "print(1 + 1)\n1 / 0",
                "outputs": [
                    {"output_type": "stream", "name": "stdout", "text": ["2\n"]},
                    {
                        "output_type": "error",
                        "ename": "ZeroDivisionError",
                        "evalue": "division by zero",
                        "traceback": ["\x1b[0;31mZeroDivisionError\x1b[0m: division by zero"],
                    },
                ],
            },
            {
                "cell_type": "code",
                "metadata": {},
                "execution_count": 2,
                "source": "plot()",
                "outputs": [
                    {
                        "output_type": "display_data",
                        "metadata": {},
                        "data": {
                            "text/plain": "<Figure>",
                            "image/png": base64.b64encode(image).decode() + "\n",
                        },
                    }
                ],
            },
        ],
    }


def test_read_shows_a_notebook_as_cells_with_outputs(context: ToolContext, repo: Path) -> None:
    path = repo / "analysis.ipynb"
    path.write_text(json.dumps(notebook_cells(png())))
    shown = read(context, file_path=str(path))
    assert shown.content.splitlines() == [
        '<cell id="intro"><cell_type>markdown</cell_type># Title',
        'Text</cell id="intro">',
        '<cell id="calc">print(1 + 1)',
        '1 / 0</cell id="calc">',
        "<output>2</output>",
        "<output>ZeroDivisionError: division by zero",
        "ZeroDivisionError: division by zero</output>",
        '<cell id="cell-2">plot()</cell id="cell-2">',
        "<output><Figure></output>",
    ]
    (plot,) = shown.attachments
    assert plot.media_type == "image/png" and base64.b64decode(plot.data) == png()
    # read: NotebookEdit may change it now, as after Claude Code's Read
    edited = builtin_tools()["NotebookEdit"].call(
        {"notebook_path": str(path), "cell_id": "calc", "new_source": "print(2)"}, context
    )
    assert "Updated cell calc" in edited
    path.write_text("{not json")
    assert "is not a Jupyter notebook" in refused(context, file_path=str(path))


def test_claude_sees_the_image_read_returns(repo: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    (repo / "dot.png").write_bytes(png())
    seen: list[Any] = []

    def serve(req: Recorded) -> dict[str, Any]:
        last = req.body["messages"][-1]["content"]
        answers = [b for b in last if b.get("type") == "tool_result"]
        if not answers:
            return tool_use_message([("toolu_1", "Read", {"file_path": str(repo / "dot.png")})])
        seen.append(answers[0]["content"])
        return text_message("a red dot")

    looker = AgentSpec(name="looker", description="Looks.", prompt="Look.", tools=("Read",))
    with FakeMessagesAPI(handler=serve) as api:
        model = AnthropicModel(api_key="test-key", base_url=api.url)
        try:
            with Runtime([looker], model=model, workspace=repo, store=SQLiteStore(db)) as rt:
                outcome = rt.run("looker", "what is in dot.png?", wait=WAIT)
        finally:
            model.close()
    assert outcome.status is RunStatus.COMPLETED, outcome
    # kept with the run: the checkpoint in the SQLite file holds the image
    store = SQLiteStore(db)
    try:
        checkpoint = store.load_checkpoint(outcome.run_id)
    finally:
        store.close()
    assert checkpoint is not None
    kept = [
        b
        for m in checkpoint.messages
        for b in m.content
        if isinstance(b, ToolResultBlock) and b.attachments
    ]
    assert [base64.b64decode(b.attachments[0].data) for b in kept] == [png()]
    ((text, image),) = seen
    assert text["type"] == "text" and "dot.png" in text["text"]
    assert image == {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(png()).decode(),
        },
    }
