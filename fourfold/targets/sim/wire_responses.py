"""The OpenAI Responses API (``POST /v1/responses``), streaming and not, as vLLM and OpenAI serve it.

Stream (each event is ``event: TYPE`` + ``data: JSON`` + blank line, every payload carrying its
``type`` and a ``sequence_number`` counting from 0): ``response.created`` and ``response.in_progress``
(the response object, status ``in_progress``), then per output item ``response.output_item.added``,
its deltas and ``response.output_item.done``. A reasoning answer opens a ``reasoning`` item whose
tokens are ``response.reasoning_text.delta`` events (vLLM's and gpt-oss's raw reasoning; OpenAI's own
models send ``response.reasoning_summary_text.delta`` instead); the answer is a ``message`` item
(``response.content_part.added``, one ``response.output_text.delta`` per token,
``response.output_text.done``, ``response.content_part.done``). The last event is
``response.completed`` (status ``completed``) or, for an answer cut at ``max_output_tokens``,
``response.incomplete`` (``incomplete_details.reason: "max_output_tokens"``), each with the whole
response and its ``usage`` (``input_tokens_details.cached_tokens``,
``output_tokens_details.reasoning_tokens``).

The request's ``input`` is a string or a list of messages (``{"role", "content"}``, the content a
string or ``input_text`` parts); ``instructions`` is the system prompt; ``max_output_tokens`` the
limit. ``ignore_eos`` is read as vLLM's chat extension is.
"""

from __future__ import annotations

import time
from typing import Any

from fourfold.targets.sim.plan import Plan
from fourfold.targets.sim.tokens import content_text, count_tokens
from fourfold.targets.sim.toolcalls import apply_choice, ends_with_tool_result, offered_tools
from fourfold.targets.sim.wire import (
    SSE_CONTENT_TYPE,
    ParsedRequest,
    WireError,
    chat_history,
    dumps,
    json_str,
    parse_json_object,
    positive_int,
    split_run,
)


def error(message: str, status: int = 400, err_type: str = "invalid_request_error",
          param: str | None = None) -> WireError:
    return WireError(status, {"error": {"message": message, "type": err_type, "param": param, "code": None}})


