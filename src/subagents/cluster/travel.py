"""Pickling what travels to a cluster's other processes, msgspec Structs of a program's own
modules included.

Why: what a node or a tree host cannot import travels by value (``kit.by_value``): Ray's
cloudpickle rebuilds such a class in the other process as an empty "skeleton" class, then
sets its attributes one by one. A msgspec ``Struct`` class cannot be rebuilt that way: its
fields are fixed when the class is made, so the skeleton has none, and the first instance
fails with msgspec's ``TypeError: Extra positional arguments provided`` (msgspec issue 394).
A program's typed function agent returning a ``Struct`` of its script, or closing over one,
could not run on a cluster.

So a ``Struct`` class that goes by value is rebuilt here from what defines it: its own fields
(name, name when encoded, default or default factory), its options (``frozen``, ``tag``,
``kw_only``, ...) and its bases; then its methods, class attributes and resolved annotations
are set on it, as cloudpickle does for any class (so a method that refers to the class, or a
field typed by the class itself, pickles without recursion). Within one process a class
sent twice is rebuilt once (cloudpickle's class tracker). Everything else is cloudpickle's.

``Travelling(value)`` carries ``value`` through a Ray call pickled this way: Ray pickles the
wrapper, whose ``__reduce__`` is the bytes made here, and the other process gets ``value``.
"""

from __future__ import annotations

import inspect
import io
import typing
from typing import Any

import msgspec
from msgspec import NODEFAULT

_StructMeta: Any = type(msgspec.Struct)
"""msgspec's metaclass of every ``Struct`` class (``msgspec.structs.StructMeta``, untyped)."""
_field: Any = msgspec.field

_OPTIONS = (
    "frozen",
    "eq",
    "order",
    "array_like",
    "gc",
    "omit_defaults",
    "repr_omit_defaults",
    "forbid_unknown_fields",
    "weakref",
    "dict",
    "cache_hash",
    "tag",
    "tag_field",
)
"""``StructConfig`` attributes that are class options of the same name."""

_MADE_BY_MSGSPEC = frozenset(
    {"__slots__", "__dict__", "__weakref__", "__annotations__", "__module__", "__qualname__"}
)

_pickler: Any = None


def dumps(value: Any) -> bytes:
    """``value`` pickled with Ray's cloudpickle, by-value ``Struct`` classes rebuilt whole
    (see the module's docstring). ``pickle.loads`` reads it in any process that has this
    package installed."""
    with io.BytesIO() as file:
        _pickler_class()(file, protocol=5).dump(value)
        return file.getvalue()


class Travelling:
    """A value handed to a Ray call that arrives as the value itself, pickled by ``dumps``."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        import pickle

        return pickle.loads, (dumps(self.value),)


def _pickler_class() -> Any:
    """Built on first use: this package imports Ray only when a cluster is used."""
    global _pickler
    if _pickler is None:
        from ray.cloudpickle import cloudpickle  # untyped: reached through Any

        cp: Any = cloudpickle

        class StructPickler(cp.Pickler):  # type: ignore[misc]
            def reducer_override(self, obj: Any) -> Any:
                if isinstance(obj, _StructMeta) and not (cp._should_pickle_by_reference(obj)):
                    return _struct_reduce(obj, cp._get_or_create_tracker_id(obj))
                return super().reducer_override(obj)

        _pickler = StructPickler
    return _pickler


def _struct_reduce(cls: Any, tracker: str) -> tuple[Any, ...]:
    """How to make ``cls`` again: its definition as data, then its attributes (state)."""
    config = cls.__struct_config__
    own = inspect.get_annotations(cls)
    fields = cls.__struct_fields__
    defaults = cls.__struct_defaults__
    first_default = len(fields) - len(defaults)
    keyword_only = {
        name
        for name, param in inspect.signature(cls).parameters.items()
        if param.kind is inspect.Parameter.KEYWORD_ONLY
    }
    made: list[tuple[str, str, Any, Any]] = []
    for i, name in enumerate(fields):
        if name not in own:
            continue  # a base's field: the base brings it
        default = defaults[i - first_default] if i >= first_default else NODEFAULT
        factory = getattr(default, "factory", NODEFAULT)
        if factory is not NODEFAULT:
            default = NODEFAULT
        made.append((name, cls.__struct_encode_fields__[i], default, factory))
    options = {option: getattr(config, option) for option in _OPTIONS}
    options["kw_only"] = bool(made) and all(name in keyword_only for name, *_ in made)
    state = {
        key: value
        for key, value in cls.__dict__.items()
        if key not in _MADE_BY_MSGSPEC and key not in own
    }
    state["__annotations__"] = _resolved(cls, own)
    definition = (cls.__name__, cls.__qualname__, cls.__module__, cls.__bases__, made, options)
    return _make_struct, (tracker, definition), state, None, None, _set_state


def _resolved(cls: Any, own: dict[str, Any]) -> dict[str, Any]:
    """``cls``'s own annotations with their names looked up here, where its module is (the
    other process may not have it: a string annotation could not be resolved there)."""
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # a name that does not resolve here either: left as written
        return dict(own)
    return {name: hints.get(name, written) for name, written in own.items()}


def _make_struct(tracker: str, definition: tuple[Any, ...]) -> Any:
    from ray.cloudpickle import cloudpickle  # untyped: reached through Any

    cp: Any = cloudpickle
    name, qualname, module, bases, made, options = definition
    namespace: dict[str, Any] = {
        "__module__": module,
        "__qualname__": qualname,
        "__annotations__": {field: Any for field, *_ in made},
    }
    for field, encoded, default, factory in made:
        namespace[field] = _field(name=encoded, default=default, default_factory=factory)
    cls = _StructMeta(name, bases, namespace, **options)
    return cp._lookup_class_or_track(tracker, cls)


def _set_state(cls: Any, state: dict[str, Any]) -> Any:
    for key, value in state.items():
        setattr(cls, key, value)
    return cls
