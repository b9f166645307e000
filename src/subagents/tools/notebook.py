"""NotebookEdit: replace, insert or delete one cell of a Jupyter notebook (Claude Code's).

A notebook is JSON; the cell is found by its ``id`` (nbformat 4.5) or, for notebooks
without ids, as ``cell-N`` (0-based). The file is written back with the same indentation
Jupyter uses, read-before-write rules as for Edit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from subagents.tools.base import Tool, ToolError, decode_input, need_context, struct_schema
from subagents.tools.context import ToolContext
from subagents.tools.filestate import check_fresh, read_text, write_text
from subagents.tools.text import quoted


class NotebookEditInput(msgspec.Struct, forbid_unknown_fields=True):
    notebook_path: Annotated[
        str, msgspec.Meta(description="The absolute path to the Jupyter notebook to edit")
    ]
    new_source: Annotated[str, msgspec.Meta(description="The new source for the cell")]
    cell_id: (
        Annotated[
            str,
            msgspec.Meta(
                description="The ID of the cell to edit. When inserting, the new cell goes"
                " after this one, or at the beginning if not given."
            ),
        ]
        | None
    ) = None
    cell_type: (
        Annotated[
            Literal["code", "markdown"],
            msgspec.Meta(description="The type of the cell; required when inserting"),
        ]
        | None
    ) = None
    edit_mode: Annotated[
        Literal["replace", "insert", "delete"],
        msgspec.Meta(description="replace (default), insert or delete"),
    ] = "replace"


DESCRIPTION = """Completely replaces the contents of a specific cell in a Jupyter notebook
(.ipynb file) with new source. The notebook_path parameter must be an absolute path. Use
edit_mode=insert to add a new cell after cell_id (or at the start), edit_mode=delete to
delete the cell."""


def _index(cells: list[dict[str, Any]], cell_id: str) -> int:
    for i, cell in enumerate(cells):
        if cell.get("id") == cell_id:
            return i
    if cell_id.startswith("cell-") and cell_id[5:].isdigit():
        i = int(cell_id[5:])
        if i < len(cells):
            return i
    raise ToolError(f"Cell with ID {cell_id!r} not found in notebook")


def run(arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
    ctx = need_context("NotebookEdit", ctx)
    args = decode_input("NotebookEdit", NotebookEditInput, arguments)
    path = ctx.workspace.resolve(args.notebook_path, what="notebook_path")
    if path.suffix != ".ipynb":
        raise ToolError("File must be a Jupyter notebook (.ipynb file)")
    if not path.exists():
        raise ToolError(f"Notebook file does not exist: {args.notebook_path}")
    check_fresh(ctx.session, path, args.notebook_path)
    try:
        notebook = json.loads(read_text(path, args.notebook_path))
        cells: list[dict[str, Any]] = notebook["cells"]
    except (ValueError, KeyError, TypeError):
        raise ToolError(f"{args.notebook_path} is not a valid notebook (no cells)") from None
    source = args.new_source.splitlines(keepends=True)
    if args.edit_mode == "insert":
        if args.cell_type is None:
            raise ToolError("cell_type is required when using edit_mode=insert")
        at = _index(cells, args.cell_id) + 1 if args.cell_id else 0
        new_id = uuid.uuid4().hex[:8]
        cell: dict[str, Any] = {
            "cell_type": args.cell_type, "id": new_id, "metadata": {}, "source": source,
        }  # fmt: skip
        if args.cell_type == "code":
            cell.update(execution_count=None, outputs=[])
        cells.insert(at, cell)
        message = f"Inserted cell {new_id} with {quoted(args.new_source)}"
    else:
        if args.cell_id is None:
            raise ToolError(f"cell_id is required when using edit_mode={args.edit_mode}")
        i = _index(cells, args.cell_id)
        if args.edit_mode == "delete":
            del cells[i]
            message = f"Deleted cell {args.cell_id}"
        else:
            cells[i]["source"] = source
            if args.cell_type is not None:
                cells[i]["cell_type"] = args.cell_type
            if cells[i].get("cell_type") == "code":
                cells[i]["execution_count"] = None
                cells[i]["outputs"] = []
            message = f"Updated cell {args.cell_id} with {quoted(args.new_source)}"
    write_text(
        path,
        json.dumps(notebook, indent=1, ensure_ascii=False) + "\n",
        args.notebook_path,
        root=ctx.workspace.root,
        sealed=ctx.workspace.sealed,
    )
    ctx.session.saw(path)
    return message


TOOL = Tool(
    name="NotebookEdit",
    starts_processes=False,
    description=DESCRIPTION,
    input_schema=struct_schema(NotebookEditInput),
    run=run,
    needs_approval=True,
    edits_files=True,
    params=NotebookEditInput,
)
