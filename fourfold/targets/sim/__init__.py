"""fourfold's embedded LLM simulator ("fourfold sim").

A raw-asyncio HTTP/1.1 server that speaks the OpenAI chat and Responses, Anthropic Messages and Triton/KServe
v2 wire formats, answers from the bundled prompt dataset, and paces every token by a plan drawn
from a profile (``targets/profiles/*.json``). Run it with ``python -m fourfold.targets.sim --profile
baseline --port 0`` or start it from Python with :func:`fourfold.targets.launch.start_simulator`.

Modules: ``tokens`` (tokenizer), ``answers`` (dataset lookup), ``profile`` (profiles),
``perturb`` (quality knobs), ``plan`` (per-request plan, pure), ``wire*`` (formats),
``httpio`` (HTTP/1.1 parsing), ``scheduler`` (the one token scheduler), ``gateway``
(admission control), ``metrics`` (/metrics), ``app`` (routing/state), ``server`` (connections),
``cli`` (entry point).
"""

from __future__ import annotations

from fourfold.targets.sim.cli import LISTENING_PREFIX, build_parser, main, serve
from fourfold.targets.sim.profile import Profile, ProfileError, available_profiles, load_profile

__all__ = [
    "LISTENING_PREFIX",
    "Profile",
    "ProfileError",
    "available_profiles",
    "build_parser",
    "load_profile",
    "main",
    "serve",
]
