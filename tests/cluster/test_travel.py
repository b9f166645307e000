"""msgspec Structs of a program's own modules travel to a cluster's other processes.

Why: such a module goes by value (its process cannot import it), and Ray's cloudpickle
rebuilt a by-value ``Struct`` class as an empty skeleton: the other process failed with
``TypeError: Extra positional arguments provided`` (a typed function agent returning a
``Struct`` of its script could not run on a cluster; found by the runtime's typed-result
tests on two nodes). Here the value is unpickled in a fresh Python process that cannot
import the module, as a node would."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")

from subagents.cluster.kit import by_value
from subagents.cluster.travel import Travelling, dumps

MODULE = """
from __future__ import annotations
import dataclasses
import msgspec

class Point(msgspec.Struct):
    x: int
    y: float
    def norm(self) -> float:
        return abs(self.x) + abs(self.y)

class Tagged(msgspec.Struct, frozen=True, tag=True, kw_only=True, rename="camel"):
    some_name: int
    items: list[int] = []
    w: int = msgspec.field(default=3, name="W")
    LIMIT = 7

class Child(Tagged):
    extra: str = "e"

class Tree(msgspec.Struct):
    value: int
    kids: list[Tree] = []
    def total(self) -> int:
        return self.value + sum(kid.total() for kid in self.kids)

@dataclasses.dataclass
class Box:
    label: str
    points: list[Point]

def agent(task: str) -> Box:
    return Box(task, [Point(1, 2.5)])
"""

READ = """
import json, pickle, sys
import msgspec
box, tagged, child, tree, agent = pickle.loads(sys.stdin.buffer.read())
Tree = type(tree)
print(json.dumps({
    "box": msgspec.to_builtins(box),
    "norm": box.points[0].norm(),
    "tagged": msgspec.json.decode(msgspec.json.encode(tagged)),
    "frozen": type(tagged).__struct_config__.frozen,
    "limit": tagged.LIMIT,
    "child": msgspec.json.decode(msgspec.json.encode(child)),
    "child_is_tagged": isinstance(child, type(tagged)),
    "total": tree.total(),
    "decoded": msgspec.json.decode(b'{"value": 3, "kids": [{"value": 4}]}', type=Tree).total(),
    "agent": msgspec.to_builtins(agent("made there")),
    "same_class": type(agent("x").points[0]) is type(box.points[0]),
    "module_found": "travelling_structs" in sys.modules,
}))
"""


def unpickled_elsewhere(data: bytes) -> dict[str, Any]:
    """What a fresh process, which cannot import the module, makes of ``data``."""
    done = subprocess.run(
        [sys.executable, "-c", READ], input=data, capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_structs_of_a_by_value_module_are_rebuilt_whole_in_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "travelling_structs.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("travelling_structs")
    try:
        by_value([module.agent])
        value = (
            module.Box("b", [module.Point(1, 2.5)]),
            module.Tagged(some_name=1),
            module.Child(some_name=2, extra="x"),
            module.Tree(1, [module.Tree(2)]),
            module.agent,
        )
        found = unpickled_elsewhere(dumps(value))
    finally:
        sys.modules.pop("travelling_structs", None)
    assert found["module_found"] is False  # it really went by value
    assert found["box"] == {"label": "b", "points": [{"x": 1, "y": 2.5}]}
    assert found["norm"] == 3.5  # methods came along
    assert found["tagged"] == {"type": "Tagged", "someName": 1, "items": [], "W": 3}
    assert (found["frozen"], found["limit"]) == (True, 7)  # options and class attributes
    assert found["child"] == {
        "type": "Child",
        "extra": "x",
        "someName": 2,
        "items": [],
        "W": 3,
    }
    assert found["child_is_tagged"] is True  # the base is the same rebuilt class
    assert (found["total"], found["decoded"]) == (3, 7)  # a self-referring field decodes
    assert found["agent"] == {"label": "made there", "points": [{"x": 1, "y": 2.5}]}
    assert found["same_class"] is True  # one class per process, whatever refers to it


def test_a_travelling_value_arrives_as_itself() -> None:
    import pickle

    point = {"a": [1, 2]}
    assert pickle.loads(pickle.dumps(Travelling(point))) == point
