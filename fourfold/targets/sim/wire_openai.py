"""OpenAI chat completions, as vLLM serves them (``POST /v1/chat/completions``).

Stream: one ``data:`` event per token; the first carries ``{"role":"assistant","content":""}``
(sent together with token 0, like vLLM), then ``{"content": token}`` per token (a reasoning token:
``{"reasoning_content": token}``, or the profile's ``reasoning_field``), a final chunk with
an empty delta and ``finish_reason``, a usage chunk (``"choices": []``) when
``stream_options.include_usage`` is true (the other chunks then carry ``"usage": null``), and
``data: [DONE]``.
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
    encode_run,
    json_str,
    parse_json_object,
    positive_int,
    split_run,
)

DONE = b"data: [DONE]\n\n"


def error(message: str, status: int = 400, err_type: str = "invalid_request_error",
          param: str | None = None) -> WireError:
    return WireError(status, {"error": {"message": message, "type": err_type, "param": param, "code": None}})


def parse(body: bytes, headers: dict[str, str], default_model: str) -> ParsedRequest:
    data = parse_json_object(body, error)
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise error("'messages' must be a non-empty list of message objects", param="messages")
    max_tokens = data.get("max_completion_tokens", data.get("max_tokens"))
    max_tokens = positive_int(max_tokens, "max_tokens", error)
    prompt = ""
    for message in reversed(messages):
        if message.get("role") == "user":
            prompt = "".join(content_text(message.get("content")))
            break
    input_tokens = sum(count_tokens(t) for m in messages for t in content_text(m.get("content")))
    stream_options = data.get("stream_options") or {}
    include_usage = bool(isinstance(stream_options, dict) and stream_options.get("include_usage"))
    model: str = data["model"] if isinstance(data.get("model"), str) else default_model
    tools, forced = apply_choice(offered_tools(data), data.get("tool_choice"))
    return ParsedRequest(
        dialect="openai",
        model=model,
        prompt=prompt.strip(),
        input_tokens=input_tokens,
        stream=bool(data.get("stream")),
        max_tokens=max_tokens,
        ignore_eos=bool(data.get("ignore_eos")),
        make_encoder=lambda plan, request_id: ChatEncoder(plan, request_id, model, include_usage),
        options={"include_usage": include_usage},
        messages=chat_history(messages),
        tools=tools,
        tool_forced=forced,
        tool_result=ends_with_tool_result(messages),
    )


def models_body(model: str) -> bytes:
    return dumps({
        "object": "list",
        "data": [{"id": model, "object": "model", "created": 0, "owned_by": "fourfold", "root": model,
                  "parent": None}],
    })


class ChatEncoder:
    """Renders one chat completion (stream or not) from its plan."""

    content_type = SSE_CONTENT_TYPE
    __slots__ = ("plan", "request_id", "model", "include_usage", "created", "_head", "_prefix", "_suffix",
                 "_thought_prefix", "_call_prefix", "_call_suffix")

    def __init__(self, plan: Plan, request_id: str, model: str, include_usage: bool) -> None:
        self.plan = plan
        self.request_id = f"chatcmpl-{request_id}"
        self.model = model
        self.include_usage = include_usage
        self.created = int(time.time())
        self._head = (
            b'{"id":' + json_str(self.request_id) + b',"object":"chat.completion.chunk","created":'
            + str(self.created).encode() + b',"model":' + json_str(model)
        )
        usage_tail = b',"usage":null' if include_usage else b""
        self._prefix = b"data: " + self._head + b',"choices":[{"index":0,"delta":{"content":'
        self._suffix = b'},"logprobs":null,"finish_reason":null}]' + usage_tail + b"}\n\n"
        self._thought_prefix = (b"data: " + self._head + b',"choices":[{"index":0,"delta":{'
                                + json_str(plan.reasoning_field) + b":")
        # a tool call's argument pieces (the call's id and name come with the first)
        self._call_prefix = (b"data: " + self._head + b',"choices":[{"index":0,"delta":{"tool_calls":'
                             b'[{"index":0,"function":{"arguments":')
        self._call_suffix = b'}}]},"logprobs":null,"finish_reason":null}]' + usage_tail + b"}\n\n"

    def prelude(self) -> bytes:
        return b""

    def tokens(self, first: int, texts: list[str]) -> bytes:
        call = self.plan.tool_call
        if call is not None:
            run = encode_run(self._call_prefix, split_run(self.plan, first, texts)[1], self._call_suffix)
            if first:
                return run
            opening = {"role": "assistant", "content": None, "tool_calls": [{
                "index": 0, "id": call.call_id, "type": "function",
                "function": {"name": call.name, "arguments": ""}}]}
            return self._prefix[:-len(b'"content":')] + dumps(opening)[1:-1] + self._suffix + run
        thoughts, answer = split_run(self.plan, first, texts)    # the events of this run
        run = encode_run(self._prefix, answer, self._suffix)
        if thoughts:
            run = encode_run(self._thought_prefix, thoughts, self._suffix) + run
        if first == 0:
            role = self._prefix[:-len(b'"content":')] + b'"role":"assistant","content":""' + self._suffix
            return role + run
        return run

    def closing(self) -> bytes:
        plan = self.plan
        usage_tail = b',"usage":null' if self.include_usage else b""
        out = (
            b"data: " + self._head + b',"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":'
            + json_str(plan.finish_reason) + b',"stop_reason":null}]' + usage_tail + b"}\n\n"
        )
        if self.include_usage:
            out += b"data: " + self._head + b',"choices":[],"usage":' + dumps(self.usage()) + b"}\n\n"
        return out + DONE

    def usage(self) -> dict[str, Any]:
        """vLLM's usage with ``--enable-prompt-tokens-details`` (the prefix cache's share); the
        reasoning count as OpenAI and DeepSeek report it, when the answer reasoned."""
        plan = self.plan
        usage: dict[str, Any] = {
            "prompt_tokens": plan.input_tokens,
            "total_tokens": plan.input_tokens + plan.output_tokens,
            "completion_tokens": plan.output_tokens,
            "prompt_tokens_details": {"cached_tokens": plan.cached_tokens},
        }
        if plan.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": plan.reasoning}
        return usage

    def body(self) -> bytes:
        plan = self.plan
        message: dict[str, Any] = {"role": "assistant", "content": plan.text}
        if plan.reasoning:
            message[plan.reasoning_field] = plan.reasoning_text
        if plan.tool_call is not None:
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": plan.tool_call.call_id, "type": "function",
                "function": {"name": plan.tool_call.name, "arguments": plan.text}}]}
        return dumps({
            "id": self.request_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": self.plan.finish_reason,
                "stop_reason": None,
            }],
            "usage": self.usage(),
        })

