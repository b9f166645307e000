"""Model aliases, inherit resolution, prices and the default backend choice."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

from subagents.definitions.spec import AgentSpec
from subagents.messages import Usage
from subagents.models import (
    AnthropicModel,
    Price,
    ScriptedModel,
    default_model,
    estimate_cost,
    model_id,
    names,
    resolve_model,
)


@pytest.fixture
def all_log_levels() -> Iterator[None]:
    """Default structlog config (no level filter) so captured logs include info lines."""
    saved = structlog.get_config()
    structlog.reset_defaults()
    try:
        yield
    finally:
        structlog.configure(**saved)


def test_aliases_map_and_full_ids_pass_through() -> None:
    assert model_id("opus") == "claude-opus-5-5"
    assert model_id("sonnet") == "claude-sonnet-5-5"
    assert model_id("haiku") == "claude-haiku-5-5"
    assert model_id("fable") == "claude-fable-5-2"
    assert model_id("claude-sonnet-4-20250514") == "claude-sonnet-4-20250514"
    assert model_id(" opus ") == "claude-opus-5-5"


def test_alias_table_can_be_overridden_per_call() -> None:
    table = {"sonnet": "claude-sonnet-4-6", "fast": "claude-haiku-4-5"}
    assert model_id("sonnet", aliases=table) == "claude-sonnet-4-6"
    assert model_id("fast", aliases=table) == "claude-haiku-4-5"
    assert model_id("opus", aliases=table) == "opus"  # not in this table: passes through


def test_register_alias_extends_the_process_table() -> None:
    try:
        names.register_alias("house", "claude-opus-4-8")
        assert model_id("house") == "claude-opus-4-8"
        assert resolve_model("house") == "claude-opus-4-8"
    finally:
        names.ALIASES.pop("house", None)


@pytest.mark.parametrize(
    ("requested", "parent", "default", "expected"),
    [
        ("opus", "claude-haiku-5-5", "sonnet", "claude-opus-5-5"),
        ("inherit", "claude-haiku-5-5", "sonnet", "claude-haiku-5-5"),
        (None, "claude-haiku-5-5", "sonnet", "claude-haiku-5-5"),
        ("", "haiku", "sonnet", "claude-haiku-5-5"),
        ("inherit", None, "sonnet", "claude-sonnet-5-5"),
        (None, None, "fable", "claude-fable-5-2"),
        ("claude-x-1", None, "sonnet", "claude-x-1"),
    ],
)
def test_resolve_model(
    requested: str | None, parent: str | None, default: str, expected: str
) -> None:
    assert resolve_model(requested, parent=parent, default=default) == expected


def test_estimate_cost_for_each_counter() -> None:
    mtok = 1_000_000
    assert estimate_cost("claude-sonnet-5-5", Usage(input_tokens=mtok)) == pytest.approx(2.0)
    assert estimate_cost("sonnet", Usage(output_tokens=mtok)) == pytest.approx(10.0)
    assert estimate_cost("haiku", Usage(cache_read_input_tokens=mtok)) == pytest.approx(0.01)
    assert estimate_cost("fable", Usage(cache_creation_input_tokens=mtok)) == pytest.approx(10.0)
    assert estimate_cost("opus", Usage(input_tokens=500, output_tokens=100)) == pytest.approx(
        (500 * 4 + 100 * 20) / mtok
    )


def test_dated_ids_are_priced_as_their_undated_id() -> None:
    usage = Usage(input_tokens=1_000_000)
    assert estimate_cost("claude-sonnet-5-5-20261001", usage) == pytest.approx(2.0)
    assert names.price_for("claude-sonnet-5-5-20261001") == names.PRICES["claude-sonnet-5-5"]
    assert names.price_for("claude-nothing-1-20261001") is None


def test_price_table_override() -> None:
    prices = {"mine": Price(input=1.0, output=2.0, cache_read_factor=0.5)}
    usage = Usage(
        input_tokens=1_000_000, output_tokens=1_000_000, cache_read_input_tokens=2_000_000
    )
    assert estimate_cost("mine", usage, prices=prices) == pytest.approx(1 + 2 + 1)


@pytest.mark.usefixtures("all_log_levels")
def test_unknown_model_costs_zero_and_warns_once() -> None:
    with structlog.testing.capture_logs() as logs:
        assert estimate_cost("claude-unknown-9", Usage(input_tokens=10)) == 0.0
        assert estimate_cost("claude-unknown-9", Usage(input_tokens=10)) == 0.0
    warnings = [e for e in logs if e["event"] == "model.price_unknown"]
    assert len(warnings) == 1
    assert warnings[0]["model"] == "claude-unknown-9"
    assert warnings[0]["log_level"] == "warning"


@pytest.mark.usefixtures("all_log_levels")
def test_default_model_offline_without_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    spec = AgentSpec(name="a", description="d", metadata={"script": ["scripted {task}"]})
    with structlog.testing.capture_logs() as logs:
        model = default_model([spec])
    assert isinstance(model, ScriptedModel)
    assert model.agents == {"a"}
    offline = [e for e in logs if e["event"] == "model.offline"]
    assert len(offline) == 1
    assert "ANTHROPIC_API_KEY" in offline[0]["reason"]


def test_default_model_claude_with_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("SUBAGENTS_MODEL", raising=False)
    model = default_model()
    assert isinstance(model, AnthropicModel)
    assert model.default_model == "claude-sonnet-5-5"
    assert model.base_url == "http://127.0.0.1:9"
    model.close()
