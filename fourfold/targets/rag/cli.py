"""``python -m fourfold.targets.rag``: the reference RAG service, until SIGTERM or SIGINT.

Prints exactly one line on stdout once it accepts connections::

    fourfold-rag listening on http://127.0.0.1:PORT

(``--port 0`` picks a free port); diagnostics go to stderr. Exit status 0 on a clean stop,
1 when it cannot listen, 2 for bad arguments or an unreadable corpus.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence

from fourfold.errors import ProfileError
from fourfold.targets.lifeline import watch_parent
from fourfold.targets.rag.corpus import DEFAULT_CORPUS, load_corpus
from fourfold.targets.rag.retriever import RERANKERS, RETRIEVERS, Pipeline
from fourfold.targets.rag.server import RagServer, RagService
from fourfold.targets.rag.upstream import Upstream
from fourfold.targets.sim.profile import load_profile

LISTENING_PREFIX = "fourfold-rag listening on "


def stages(profile: str | None, retriever: str | None, rerank: str | None) -> tuple[str, str]:
    """(first stage, re-ranker): the ones given, else the profile's, else bm25 / none."""
    if profile and (retriever is None or rerank is None):
        chosen = load_profile(profile)
        retriever = retriever or chosen.rag_retriever
        rerank = rerank or chosen.rag_rerank
    return retriever or "bm25", rerank or "none"


def build_parser(prog: str = "python -m fourfold.targets.rag") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="fourfold's reference RAG service: retrieval "
                                     "over a bundled corpus, then an OpenAI-compatible model upstream.")
    parser.add_argument("--upstream", default="http://127.0.0.1:8000",
                        help="OpenAI-compatible base URL of the model (default http://127.0.0.1:8000, "
                             "the simulator's default port)")
    parser.add_argument("--model", default="fourfold-sim", help="model name sent upstream")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8100,
                        help="port to bind; 0 picks a free one (default 8100)")
    parser.add_argument("--retriever", choices=RETRIEVERS, default=None,
                        help="first stage: bm25 (default) or dense (all-MiniLM-L6-v2; loads torch)")
    parser.add_argument("--rerank", nargs="?", const="lexical", default=None, choices=RERANKERS,
                        help="re-rank the first stage's candidates: none (default), lexical (best-sentence "
                             "coverage; the default when the flag has no value) or dense (MiniLM)")
    parser.add_argument("--profile", default=None,
                        help="a simulator profile (name or .json path) whose rag_retriever / rag_rerank are "
                             "the defaults of --retriever / --rerank (the version's RAG configuration; "
                             "fourfold/targets/profiles/README.md)")
    parser.add_argument("--top-k", type=int, default=3, help="documents given to the model (default 3)")
    parser.add_argument("--candidates", type=int, default=20,
                        help="first-stage candidates for the re-ranker (default 20)")
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="corpus JSONL (id, title, text)")
    parser.add_argument("--max-tokens", type=int, default=256, help="default max_tokens sent upstream")
    parser.add_argument("--upstream-timeout-s", type=float, default=60.0,
                        help="upstream connect/read timeout")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m fourfold.targets.rag") -> int:
    watch_parent()          # started by a launcher: end with it, even when it is killed (-9)
    args = build_parser(prog).parse_args(argv)
    try:
        retriever, rerank = stages(args.profile, args.retriever, args.rerank)
        pipeline = Pipeline.build(load_corpus(args.corpus), retriever, rerank, args.top_k, args.candidates)
        upstream = Upstream(args.upstream, args.model, args.upstream_timeout_s,
                            os.environ.get("FOURFOLD_UPSTREAM_API_KEY", ""))
    except (OSError, ValueError, ProfileError) as exc:
        print(f"fourfold-rag: {exc}", file=sys.stderr)
        return 2
    try:
        server = RagServer((args.host, args.port), RagService(pipeline, upstream, args.max_tokens),
                           args.verbose)
    except OSError as exc:
        print(f"fourfold-rag: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    worker = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    worker.start()
    host, port = str(server.server_address[0]), int(server.server_address[1])
    host = f"[{host}]" if ":" in host else host
    print(f"{LISTENING_PREFIX}http://{host}:{port}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.shutdown()
        server.server_close()
    return 0
