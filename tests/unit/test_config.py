"""`CompactionConfig`: defaults from docs/design.md, validation that names the field and range."""

from __future__ import annotations

import dataclasses
import math
import os

import pytest

from langchain_compact.config import CompactionConfig
from langchain_compact.errors import CompactionError, ConfigError


def test_defaults_follow_the_design() -> None:
    cfg = CompactionConfig()
    assert cfg.context_window is None and cfg.trigger_tokens is None
    assert cfg.trigger_ratio == 0.75
    assert cfg.keep_last_n == 4
    assert (cfg.micro_keep, cfg.micro_min_chars, cfg.micro_clear_at_least) == (3, 100, 0)
    assert cfg.summary_max_tokens == 2_000
    assert cfg.summary_budget_ratio == 0.25
    assert cfg.max_compactions is None
    assert cfg.thrash_limit == 3
    assert cfg.cooldown_turns == 0
    # Do no harm: nothing removed below the micro trigger; large results by window share.
    assert cfg.large_tool_result_chars is None
    assert (cfg.micro_trigger_ratio, cfg.micro_target_ratio) == (0.75, 0.3)
    assert (cfg.large_result_ratio, cfg.fold_ratio, cfg.task_max_ratio) == (0.2, 1.0, 0.25)
    assert cfg.reply_reserve_tokens is None
    assert CompactionConfig(context_window=128_000).fit_tokens == 128_000 - 4_096
    assert CompactionConfig(context_window=8_000).fit_tokens == 8_000 - 400
    # conftest moves the default folder (LANGCHAIN_COMPACT_ARCHIVE_DIR); without it, .memory
    assert cfg.archive_dir == os.environ.get("LANGCHAIN_COMPACT_ARCHIVE_DIR", ".memory")
    assert cfg.summary_role == "human"


@pytest.mark.parametrize(("window", "ratio"), [(8_000, 0.75), (128_000, 0.5), (1, 1.0), (999, 0.3)])
def test_trigger_tokens(window: int, ratio: float) -> None:
    assert CompactionConfig(
        context_window=window, trigger_ratio=ratio
    ).trigger_tokens == math.floor(window * ratio)


# (field, bad value, text the message must contain: the allowed range)
BAD_VALUES = [
    ("context_window", 0, ">= 1"),
    ("context_window", -5, ">= 1"),
    ("context_window", 1.5, ">= 1"),
    ("context_window", "8000", ">= 1"),
    ("context_window", True, ">= 1"),
    ("trigger_ratio", 0, "0 < trigger_ratio <= 1"),
    ("trigger_ratio", 1.01, "0 < trigger_ratio <= 1"),
    ("trigger_ratio", -0.5, "0 < trigger_ratio <= 1"),
    ("trigger_ratio", math.nan, "0 < trigger_ratio <= 1"),
    ("trigger_ratio", math.inf, "0 < trigger_ratio <= 1"),
    ("trigger_ratio", "0.5", "0 < trigger_ratio <= 1"),
    ("trigger_ratio", None, "0 < trigger_ratio <= 1"),
    ("keep_last_n", -1, ">= 0"),
    ("keep_last_n", 2.0, ">= 0"),
    ("keep_last_n", None, ">= 0"),
    ("micro_keep", -1, ">= 0"),
    ("micro_min_chars", -100, ">= 0"),
    ("micro_clear_at_least", -1, ">= 0"),
    ("large_tool_result_chars", 0, ">= 1"),
    ("large_tool_result_keep_chars", -1, ">= 0"),
    ("summary_max_tokens", 0, ">= 1"),
    ("summary_budget_ratio", 0.0, "0 < summary_budget_ratio <= 1"),
    ("summary_budget_ratio", 2, "0 < summary_budget_ratio <= 1"),
    ("max_compactions", 0, ">= 1"),
    ("max_compactions", False, ">= 1"),
    ("thrash_limit", 0, ">= 1"),
    ("cooldown_turns", -1, ">= 0"),
    ("summarizer_retries", -1, ">= 0"),
    ("summary_role", "assistant", "'human' or 'system'"),
    ("summary_role", None, "'human' or 'system'"),
    ("summarizer_timeout", 0, "> 0"),
    ("summarizer_timeout", -1.0, "> 0"),
    ("summarizer_timeout", math.nan, "> 0"),
    ("micro_exclude_tools", ["recall"], "tuple of tool names"),
    ("micro_exclude_tools", ("ok", 3), "tuple of tool names"),
    ("micro_exclude_tools", "recall", "tuple of tool names"),
    ("archive_dir", "", "non-empty"),
    ("archive_dir", None, "non-empty"),
    ("redactor", "not callable", "callable"),
]


@pytest.mark.parametrize(("name", "value", "allowed"), BAD_VALUES)
def test_bad_value_names_field_and_range(name: str, value: object, allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        CompactionConfig(**{name: value})
    text = str(info.value)
    assert name in text, text
    assert allowed in text, text
    assert isinstance(info.value, (CompactionError, ValueError))


def test_non_numeric_timeout_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="summarizer_timeout"):
        CompactionConfig(summarizer_timeout="5")  # type: ignore[arg-type]


@pytest.mark.parametrize(("keep", "limit"), [(5_000, 5_000), (6_000, 5_000), (2, 1)])
def test_large_result_keep_must_be_below_limit(keep: int, limit: int) -> None:
    with pytest.raises(ConfigError, match="large_tool_result_keep_chars") as info:
        CompactionConfig(large_tool_result_chars=limit, large_tool_result_keep_chars=keep)
    assert "large_tool_result_chars" in str(info.value)
    # Disabling the feature lifts the constraint.
    CompactionConfig(large_tool_result_chars=None, large_tool_result_keep_chars=keep)


@pytest.mark.parametrize(
    "changes",
    [
        {"context_window": 1},
        {"trigger_ratio": 1},
        {"trigger_ratio": 1e-9},
        {"keep_last_n": 0, "micro_keep": 0, "micro_min_chars": 0},
        {"max_compactions": 1},
        {"summary_role": "system"},
        {"summarizer_timeout": None},
        {"micro_exclude_tools": ("recall_archived",)},
        {"large_tool_result_chars": 1, "large_tool_result_keep_chars": 0},
        {"redactor": str.upper},
    ],
)
def test_boundary_values_accepted(changes: dict[str, object]) -> None:
    cfg = CompactionConfig(**changes)  # type: ignore[arg-type]
    for key, value in changes.items():
        assert getattr(cfg, key) == value


def test_replace_validates_and_rejects_unknown_fields() -> None:
    cfg = CompactionConfig(context_window=10_000)
    assert cfg.replace(keep_last_n=6).keep_last_n == 6
    assert cfg.replace(keep_last_n=6).context_window == 10_000
    assert cfg.keep_last_n == 4  # original unchanged
    with pytest.raises(ConfigError, match="keep_last_n"):
        cfg.replace(keep_last_n=-1)
    with pytest.raises(ConfigError, match="keep_lst_n") as info:
        cfg.replace(keep_lst_n=6)
    assert "keep_last_n" in str(info.value)  # lists the valid fields
    assert cfg.with_window(32_000).trigger_tokens == math.floor(32_000 * 0.75)
    with pytest.raises(ConfigError, match="context_window"):
        cfg.with_window(0)


def test_frozen_and_comparable() -> None:
    cfg = CompactionConfig(context_window=100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.keep_last_n = 1  # type: ignore[misc]
    assert cfg == CompactionConfig(context_window=100)
    assert cfg != CompactionConfig(context_window=101)
    # The redactor does not take part in equality.
    assert CompactionConfig(redactor=str.upper) == CompactionConfig()
