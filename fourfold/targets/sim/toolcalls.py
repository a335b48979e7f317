"""Tool calls: the simulator answering a request that offers tools (pure; written apart from the client).

A request that offers tools (OpenAI chat ``tools``, the Responses API's flat ``tools``, Anthropic's
``tools`` with ``input_schema``) and does not end with a tool's result is answered by a call to one of
them in ``tool_call_share`` of the cases (the profile's; 1 by default, as a model offered a tool for
its question uses it): the tool whose name and description share the most words with the prompt (the
first on a tie), arguments made from its JSON schema (:func:`arguments_for`). ``tool_call_invalid_rate``
of the calls break the schema on purpose (:func:`break_arguments`: a required field left out, else a
value of the wrong type, else no object at all), so a client's validity figure has something to find.
A request that ends with a tool's result (OpenAI ``role: "tool"``, an Anthropic ``tool_result`` part,
a Responses ``function_call_output`` item) is answered in text. Every draw comes from a generator of
its own, seeded by the request, so the other draws stay as they were.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["ToolCall", "apply_choice", "arguments_for", "break_arguments", "choose_call",
           "ends_with_tool_result", "offered_tools"]

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str      # the JSON text, as it will be streamed
    broken: bool = False


def offered_tools(data: dict[str, Any]) -> tuple[tuple[str, str, dict[str, Any]], ...]:
    """``(name, description, schema)`` of each tool a request body offers, in any of the three shapes."""
    tools = data.get("tools")
    out = []
    for tool in tools if isinstance(tools, list) else ():
        nested = isinstance(tool, dict) and isinstance(tool.get("function"), dict)
        spec = tool["function"] if nested else tool
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            continue
        schema = spec.get("parameters", spec.get("input_schema"))
        description = spec.get("description")
        out.append((spec["name"], description if isinstance(description, str) else "",
                    schema if isinstance(schema, dict) else {"type": "object"}))
    return tuple(out)


def apply_choice(tools: tuple[tuple[str, str, dict[str, Any]], ...],
                 choice: Any) -> tuple[tuple[tuple[str, str, dict[str, Any]], ...], bool]:
    """The tools a request's ``tool_choice`` leaves, and whether a call is forced: ``none`` leaves none;
    ``required`` (Anthropic ``any``) forces one; a named tool (OpenAI ``{"function": {"name"}}``,
    Responses ``{"name"}``, Anthropic ``{"type": "tool", "name"}``) forces that one."""
    if choice == "none" or (isinstance(choice, dict) and choice.get("type") == "none"):
        return (), False
    if choice == "required" or (isinstance(choice, dict) and choice.get("type") == "any"):
        return tools, True
    if isinstance(choice, dict):
        nested = choice.get("function")
        spec: dict[str, Any] = nested if isinstance(nested, dict) else choice
        named = tuple(t for t in tools if t[0] == spec.get("name"))
        if named:
            return named, True
    return tools, False


def ends_with_tool_result(messages: list[Any]) -> bool:
    """The conversation's last entry is a tool's result (OpenAI, Anthropic or Responses shape)."""
    last = messages[-1] if messages else None
    if not isinstance(last, dict):
        return False
    if last.get("role") == "tool" or last.get("type") == "function_call_output":
        return True
    content = last.get("content")
    return isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "tool_result"
                                             for p in content)


def choose_call(tools: tuple[tuple[str, str, dict[str, Any]], ...], prompt: str, seed: int, occurrence: int,
                share: float, invalid_rate: float) -> ToolCall | None:
    """The call that answers this request, or None (answered in text); see the module docstring."""
    if not tools:
        return None
    rng = random.Random(f"{seed}\x1ftool\x1f{prompt}\x1f{occurrence}")
    if rng.random() >= share:
        return None
    words = {w.lower() for w in _WORD.findall(prompt)}
    scores = [len(words & {w.lower() for w in _WORD.findall(f"{name} {name.replace('_', ' ')} {desc}")})
              for name, desc, _ in tools]
    name, _, schema = tools[scores.index(max(scores))]
    arguments = arguments_for(schema, prompt)
    broken = rng.random() < invalid_rate
    text = json.dumps(break_arguments(arguments, schema) if broken else arguments, ensure_ascii=False)
    digest = hashlib.sha256(f"{seed}\x1f{prompt}\x1f{occurrence}".encode()).hexdigest()[:24]
    return ToolCall(f"call_{digest}", name, text, broken)


def arguments_for(schema: dict[str, Any], prompt: str, depth: int = 0) -> Any:
    """A value that fits ``schema`` (the common keywords: type, properties, required, enum, const,
    items, minimum), strings taken from the prompt's capitalised words (a city, a name)."""
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" and depth < 8:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        return {key: arguments_for(sub if isinstance(sub, dict) else {}, prompt, depth + 1)
                for key, sub in properties.items()}
    if kind == "array" and depth < 8:
        items = schema.get("items")
        items = items if isinstance(items, dict) else {}
        return [arguments_for(items, prompt, depth + 1)] * max(1, int(schema.get("minItems", 1)))
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = int(low) + (1 if "exclusiveMinimum" in schema else 0) if isinstance(low, (int, float)) else 1
        return value if kind == "integer" else float(value)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    names = [w for w in _WORD.findall(prompt) if w[0].isupper()]
    return " ".join(names[1:3]) if len(names) > 1 else (names[0] if names else "example")


def break_arguments(arguments: Any, schema: dict[str, Any]) -> Any:
    """Arguments that break ``schema``: a required field left out, else the first property of the wrong
    type, else a list where an object belongs."""
    if isinstance(arguments, dict):
        required = [k for k in schema.get("required", []) if k in arguments]
        if required:
            return {k: v for k, v in arguments.items() if k != required[0]}
        for key, value in arguments.items():
            return {**arguments, key: 12345 if isinstance(value, str) else "not-a-number"}
    return [arguments]
