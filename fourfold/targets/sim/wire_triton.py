"""Triton / KServe v2: the generate extension and tensor inference.

- ``POST /v2/models/{model}/generate_stream``: SSE, one
  ``data: {"model_name":..,"model_version":"1","text_output":"<token>"}`` per token; the stream
  simply ends (Triton sends no terminal event).
- ``POST /v2/models/{model}/generate``: ``{"model_name","model_version","text_output"}``.
- ``POST /v2/models/{model}/infer``: KServe v2 tensors; input ``text_input`` (also ``prompt`` or
  ``text``) BYTES, optional ``max_tokens`` INT32; output ``text_output`` BYTES, plus a top-level
  ``inference_time_ms`` as in the article's example.

Generate requests take ``text_input`` and ``max_tokens`` at the top level or in ``parameters``.
"""

from __future__ import annotations

from typing import Any

from fourfold.targets.sim.plan import Plan
from fourfold.targets.sim.tokens import count_tokens
from fourfold.targets.sim.wire import (
    SSE_CONTENT_TYPE,
    ParsedRequest,
    WireError,
    dumps,
    encode_run,
    json_str,
    parse_json_object,
    positive_int,
)

TEXT_INPUT_NAMES = ("text_input", "prompt", "text")


def error(message: str, status: int = 400) -> WireError:
    return WireError(status, {"error": message})


def _params(data: dict[str, Any]) -> dict[str, Any]:
    params = data.get("parameters")
    return params if isinstance(params, dict) else {}


def _first(value: Any) -> Any:
    while isinstance(value, list) and value:
        value = value[0]
    return value


def parse_generate(body: bytes, model: str, stream: bool) -> ParsedRequest:
    data = parse_json_object(body, error)
    params = _params(data)
    text = _first(data.get("text_input", params.get("text_input")))
    if not isinstance(text, str):
        raise error("input 'text_input' is required (a string)")
    max_tokens = positive_int(_first(data.get("max_tokens", params.get("max_tokens"))), "max_tokens", error)
    ignore_eos = bool(_first(data.get("ignore_eos", params.get("ignore_eos"))))
    return ParsedRequest(
        dialect="triton",
        model=model,
        prompt=text.strip(),
        input_tokens=count_tokens(text),
        stream=stream,
        max_tokens=max_tokens,
        ignore_eos=ignore_eos,
        make_encoder=lambda plan, request_id: GenerateEncoder(plan, model),
    )


def parse_infer(body: bytes, model: str) -> ParsedRequest:
    data = parse_json_object(body, error)
    inputs = data.get("inputs")
    if not isinstance(inputs, list) or not all(isinstance(t, dict) for t in inputs):
        raise error("'inputs' must be a list of tensors")
    tensors = {t.get("name"): t for t in inputs}
    text_tensor = next((tensors[n] for n in TEXT_INPUT_NAMES if n in tensors), None)
    if text_tensor is None:
        raise error(f"missing input tensor; expected one of {', '.join(TEXT_INPUT_NAMES)} (BYTES)")
    if text_tensor.get("datatype", "BYTES") != "BYTES":
        raise error(f"input '{text_tensor.get('name')}' must have datatype BYTES")
    text = _first(text_tensor.get("data"))
    if not isinstance(text, str):
        raise error(f"input '{text_tensor.get('name')}' must hold one string")
    max_tokens = None
    if "max_tokens" in tensors:
        max_tokens = positive_int(_first(tensors["max_tokens"].get("data")), "max_tokens", error)
    params = _params(data)
    request_tag = data.get("id") if isinstance(data.get("id"), str) else None
    return ParsedRequest(
        dialect="kserve",
        model=model,
        prompt=text.strip(),
        input_tokens=count_tokens(text),
        stream=False,
        max_tokens=max_tokens,
        ignore_eos=bool(params.get("ignore_eos")),
        make_encoder=lambda plan, request_id: InferEncoder(plan, model, request_tag),
    )


class GenerateEncoder:
    content_type = SSE_CONTENT_TYPE
    __slots__ = ("plan", "model", "_prefix")

    def __init__(self, plan: Plan, model: str) -> None:
        self.plan = plan
        self.model = model
        self._prefix = b'data: {"model_name":' + json_str(model) + b',"model_version":"1","text_output":'

    def prelude(self) -> bytes:
        return b""

    def tokens(self, first: int, texts: list[str]) -> bytes:
        return encode_run(self._prefix, texts, b"}\n\n")

    def closing(self) -> bytes:
        return b""

    def body(self) -> bytes:
        return dumps({"model_name": self.model, "model_version": "1", "text_output": self.plan.text})


class InferEncoder(GenerateEncoder):
    __slots__ = ("request_tag",)

    def __init__(self, plan: Plan, model: str, request_tag: str | None) -> None:
        super().__init__(plan, model)
        self.request_tag = request_tag

    def body(self) -> bytes:
        out: dict[str, Any] = {"model_name": self.model, "model_version": "1"}
        if self.request_tag is not None:
            out["id"] = self.request_tag
        out["outputs"] = [{"name": "text_output", "datatype": "BYTES", "shape": [1],
                           "data": [self.plan.text]}]
        out["inference_time_ms"] = round(self.plan.duration_ms + self.plan.queued_ms, 3)
        return dumps(out)
