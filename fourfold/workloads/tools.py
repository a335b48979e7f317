"""Tools a dataset item offers the model, and whether a call's arguments fit them (pure).

A dataset item offers tools in OpenAI's chat format (``docs/datasets.md``, "Conversations with tools")::

    {"id": "w1", "messages": [...], "tools": [{"type": "function", "function": {"name": "get_weather",
      "description": "...", "parameters": {"type": "object", "properties": {...}, "required": [...]}}}]}

:func:`check_tools` reads that list (ValueError naming what is wrong); each dialect sends it in its own
shape (:func:`anthropic_tools`, :func:`responses_tools`), and a history that holds tool calls and their
results too (:func:`anthropic_history`, :func:`responses_input`). :func:`offered_schemas` reads the tools back
out of any dialect's request body, and :func:`call_problem` says what is wrong with one call: its name
is not an offered tool, its arguments are no JSON object, or they break the tool's JSON schema
(``jsonschema``, the schema's own draft; Draft 2020-12 when it names none). A call is judged only when
the request offered tools; an empty argument text is ``{}``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

__all__ = ["MAX_TOOLS", "anthropic_history", "anthropic_tool_choice", "anthropic_tools", "call_problem",
           "check_tool_choice", "check_tools", "offered_schemas", "responses_input", "responses_tool_choice",
           "responses_tools"]

MAX_TOOLS = 128     # tools one item may offer


def check_tools(raw: Any) -> list[dict[str, Any]]:
    """An item's ``tools``: a non-empty list of ``{"type": "function", "function": {"name", "parameters"?,
    "description"?}}``; names unique; parameters a JSON schema object. ValueError otherwise."""
    if not isinstance(raw, list) or not raw or len(raw) > MAX_TOOLS:
        raise ValueError(f"'tools' must be a list of 1 to {MAX_TOOLS} function tools")
    names = set()
    for i, tool in enumerate(raw):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not (isinstance(tool, dict) and tool.get("type", "function") == "function"
                and isinstance(name, str) and name.strip()):
            raise ValueError(f"'tools'[{i}] must be {{\"type\": \"function\", \"function\": "
                             "{\"name\": ...}}")
        assert isinstance(function, dict)
        schema = function.get("parameters", {"type": "object"})
        if not isinstance(schema, dict):
            raise ValueError(f"'tools'[{i}] ({name}): 'parameters' must be a JSON schema object")
        problem = _schema_problem(json.dumps(schema, sort_keys=True))
        if problem:
            raise ValueError(f"'tools'[{i}] ({name}): 'parameters' is not a valid JSON schema: {problem}")
        if name in names:
            raise ValueError(f"'tools'[{i}]: the name {name!r} is offered twice")
        names.add(name)
    return raw


def check_tool_choice(raw: Any, tools: list[dict[str, Any]]) -> Any:
    """An item's ``tool_choice`` (OpenAI chat's): ``"auto"``, ``"none"``, ``"required"`` or
    ``{"type": "function", "function": {"name": <an offered tool>}}``. ValueError otherwise."""
    names = {tool["function"]["name"] for tool in tools}
    if raw in ("auto", "none", "required"):
        return raw
    function = raw.get("function") if isinstance(raw, dict) else None
    if isinstance(function, dict) and function.get("name") in names:
        return raw
    raise ValueError("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                     "\"function\": {\"name\": <one of the item's tools>}}")


def anthropic_tool_choice(choice: Any) -> dict[str, Any]:
    """OpenAI chat's ``tool_choice`` in the Messages API's shape (``none`` has none: ``auto``)."""
    if isinstance(choice, dict):
        return {"type": "tool", "name": choice["function"]["name"]}
    return {"type": "any"} if choice == "required" else {"type": "auto"}


def responses_tool_choice(choice: Any) -> Any:
    """OpenAI chat's ``tool_choice`` in the Responses API's flat shape."""
    return {"type": "function", "name": choice["function"]["name"]} if isinstance(choice, dict) else choice


def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat tools in the Messages API's shape (``name``, ``description``, ``input_schema``)."""
    out = []
    for tool in tools:
        function = tool["function"]
        entry = {"name": function["name"], "input_schema": function.get("parameters", {"type": "object"})}
        if function.get("description"):
            entry["description"] = function["description"]
        out.append(entry)
    return out


