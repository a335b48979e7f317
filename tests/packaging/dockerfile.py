"""Read the repository's Dockerfile the way the tests need it: instructions, the image's command."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

IMAGE_LOCUSTFILES = "/opt/fourfold/locustfiles"     # where the image links the stock locustfiles


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, its arguments) in order; comments dropped, continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def stages(path: Path) -> list[list[tuple[str, str]]]:
    """The instructions of each stage (a FROM starts one)."""
    out: list[list[tuple[str, str]]] = []
    for word, rest in instructions(path):
        if word == "FROM":
            out.append([])
        out[-1].append((word, rest))
    return out


def env_of(rest: str) -> dict[str, str]:
    """ENV's KEY=VALUE pairs (the one-pair ``ENV KEY VALUE`` form too)."""
    parts = shlex.split(rest)
    if parts and "=" not in parts[0]:
        return {parts[0]: " ".join(parts[1:])}
    return dict(part.split("=", 1) for part in parts)


def image_command(path: Path) -> tuple[list[str], dict[str, str]]:
    """The final stage's ENTRYPOINT + CMD (exec form) and its ENV."""
    final = stages(path)[-1]
    argv: dict[str, list[str]] = {"ENTRYPOINT": [], "CMD": []}
    env: dict[str, str] = {}
    for word, rest in final:
        if word in argv:
            argv[word] = json.loads(rest)
        elif word == "ENV":
            env.update(env_of(rest))
    return argv["ENTRYPOINT"] + argv["CMD"], env
