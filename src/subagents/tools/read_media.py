"""What Read shows for files that are not plain text, as Claude Code's Read does: an image
(PNG, JPEG, GIF, WebP) as an image the model sees, a PDF as a document (only the pages asked
for, with pypdf), and a Jupyter notebook as its cells with their outputs (a plot in an output
as an image).

The files travel as the Messages API's base64 ``image``/``document`` content of the tool
result (``messages.Attachment``), so a model that reads images sees the picture; the text
beside it says what the file is, for a model (or a transcript) that does not.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

from subagents.messages.conversation import Attachment, AttachmentKind
from subagents.tools.base import ToolError, ToolResult

IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
MAX_IMAGE_BYTES = 3_750_000
"""The Messages API takes images of at most 5 MB base64: 3.75 MB of bytes."""
MAX_PDF_BYTES = 20_000_000
"""A PDF sent whole (the API's own limit is 32 MB a request)."""
MAX_PAGES = 20
"""Pages one Read may cut out of a PDF (Claude Code's limit)."""
OUTPUT_CHARS = 10_000
"""Characters of one cell output shown; the rest is cut with a note."""
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PAGES = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def kind_of(path: Path) -> str | None:
    """``image``, ``pdf``, ``notebook`` or None (text) by the file's suffix."""
    suffix = path.suffix.lower()
    if suffix in IMAGE_TYPES:
        return "image"
    if suffix == ".pdf":
        return "pdf"
    if suffix == ".ipynb":
        return "notebook"
    return None


def read_image(path: Path, shown: str) -> ToolResult:
    media_type = IMAGE_TYPES[path.suffix.lower()]
    data = _bytes(path, shown, MAX_IMAGE_BYTES, "an image")
    if not data.startswith(MAGIC[media_type]) or (
        media_type == "image/webp" and data[8:12] != b"WEBP"
    ):
        raise ToolError(f"{shown} is not a {media_type.split('/')[1].upper()} image (its bytes)")
    return ToolResult(
        f"Image {shown} ({media_type}, {len(data):,} bytes) is attached.",
        attachments=(_attachment("image", media_type, data),),
    )


def read_pdf(path: Path, shown: str, pages: str | None) -> ToolResult:
    """The PDF as a document the model reads (its text and page images): with ``pages``,
    only those (at most ``MAX_PAGES``), cut out with ``pypdf`` (the ``pdf`` extra); without
    pypdf the whole document, saying which pages were asked for."""
    span = page_range(pages) if pages is not None else None
    data = _bytes(path, shown, MAX_PDF_BYTES, "a PDF")
    if not data.startswith(b"%PDF-"):
        raise ToolError(f"{shown} is not a PDF (it does not start with %PDF-)")
    if span is None:
        text = f"PDF {shown} ({len(data):,} bytes) is attached."
        return ToolResult(text, attachments=(_attachment("document", "application/pdf", data),))
    first, last = span
    if last - first + 1 > MAX_PAGES:
        raise ToolError(f"pages {pages!r} is more than {MAX_PAGES} pages: ask for fewer at a time")
    try:
        cut, count = _cut_pages(data, first, last)
    except ImportError:
        text = (
            f"PDF {shown} ({len(data):,} bytes) is attached. Pages {first}-{last} were asked"
            " for; the whole document is attached (pypdf is not installed: pip install"
            " 'subagents[pdf]'): look at those pages."
        )
        return ToolResult(text, attachments=(_attachment("document", "application/pdf", data),))
    if first > count:
        raise ToolError(f"{shown} has {count} pages: pages {pages!r} are past its end")
    last = min(last, count)
    text = f"PDF {shown}: pages {first}-{last} of {count} are attached."
    return ToolResult(text, attachments=(_attachment("document", "application/pdf", cut),))


def _cut_pages(data: bytes, first: int, last: int) -> tuple[bytes, int]:
    """Pages ``first``-``last`` (1-based, clipped to the end) as a PDF of their own, and how
    many pages the document has."""
    import io

    from pypdf import PdfReader, PdfWriter
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        count = len(reader.pages)
        writer = PdfWriter()
        for index in range(first - 1, min(last, count)):
            writer.add_page(reader.pages[index])
        out = io.BytesIO()
        writer.write(out)
    except PdfReadError as exc:
        raise ToolError(f"the PDF cannot be read to cut pages out of it: {exc}") from None
    return out.getvalue(), count


def page_range(pages: str) -> tuple[int, int]:
    """``"3"`` or ``"1-5"`` as (first, last), 1-based; a ToolError naming a bad one."""
    match = _PAGES.match(pages)
    if match is None:
        raise ToolError(f'pages must be a page or a range such as "3" or "1-5", not {pages!r}')
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if first < 1 or last < first:
        raise ToolError(f"pages {pages!r} is not a range of pages (they count from 1)")
    return first, last


def read_notebook(path: Path, shown: str) -> ToolResult:
    """Every cell, with its id, type, source and outputs; images of outputs attached."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = notebook["cells"]
        if not isinstance(cells, list):
            raise TypeError("cells is not a list")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ToolError(f"{shown} is not a Jupyter notebook Read can show: {exc}") from None
    language = str(notebook.get("metadata", {}).get("language_info", {}).get("name", "python"))
    parts: list[str] = []
    images: list[Attachment] = []
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict):
            continue
        cell_id = str(cell.get("id") or f"cell-{i}")
        kind = str(cell.get("cell_type", "code"))
        source = _text(cell.get("source", ""))
        head = f'<cell id="{cell_id}">'
        if kind != "code":
            head += f"<cell_type>{kind}</cell_type>"
        elif language != "python":
            head += f"<language>{language}</language>"
        parts.append(f'{head}{source}</cell id="{cell_id}">')
        for output in cell.get("outputs", ()) if kind == "code" else ():
            text, image = _output(output)
            if text:
                parts.append(text)
            if image is not None:
                images.append(image)
    if not parts:
        return ToolResult(
            f"<system-reminder>Warning: the notebook {shown} has no cells.</system-reminder>"
        )
    return ToolResult("\n".join(parts), attachments=tuple(images))


def _output(output: Any) -> tuple[str, Attachment | None]:
    """One output's text (stream, result, error) and its image, if it has one."""
    if not isinstance(output, dict):
        return "", None
    kind = output.get("output_type")
    text = ""
    image: Attachment | None = None
    if kind == "stream":
        text = _text(output.get("text", ""))
    elif kind in ("execute_result", "display_data"):
        data = output.get("data", {})
        text = _text(data.get("text/plain", ""))
        for media_type in ("image/png", "image/jpeg"):
            encoded = data.get(media_type)
            if isinstance(encoded, str):
                image = Attachment("image", media_type, "".join(encoded.split()))
                break
    elif kind == "error":
        lines = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        lines += [_ANSI.sub("", str(line)) for line in output.get("traceback", ())]
        text = "\n".join(lines)
    if len(text) > OUTPUT_CHARS:
        text = (
            text[:OUTPUT_CHARS]
            + f"\n... [output truncated: {len(text) - OUTPUT_CHARS} more characters]"
        )
    return (f"<output>{text.rstrip()}</output>" if text.strip() else ""), image


def _text(value: Any) -> str:
    """A notebook's text: a string or a list of lines."""
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return str(value)


def _bytes(path: Path, shown: str, limit: int, what: str) -> bytes:
    try:
        size = path.stat().st_size
        if size > limit:
            raise ToolError(
                f"{shown} is {size:,} bytes: too large to show as {what} (at most {limit:,})"
            )
        return path.read_bytes()
    except OSError as exc:
        raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from None


def _attachment(kind: AttachmentKind, media_type: str, data: bytes) -> Attachment:
    return Attachment(kind, media_type, base64.b64encode(data).decode("ascii"))
