"""Provider-side compaction items: what marks a message the provider compacted into.

``ChatOpenAI(context_management=[...])`` (the Responses API's compaction) returns an
``AIMessage`` whose content holds ``{"type": "compaction", "id": "cmp_...",
"encrypted_content": ...}``; ``ChatAnthropic(context_management={...})`` one whose content holds
``{"type": "compaction", "content": <summary>, "encrypted_content"/"signature": ...}``
(streamed as ``compaction_delta``). Either must go back to the provider as it came, in its
place: it stands for everything before it. The package never clears, cuts, digests or
summarises such a message; a compaction plans around it (see
:func:`~langchain_compact._compaction_plan.plan_compaction`).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage

__all__ = ["carries_provider_compaction", "is_compaction_block"]

COMPACTION_TYPE = "compaction"


def is_compaction_block(block: Any) -> bool:
    """A provider compaction content block, as langchain-openai and langchain-anthropic keep
    it (``type == "compaction"``), or wrapped as a standard ``non_standard`` block.

    Example:
        >>> is_compaction_block({"type": "compaction", "id": "cmp_1", "encrypted_content": "x"})
        True
        >>> is_compaction_block({"type": "non_standard", "value": {"type": "compaction"}})
        True
        >>> is_compaction_block({"type": "text", "text": "compaction"})
        False
    """
    if not isinstance(block, dict):
        return False
    if block.get("type") == COMPACTION_TYPE:
        return True
    value = block.get("value")
    return (
        block.get("type") == "non_standard"
        and isinstance(value, dict)
        and value.get("type") == COMPACTION_TYPE
    )


def carries_provider_compaction(message: BaseMessage) -> bool:
    """Whether ``message`` holds a provider's compaction item (in its content blocks).

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> carries_provider_compaction(AIMessage(content=[{"type": "compaction", "content": "s"}]))
        True
        >>> carries_provider_compaction(AIMessage("plain"))
        False
    """
    content = message.content
    return isinstance(content, list) and any(is_compaction_block(b) for b in content)