def _messages(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation as chat messages: ``instructions`` first, then ``input``."""
    raw = data.get("input")
    if isinstance(raw, str) and raw:
        messages = [{"role": "user", "content": raw}]
    elif isinstance(raw, list) and raw and all(isinstance(m, dict) for m in raw):
        messages = [m for m in raw if m.get("type", "message") == "message" or "role" in m]
    else:
        raise error("'input' must be a non-empty string or a non-empty list of input items", param="input")
    instructions = data.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages = [{"role": "system", "content": instructions}, *messages]
    return messages


def parse(body: bytes, headers: dict[str, str], default_model: str) -> ParsedRequest:
    data = parse_json_object(body, error)
    messages = _messages(data)
    raw = data.get("input")
    max_tokens = positive_int(data.get("max_output_tokens"), "max_output_tokens", error)
    prompt = ""
    for message in reversed(messages):
        if message.get("role") == "user":
            prompt = "".join(content_text(message.get("content")))
            break
    input_tokens = sum(count_tokens(t) for m in messages for t in content_text(m.get("content")))
    model: str = data["model"] if isinstance(data.get("model"), str) else default_model
    tools, forced = apply_choice(offered_tools(data), data.get("tool_choice"))
    return ParsedRequest(
        dialect="responses",
        model=model,
        prompt=prompt.strip(),
        input_tokens=input_tokens,
        stream=bool(data.get("stream")),
        max_tokens=max_tokens,
        ignore_eos=bool(data.get("ignore_eos")),
        make_encoder=lambda plan, request_id: ResponsesEncoder(plan, request_id, model, max_tokens),
        messages=chat_history(messages),
        tools=tools,
        tool_forced=forced,
        tool_result=ends_with_tool_result(raw if isinstance(raw, list) else messages),
    )


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + dumps({"type": kind, **payload}) + b"\n\n"


class ResponsesEncoder:
    """Renders one Responses API response from its plan; the events' sequence numbers run on."""

    content_type = SSE_CONTENT_TYPE
    __slots__ = ("plan", "response_id", "model", "max_tokens", "created", "seq", "_text_prefix",
                 "_thought_prefix", "_call_prefix")

    def __init__(self, plan: Plan, request_id: str, model: str, max_tokens: int | None) -> None:
        self.plan = plan
        self.response_id = f"resp_{request_id}"
        self.model = model
        self.max_tokens = max_tokens
        self.created = int(time.time())
        self.seq = 0
        message = 1 if plan.reasoning else 0        # the message item's output index
        self._text_prefix = (b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
                             b'"item_id":' + json_str(f"msg_{request_id}") + b',"output_index":%d,'
                             b'"content_index":0,"logprobs":[],"delta":' % message)
        self._thought_prefix = (b'event: response.reasoning_text.delta\ndata: {"type":'
                                b'"response.reasoning_text.delta","item_id":' + json_str(f"rs_{request_id}")
                                + b',"output_index":0,"content_index":0,"delta":')
        self._call_prefix = (b'event: response.function_call_arguments.delta\ndata: {"type":'
                             b'"response.function_call_arguments.delta","item_id":'
                             + json_str(f"fc_{request_id}") + b',"output_index":0,"delta":')

    # ---- the items ----
    def _reasoning_item(self, done: bool) -> dict[str, Any]:
        item: dict[str, Any] = {"id": "rs_" + self.response_id[5:], "type": "reasoning", "summary": []}
        if done:
            item["content"] = [{"type": "reasoning_text", "text": self.plan.reasoning_text}]
        return item

    def _message_item(self, done: bool) -> dict[str, Any]:
        content = [{"type": "output_text", "text": self.plan.text, "annotations": [], "logprobs": []}]
        return {"id": "msg_" + self.response_id[5:], "type": "message", "role": "assistant",
                "status": "completed" if done else "in_progress", "content": content if done else []}

    def _call_item(self, done: bool) -> dict[str, Any]:
        call = self.plan.tool_call
        assert call is not None
        return {"id": "fc_" + self.response_id[5:], "type": "function_call",
                "status": "completed" if done else "in_progress", "arguments": self.plan.text if done else "",
                "call_id": call.call_id, "name": call.name}

    def _answers(self) -> bool:
        """The answer has a token (an answer cut during its reasoning has none)."""
        return self.plan.output_tokens > self.plan.reasoning

    def response(self, status: str) -> dict[str, Any]:
        plan = self.plan
        output: list[dict[str, Any]] = []
        if status != "in_progress" and plan.tool_call is not None:
            output.append(self._call_item(True))
        elif status != "in_progress":
            if plan.reasoning:
                output.append(self._reasoning_item(True))
            if self._answers():
                output.append(self._message_item(True))
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        usage = None
        if status != "in_progress":
            usage = {"input_tokens": plan.input_tokens,
                     "input_tokens_details": {"cached_tokens": plan.cached_tokens},
                     "output_tokens": plan.output_tokens,
                     "output_tokens_details": {"reasoning_tokens": min(plan.reasoning, plan.output_tokens)},
                     "total_tokens": plan.input_tokens + plan.output_tokens}
        return {"id": self.response_id, "object": "response", "created_at": self.created, "status": status,
                "model": self.model, "output": output, "incomplete_details": incomplete, "error": None,
                "max_output_tokens": self.max_tokens, "usage": usage}

    # ---- the events ----
    def _next(self, kind: str, payload: dict[str, Any]) -> bytes:
        out = _event(kind, {**payload, "sequence_number": self.seq})
        self.seq += 1
        return out

    def _open_message(self) -> bytes:
        index = 1 if self.plan.reasoning else 0
        return (self._next("response.output_item.added", {"output_index": index,
                                                          "item": self._message_item(False)})
                + self._next("response.content_part.added", {
                    "item_id": "msg_" + self.response_id[5:], "output_index": index, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}))

    def prelude(self) -> bytes:
        head = (self._next("response.created", {"response": self.response("in_progress")})
                + self._next("response.in_progress", {"response": self.response("in_progress")}))
        if self.plan.tool_call is not None:
            return head + self._next("response.output_item.added", {"output_index": 0,
                                                                    "item": self._call_item(False)})
        if self.plan.reasoning:
            return head + self._next("response.output_item.added", {"output_index": 0,
                                                                    "item": self._reasoning_item(False)})
        return head + self._open_message()

    def _run(self, prefix: bytes, texts: list[str]) -> bytes:
        seq = self.seq
        self.seq += len(texts)
        return b"".join([prefix + json_str(t) + b',"sequence_number":%d}\n\n' % (seq + i)
                         for i, t in enumerate(texts)])

    def tokens(self, first: int, texts: list[str]) -> bytes:
        reasoning = self.plan.reasoning
        thought = min(max(0, reasoning - first), len(texts))    # reasoning tokens of this run
        thoughts, answer = split_run(self.plan, first, texts)    # ... and its events
        if self.plan.tool_call is not None:
            return self._run(self._call_prefix, answer)
        out = self._run(self._thought_prefix, thoughts) if thought else b""
        if thought < len(texts):
            if reasoning and first + thought == reasoning:      # the answer starts in this run
                out += self._close_reasoning() + self._open_message()
            out += self._run(self._text_prefix, answer)
        return out

    def _close_reasoning(self) -> bytes:
        item = self._reasoning_item(True)
        return (self._next("response.reasoning_text.done", {
                    "item_id": item["id"], "output_index": 0, "content_index": 0,
                    "text": self.plan.reasoning_text})
                + self._next("response.output_item.done", {"output_index": 0, "item": item}))

    def closing(self) -> bytes:
        plan = self.plan
        status = "incomplete" if plan.finish_reason == "length" else "completed"
        if plan.tool_call is not None:
            item = self._call_item(True)
            return (self._next("response.function_call_arguments.done", {
                        "item_id": item["id"], "output_index": 0, "arguments": plan.text})
                    + self._next("response.output_item.done", {"output_index": 0, "item": item})
                    + self._next(f"response.{status}", {"response": self.response(status)}))
        if not self._answers():          # cut (or ended) inside its reasoning: no message item
            out = self._close_reasoning() if plan.reasoning else b""
            return out + self._next(f"response.{status}", {"response": self.response(status)})
        index = 1 if plan.reasoning else 0
        item_id = "msg_" + self.response_id[5:]
        part = {"type": "output_text", "text": plan.text, "annotations": []}
        return (self._next("response.output_text.done", {"item_id": item_id, "output_index": index,
                                                         "content_index": 0, "text": plan.text,
                                                         "logprobs": []})
                + self._next("response.content_part.done", {"item_id": item_id, "output_index": index,
                                                            "content_index": 0, "part": part})
                + self._next("response.output_item.done", {"output_index": index,
                                                           "item": self._message_item(True)})
                + self._next(f"response.{status}", {"response": self.response(status)}))

    def body(self) -> bytes:
        status = "incomplete" if self.plan.finish_reason == "length" else "completed"
        return dumps(self.response(status))
