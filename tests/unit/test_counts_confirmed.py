"""Counts that err high and are confirmed before they cut (issue 19): the CJK estimate, a
reply credited for its own stubbed arguments, tiktoken's word before an unread result is
digested, and a digest's first line."""

from __future__ import annotations

import random

import pytest
import tiktoken
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_compact import CompactionConfig
from langchain_compact.digest import structured_digest
from langchain_compact.markers import with_meta
from langchain_compact.microcompact import micro_compact_with_count
from langchain_compact.tokens import approximate_tokens, context_tokens, provision_tiktoken_cache

COMMON_CJK = (
    "我们需要检查服务的状态并记录每一个错误然后重新启动工作进程数据库连接超时用户请求失败"
    "配置文件已经更新缓存命中率下降内存使用增加队列长度超过阈值日志显示任务完成部署成功"
)


@pytest.fixture(scope="module")
def o200k() -> tiktoken.Encoding:
    provision_tiktoken_cache()
    return tiktoken.get_encoding("o200k_base")


@pytest.mark.parametrize("seed", range(5))
def test_the_estimate_of_cjk_text_never_runs_under_o200k(
    seed: int, o200k: tiktoken.Encoding
) -> None:
    """Common characters in an order no tokenizer has merged (names, tables, identifiers):
    at 0.72 tokens a character the estimate ran 20% under, and calls went over the window."""
    rng = random.Random(seed)
    text = "\n".join("".join(rng.choice(COMMON_CJK) for _ in range(40)) for _ in range(30))
    assert approximate_tokens([HumanMessage(text)]) >= len(o200k.encode(text))


def test_a_reply_whose_own_arguments_were_stubbed_credits_its_usage_report() -> None:
    """The newest reply carries the usage report that anchors the count, and its own large
    arguments were stubbed: the report counted them, so the stub's savings come off it."""
    call = {"name": "write_file", "args": {"path": "a.py", "content": "x"}, "id": "c1"}
    usage = {"input_tokens": 500, "output_tokens": 2_000, "total_tokens": 2_500}
    reply = AIMessage("", tool_calls=[call], id="a1", usage_metadata=usage)
    stubbed = with_meta(reply, kind="truncated", saved_tokens=1_900, usage_anchor="a1")
    history = [HumanMessage("task", id="t"), stubbed]
    assert context_tokens(history) == 2_500 - 1_900


def test_an_unread_result_the_estimate_overcounts_is_not_digested_when_tiktoken_says_it_fits(
    o200k: tiktoken.Encoding,
) -> None:
    """File paths: the estimate runs about 1.6x over o200k. Digesting a result the model
    has not read, on that estimate alone, hid a result that fits."""
    text = "".join(f"/usr/local/lib/python3.11/site-packages/pkg{i}/module.py\n" for i in range(90))
    call = {"name": "ls", "args": {}, "id": "c1"}
    history = [
        SystemMessage("sys"),
        HumanMessage("list the files", id="t"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage(text, tool_call_id="c1", id="r1"),
    ]
    true = sum(len(o200k.encode(m.text)) + 4 for m in history)
    estimate = approximate_tokens(history)
    window = (true + estimate) // 2 + 60
    config = CompactionConfig(context_window=window)
    assert config.fit_tokens is not None and true < config.fit_tokens < estimate
    result = micro_compact_with_count(history, config)
    assert result.messages[-1].content == text
    assert result.tokens <= config.fit_tokens


def test_a_digest_keeps_its_first_and_last_lines_when_its_room_holds_both() -> None:
    """A 978-character source file digested into a few hundred characters: the key lines
    in between gave the first line away (``# modul``)."""
    first, last = "# module f0_1", "    return [item for item in items if item.score > 199]"
    body = "".join(
        f"def f0_1_handler_{i}(request, limit={30 + i}):\n"
        f"    items = load_items(request, table='t_f0_1_{i}', limit=limit)\n"
        for i in range(8)
    )
    text = f"{first}\nimport os\n\n{body}{last}\n"
    for room in range(200, 700, 10):
        out = structured_digest(text, max_chars=room)
        assert len(out) <= room
        assert first in out and last.strip() in out, (room, out)


def test_a_reduction_credits_its_usage_report_no_more_than_tiktoken_counts() -> None:
    """The report is in the provider's tokens; a credit in the estimate's units (which err
    high: code, paths) counted the context low and sent the next call over the window."""
    call = {"name": "write_file", "args": {"path": "a.py", "content": "x"}, "id": "c1"}
    usage = {"input_tokens": 500, "output_tokens": 2_000, "total_tokens": 2_500}
    reply = AIMessage("", tool_calls=[call], id="a1", usage_metadata=usage)
    stubbed = with_meta(
        reply, kind="truncated", saved_tokens=1_900, saved_precise=1_700, usage_anchor="a1"
    )
    assert context_tokens([HumanMessage("task", id="t"), stubbed]) == 2_500 - 1_700