def responses_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat tools in the Responses API's flat shape (``type``, ``name``, ``parameters``, ...)."""
    return [{"type": "function", **tool["function"]} for tool in tools]


def offered_schemas(body: Any) -> dict[str, dict[str, Any]] | None:
    """Tool name -> its argument schema, from a request body of any dialect (chat's ``function``,
    the Responses API's flat tools, Anthropic's ``input_schema``); None when it offered no tools."""
    tools = body.get("tools") if isinstance(body, dict) else None
    if not isinstance(tools, list) or not tools:
        return None
    schemas: dict[str, dict[str, Any]] = {}
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        nested = tool.get("function")
        spec: dict[str, Any] = nested if isinstance(nested, dict) else tool
        name = spec.get("name")
        schema = spec.get("parameters", spec.get("input_schema", {"type": "object"}))
        if isinstance(name, str) and isinstance(schema, dict):
            schemas[name] = schema
    return schemas


def call_problem(name: str, arguments: str, schemas: dict[str, dict[str, Any]]) -> str:
    """What is wrong with one tool call ("" when nothing is): an unknown tool, arguments that are no
    JSON object, or arguments that break the tool's schema (the first violation, with its path)."""
    if name not in schemas:
        return f"no tool named {name[:64]!r} was offered"
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError):
        return "arguments are not JSON"
    if not isinstance(value, dict):
        return "arguments are not a JSON object"
    validator = _validator(json.dumps(schemas[name], sort_keys=True))
    if validator is None:
        return "the tool's schema is not a valid JSON schema"
    error = next(iter(validator.iter_errors(value)), None)
    if error is None:
        return ""
    where = "/".join(str(p) for p in error.absolute_path)
    return f"arguments break the schema at /{where}: {error.message[:160]}"


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    """A validator of one schema (cached by its text), or None when the schema itself is invalid."""
    import jsonschema  # only when a tool call is judged (a run without tools never imports it)

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return None
    return cls(schema)


@lru_cache(maxsize=256)
def _schema_problem(schema_json: str) -> str:
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return exc.message[:160]
    return ""


def anthropic_history(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A chat history in OpenAI's shape (assistant ``tool_calls``, ``role: "tool"`` results) in the Messages
    API's: ``tool_use`` blocks, and ``tool_result`` blocks in a user turn (consecutive results in one)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role == "assistant" and message.get("tool_calls"):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    arguments = {}
                blocks.append({"type": "tool_use", "id": call.get("id", ""),
                               "name": function.get("name", ""),
                               "input": arguments if isinstance(arguments, dict) else {}})
            out.append({"role": "assistant", "content": blocks})
        elif role == "tool":
            result = {"type": "tool_result", "tool_use_id": message.get("tool_call_id", ""),
                      "content": content}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(result)
            else:
                out.append({"role": "user", "content": [result]})
        else:
            out.append(dict(message))
    return out


def responses_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A chat history in OpenAI's chat shape as Responses ``input`` items: assistant ``tool_calls`` become
    ``function_call`` items, ``role: "tool"`` results ``function_call_output`` items."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            if message.get("content"):
                out.append({"role": "assistant", "content": message["content"]})
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                out.append({"type": "function_call", "call_id": call.get("id", ""),
                            "name": function.get("name", ""), "arguments": function.get("arguments") or "{}"})
        elif message.get("role") == "tool":
            out.append({"type": "function_call_output", "call_id": message.get("tool_call_id", ""),
                        "output": message.get("content") or ""})
        else:
            out.append(dict(message))
    return out
