"""``python -m fourfold.targets.sim`` / ``fourfold sim``: run the simulator until SIGTERM or SIGINT.

Prints exactly one line on stdout once it accepts connections::

    fourfold-sim listening on http://127.0.0.1:PORT

(``--port 0`` picks a free port); diagnostics go to stderr. Exit status 0 on a clean stop,
2 for bad arguments or an unknown profile.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from fourfold.errors import FaultError
from fourfold.targets.lifeline import watch_parent
from fourfold.targets.sim import precise
from fourfold.targets.sim.answers import DEFAULT_PROMPTS_PATH, AnswerBook
from fourfold.targets.sim.app import SimApp, SimConfig
from fourfold.targets.sim.fault_spec import FAULT_KINDS, PARAMS, parse_fault_arg
from fourfold.targets.sim.gateway import OVER_LIMIT_MODES, GatewayConfig
from fourfold.targets.sim.profile import ProfileError, available_profiles, load_profile, parse_override
from fourfold.targets.sim.server import SimProtocol
from fourfold.targets.sim.sessions import DEFAULT_SESSIONS_DIR

LISTENING_PREFIX = "fourfold-sim listening on "


def build_parser(prog: str = "python -m fourfold.targets.sim") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="fourfold's embedded LLM simulator "
                                     "(OpenAI, Anthropic, Triton/KServe v2).")
    parser.add_argument("--profile", default="baseline",
                        help=f"profile name ({', '.join(available_profiles())}) or a .json path")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000,
                        help="port to bind; 0 picks a free one (default 8000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random draw (default 0)")
    parser.add_argument("--ttft-ms", type=float, help="override the profile's ttft_ms")
    parser.add_argument("--itl-ms", type=float, help="override the profile's itl_ms")
    parser.add_argument("--max-batch", type=int, help="override the profile's max_batch")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override any profile field (JSON value), e.g. --set pulse.pause_ms=150; "
                             "repeatable")
    parser.add_argument("--prompts", action="append", type=Path, default=[], metavar="JSONL",
                        help=f"extra prompt/reference files to answer from (after "
                             f"{DEFAULT_PROMPTS_PATH.name}); repeatable")
    parser.add_argument("--sessions", action="append", type=Path, default=[], metavar="JSONL",
                        help="extra session-script files (or directories of *.jsonl) for multi-turn answers, "
                             "after the bundled fourfold/data/sessions/; repeatable")
    parser.add_argument("--fault", dest="faults", action="append", default=[], metavar="KIND=RATE",
                        help=f"inject a fault into this share of generation requests (repeatable; rates add "
                             f"up to at most 1), or set a fault parameter ({', '.join(PARAMS)}); kinds: "
                             f"{', '.join(FAULT_KINDS)}")
    parser.add_argument("--max-concurrency", type=int, default=0,
                        help="gateway limit on generations in flight (0: none)")
    parser.add_argument("--over-limit", choices=OVER_LIMIT_MODES, default="queue",
                        help="what happens above the limit")
    parser.add_argument("--key-rate-limit", type=float, default=0.0, metavar="RPS",
                        help="requests per second each API key may send (token bucket, burst of one second); "
                             "over it: 429 with Retry-After (0: no limit)")
    parser.add_argument("--keepalive-timeout-s", type=float, default=None,
                        help="close keep-alive connections idle this long (0: never; default: the profile's "
                             "keepalive_timeout_s)")
    parser.add_argument("--keepalive-max-requests", type=int, default=None,
                        help="close a connection after this many requests (0: never; default: the profile's "
                             "keepalive_max_requests)")
    parser.add_argument("--list-profiles", action="store_true",
                        help="print the bundled profile names and exit")
    parser.add_argument("--print-profile", action="store_true",
                        help="print the merged profile as JSON and exit")
    return parser


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """Turn parsed arguments into a SimConfig; raises ProfileError / ValueError with a clear message."""
    overrides = dict(parse_override(text) for text in args.overrides)
    for field_name, value in (("ttft_ms", args.ttft_ms), ("itl_ms", args.itl_ms),
                              ("max_batch", args.max_batch)):
        if value is not None:
            overrides[field_name] = value
    for text in args.faults:
        name, value = parse_fault_arg(text)
        overrides[f"faults.{name}"] = value
    profile = load_profile(args.profile, overrides)
    gateway = GatewayConfig(
        args.max_concurrency, args.over_limit,
        keepalive_timeout_s=(profile.keepalive_timeout_s if args.keepalive_timeout_s is None
                             else args.keepalive_timeout_s),
        keepalive_max_requests=(profile.keepalive_max_requests if args.keepalive_max_requests is None
                                else args.keepalive_max_requests),
        key_rate_limit=args.key_rate_limit)
    return SimConfig(
        profile=profile,
        seed=args.seed,
        host=args.host,
        port=args.port,
        gateway=gateway,
        prompt_paths=(DEFAULT_PROMPTS_PATH, *args.prompts),
        session_paths=(DEFAULT_SESSIONS_DIR, *args.sessions),
    )


async def serve(config: SimConfig, stop: asyncio.Event | None = None, announce=print) -> None:
    """Serve until ``stop`` is set (or SIGTERM/SIGINT when no event is given)."""
    loop = asyncio.get_running_loop()
    app = SimApp(config, loop, AnswerBook.load(config.prompt_paths))
    gc.freeze()  # start-up objects (answers, profile, modules) never need scanning again
    server = await loop.create_server(lambda: SimProtocol(app), config.host, config.port,
                                      backlog=4096, reuse_address=True)
    if stop is None:
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
    port = server.sockets[0].getsockname()[1]
    host = f"[{config.host}]" if ":" in config.host else config.host
    announce(f"{LISTENING_PREFIX}http://{host}:{port}")
    try:
        await stop.wait()
    finally:
        server.close()
        app.scheduler.close()


def main(argv: Sequence[str] | None = None, prog: str = "python -m fourfold.targets.sim") -> int:
    """Run the simulator (``fourfold sim`` delegates here with its own ``prog``)."""
    watch_parent()          # started by a launcher: end with it, even when it is killed (-9)
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.list_profiles:
        print("\n".join(available_profiles()))
        return 0
    try:
        config = config_from_args(args)
    except (ProfileError, FaultError, ValueError) as exc:
        print(f"fourfold-sim: {exc}", file=sys.stderr)
        return 2
    if args.print_profile:
        print(json.dumps(config.profile.to_dict(), indent=2, ensure_ascii=False))
        return 0
    def announce(line: str) -> None:
        print(line, flush=True)

    try:
        with asyncio.Runner(loop_factory=precise.new_event_loop) as runner:
            runner.run(serve(config, announce=announce))
    except OSError as exc:
        print(f"fourfold-sim: cannot listen on {config.host}:{config.port}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
