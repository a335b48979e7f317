"""Offline retrieval quality of the reference RAG service's configurations (no server, no load).

    python benchmarks/rag_recall.py            # bm25 and bm25 + lexical re-rank
    python benchmarks/rag_recall.py --dense    # also MiniLM dense retrieval / re-rank (loads torch)

For every configuration: recall@k and context precision@k over the bundled questions (the same
definitions as the L3 level: measure.rag), the share of questions whose top k holds a conflict
(two documents of one conflict group that disagree), and the mean retrieval time per question.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fourfold.measure.rag import conflict_groups, precision_at_k, recall_at_k  # noqa: E402
from fourfold.targets.rag import Pipeline, load_corpus, load_questions  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--dense", action="store_true",
                        help="include MiniLM configurations (slow first start)")
    args = parser.parse_args(argv)
    docs, questions = load_corpus(), load_questions()
    claims = {d.id: d.meta.get("claims") or {} for d in docs}
    configs = [("bm25", "none"), ("bm25", "lexical")]
    if args.dense:
        configs += [("bm25", "dense"), ("dense", "none"), ("dense", "lexical")]
    embedder = None
    print(f"{len(docs)} documents, {len(questions)} questions, k={args.k}")
    print(f"{'retriever':<10} {'rerank':<8} {'recall@k':>9} {'precision@k':>12} "
          f"{'conflict':>9} {'ms/query':>9}")
    for retriever, rerank in configs:
        if "dense" in (retriever, rerank) and embedder is None:
            from fourfold.targets.rag.dense import default_embedder

            embedder = default_embedder()
        pipeline = Pipeline.build(docs, retriever, rerank, top_k=args.k, embedder=embedder)
        recall = precision = conflicts = 0.0
        started = time.perf_counter()
        for q in questions:
            ids = list(pipeline.retrieve(q.prompt).ids)
            recall += recall_at_k(ids, q.gold_ids, args.k) or 0.0
            precision += precision_at_k(ids, q.gold_ids, args.k) or 0.0
            conflicts += bool(conflict_groups(ids, claims))
        ms = (time.perf_counter() - started) * 1000 / len(questions)
        n = len(questions)
        print(f"{retriever:<10} {rerank:<8} {recall / n:>9.3f} {precision / n:>12.3f} "
              f"{conflicts / n:>9.1%} {ms:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
