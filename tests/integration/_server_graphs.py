"""Extra graphs the server tests serve beside the example's (``examples/server``).

* ``recall_agent``: the example agent whose scripted model, asked ``RECALL <tool_call_id>``,
  calls the recall tool and answers with what it returned (otherwise it is the demo policy);
* ``limited_agent``: the example agent stopped by ``max_compactions=1``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from langchain_compact import CompactionConfig
from langchain_compact.demo import ContextReadingPolicy

_EXAMPLE_DIR = str(Path(__file__).resolve().parents[2] / "examples" / "server")
if _EXAMPLE_DIR not in sys.path:
    sys.path.append(_EXAMPLE_DIR)

import compacting_graphs as example  # noqa: E402

RECALL_PREFIX = "RECALL "


class RecallingPolicy(ContextReadingPolicy):
    """The demo policy, plus: ``RECALL <id>`` -> call ``recall_archived(tool_call_id=<id>)``."""

    def _respond(self, messages: list[BaseMessage]) -> ChatResult:
        last = messages[-1]
        if isinstance(last, HumanMessage) and last.text.startswith(RECALL_PREFIX):
            call = {
                "name": "recall_archived",
                "args": {"tool_call_id": last.text[len(RECALL_PREFIX) :].strip()},
                "id": f"recall-{len(messages)}",
                "type": "tool_call",
            }
            reply = AIMessage("", tool_calls=[call])
        elif isinstance(last, ToolMessage) and last.name == "recall_archived":
            reply = AIMessage(last.text)
        else:
            return super()._respond(messages)
        return ChatResult(generations=[ChatGeneration(message=reply)])


recall_agent = example.build_agent(model=RecallingPolicy())
limited_agent = example.build_agent(
    config=CompactionConfig(context_window=example.DEMO_WINDOW, max_compactions=1)
)
