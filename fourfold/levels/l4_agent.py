"""L4 agentic sessions: a user that offers tools, runs the one the model calls, and goes on until the model
answers in text (``locust -f locustfiles/l4_agent.py``).

Each :class:`AgentUser` takes a conversation with tools (``--dataset``, default the bundled
``data/datasets/tools_sample.jsonl``; format: docs/datasets.md, "Conversations with tools") and sends it
with its tools. When the answer calls tools, the user runs each (a scripted result: the item's
``tool_results[name]`` when it has one, else ``{"tool": name, "ok": true}``) for ``--tool-latency-ms``,
appends the call and the results to the history (OpenAI's shape; each dialect converts it) and sends
again. A session ends ``completed`` when an answer is text, ``max_turns`` after ``--agent-max-rounds``
requests that all called tools, ``abandoned`` (``error``) when a request failed.

Every request is one record (scenario ``agent``, ``agent@A`` / ``agent@B`` under A/B) whose tool calls are
judged against the offered tools like any (``tool_call_valid_share``); ``record.extra`` has
``session_id``, ``turn``, ``messages`` and ``final``; the last request of an ended session also
``outcome``, ``session_completed``, ``rounds``, ``session_tool_calls`` and ``session_duration_ms``. The
sessions block of summary.json (:mod:`fourfold.levels.l4_stats`) counts them as L4's sessions, with the
tool calls per session; the report shows completion, rounds and tool calls per session.
"""

from __future__ import annotations

import json
from typing import Any

import gevent
from locust.exception import StopUser

from fourfold.data import DATA_DIR
from fourfold.levels.l4_session import SessionUser
from fourfold.measure.record import TOOL_CALLS, RequestRecord
from fourfold.measure.stats import end_s
from fourfold.workloads.formats import load_items_as
from fourfold.workloads.items import Item

__all__ = ["DEFAULT_TOOLS_DATASET", "AgentUser", "tool_result"]

DEFAULT_TOOLS_DATASET = DATA_DIR / "datasets" / "tools_sample.jsonl"


def tool_result(item: Item, name: str) -> str:
    """The scripted result of calling ``name`` in ``item``'s conversation (a JSON text)."""
    scripted = item.meta.get("tool_results")
    if isinstance(scripted, dict) and name in scripted:
        value = scripted[name]
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return json.dumps({"tool": name, "ok": True})


class AgentUser(SessionUser):
    """A user running tool-calling conversations to their text answer (see the module docstring)."""

    scenario = "agent"
    default_dataset = DEFAULT_TOOLS_DATASET
    dataset_hint = "L4 agent needs conversations with tools: see docs/datasets.md"

    @classmethod
    def check_dataset(cls, path: str) -> dict[str, Any]:
        items = load_items_as(path)
        without = [item.id for item in items if not item.meta.get("tools")]
        if without:
            raise ValueError(f"{len(without)} item(s) offer no tools (first: {without[0]!r})")
        return {}

    def on_start(self) -> None:
        while self._warmups_left > 0:      # warm-up: a first turn alone, outside any session
            self.request(self.items[self.user_id % len(self.items)], scenario=self.scenario_name)

    def session(self) -> None:
        item = self.next_item()
        self.sessions_started += 1
        session_id = f"{self.user_key}-s{self.sessions_started}"
        stats = self.session_run.stats
        stats.variant(self.variant).started()
        settings = self.session_settings
        history = list(item.messages)
        state: dict[str, Any] = {"turn": 0, "calls": 0, "first_s": None, "outcome": ""}

        def after_turn(record: RequestRecord) -> None:
            if state["first_s"] is None:
                state["first_s"] = record.started_at
            calls = record.extra.get(TOOL_CALLS) or []
            state["calls"] += len(calls)
            if not record.ok:
                outcome, reason = "abandoned", "error"
            elif not calls:
                outcome, reason = "completed", ""
            elif state["turn"] >= settings.agent_max_rounds:
                outcome, reason = "max_turns", ""
            else:
                state["pending"] = calls
                return
            duration_ms = max(0.0, (end_s(record) - state["first_s"]) * 1000)
            record.extra.update(final=True, outcome=outcome, session_completed=outcome == "completed",
                                abandoned=outcome == "abandoned", abandon_reason=reason, rounds=state["turn"],
                                session_tool_calls=state["calls"], session_duration_ms=round(duration_ms, 3))
            stats.variant(self.variant).ended(outcome, state["turn"], duration_ms, reason,
                                              tool_calls=state["calls"])
            state["outcome"] = outcome

        try:
            while not state["outcome"]:
                state["turn"] += 1
                state["pending"] = []
                extra = {"session_id": session_id, "turn": state["turn"], "messages": len(history),
                         "final": False}
                self.request(Item(id=item.id, messages=tuple(history), references=item.references,
                                  max_tokens=item.max_tokens, meta={"tools": item.meta["tools"]}),
                             scenario=self.scenario_name, extra=extra, annotate=after_turn)
                if state["pending"]:
                    gevent.sleep(settings.tool_latency_ms / 1000)      # the user runs the tools
                    history += self.tool_turn(item, state["pending"])
        finally:
            if not state["outcome"]:
                stats.variant(self.variant).cut()        # the run stopped mid-session
            self.session_run.publish()
        limit = settings.sessions_per_user
        if limit and self.sessions_started >= limit:
            self.session_run.user_done()
            raise StopUser()

    @staticmethod
    def tool_turn(item: Item, calls: list[dict[str, str]]) -> list[dict[str, Any]]:
        """The assistant's calls and the user's results, as the next messages (OpenAI's shape)."""
        ids = [call["id"] or f"call_{i}" for i, call in enumerate(calls)]
        functions = [{"name": call["name"], "arguments": call["arguments"]} for call in calls]
        assistant = {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": fn} for call_id, fn in zip(ids, functions)]}
        results = [{"role": "tool", "tool_call_id": call_id, "content": tool_result(item, call["name"])}
                   for call_id, call in zip(ids, calls)]
        return [assistant, *results]
