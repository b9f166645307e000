"""Model names and prices: aliases to API ids, ``inherit`` resolution, and cost estimates.

Why a table: agent definitions say ``model: sonnet`` (Claude Code's aliases) or ``inherit``,
while the API needs a full id; and budgets in dollars need a price per token. Both change more
often than the code, so both are plain mappings users can extend or override (per runtime, by
passing their own tables, or process-wide with ``register_alias`` / ``register_price``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping

import msgspec

from subagents.logs import get_logger
from subagents.messages import Usage

log = get_logger(__name__)

INHERIT = "inherit"
DEFAULT_MODEL_ALIAS = "sonnet"

ALIASES: dict[str, str] = {
    "opus": "claude-opus-5-5",
    "sonnet": "claude-sonnet-5-5",
    "haiku": "claude-haiku-5-5",
    "fable": "claude-fable-5-2",
}
"""Alias -> model id. Full ids pass through ``model_id`` unchanged."""


class Price(msgspec.Struct, frozen=True):
    """USD per million tokens. Cache reads bill at 0.1x input, cache writes at 1.25x input."""

    input: float
    output: float
    cache_read_factor: float = 0.1
    cache_write_factor: float = 1.25


PRICES: dict[str, Price] = {
    "claude-opus-5-5": Price(input=4.0, output=20.0),
    "claude-sonnet-5-5": Price(input=2.0, output=10.0),
    "claude-haiku-5-5": Price(input=0.10, output=0.50),
    "claude-fable-5-2": Price(input=8.0, output=40.0),
}
"""Published prices (haiku: prompts up to 100k tokens). Extend with ``register_price``."""

_lock = threading.Lock()
_warned_unknown: set[str] = set()


def register_alias(alias: str, model: str) -> None:
    """Add or replace an alias process-wide (``ALIASES[alias] = model``)."""
    with _lock:
        ALIASES[alias] = model


def register_price(model: str, price: Price) -> None:
    """Add or replace a model's price process-wide."""
    with _lock:
        PRICES[model] = price
        _warned_unknown.discard(model)


def model_id(name: str, *, aliases: Mapping[str, str] | None = None) -> str:
    """The API id for an alias; anything that is not an alias passes through unchanged."""
    table = ALIASES if aliases is None else aliases
    return table.get(name.strip(), name.strip())


def resolve_model(
    requested: str | None,
    *,
    parent: str | None = None,
    default: str = DEFAULT_MODEL_ALIAS,
    aliases: Mapping[str, str] | None = None,
) -> str:
    """The model id a run uses.

    ``requested`` is what the spawn or the definition asked for. ``inherit``, ``None`` or an
    empty string take the parent's model, or ``default`` for a root run. Aliases map to ids.
    """
    if requested is None or not requested.strip() or requested.strip() == INHERIT:
        chosen = parent if parent else default
    else:
        chosen = requested
    return model_id(chosen, aliases=aliases)


_DATE_SUFFIX = re.compile(r"-\d{8}$")


def price_for(model: str, *, prices: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: an id, an alias, or a dated id (``claude-x-5-5-20261001``)
    priced as its undated id. None when unknown."""
    table = PRICES if prices is None else prices
    for name in (model, model_id(model), _DATE_SUFFIX.sub("", model)):
        price = table.get(name)
        if price is not None:
            return price
    return None


def estimate_cost(model: str, usage: Usage, *, prices: Mapping[str, Price] | None = None) -> float:
    """Estimated USD for ``usage`` on ``model`` (an id or an alias). Unknown models cost 0.0.

    An unknown model is logged once per process (a warning), not on every call.
    """
    price = price_for(model, prices=prices)
    if price is None:
        with _lock:
            first = model not in _warned_unknown
            _warned_unknown.add(model)
        if first:
            log.warning("model.price_unknown", model=model, cost_usd=0.0)
        return 0.0
    per_token = 1e-6
    return per_token * (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_input_tokens * price.input * price.cache_read_factor
        + usage.cache_creation_input_tokens * price.input * price.cache_write_factor
    )
