"""How well MiniLM similarity and the character-bigram F1 separate paraphrases from unrelated
answers on the bundled Chinese items (English beside them for contrast).

For each bundled item of a language, the paraphrase is its reference as the simulator's
paraphrasing candidate words it (``fourfold.targets.sim.paraphrase``: every sentence reworded,
half the items reordered; fixed seed); the unrelated answers are the paraphrases of every other
item of the same language, scored against this item's reference. For each measure: the mean and
the lowest paraphrase score, the mean and the highest unrelated score, and the AUC (the chance a
paraphrase scores above an unrelated answer of its reference: 1.0 separates perfectly, 0.5 not at
all); plus the mean [UNK] share of the answers (what makes an answer low-confidence).

    python benchmarks/fingerprint_cjk.py
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fourfold.data import DATA_DIR  # noqa: E402
from fourfold.fingerprint.embedder import MiniLMEmbedder  # noqa: E402
from fourfold.fingerprint.lexical import char_f1  # noqa: E402
from fourfold.targets.sim.paraphrase import GenerationKnobs, generate  # noqa: E402
from fourfold.workloads.items import load_items  # noqa: E402


def separation(same: list[float], other: list[float]) -> str:
    same_a, other_a = np.asarray(same), np.asarray(other)
    auc = float(np.mean([(s > o) + 0.5 * (s == o) for s in same_a for o in other_a]))
    return (f"{same_a.mean():.3f} | {same_a.min():.3f} | {other_a.mean():.3f} | {other_a.max():.3f} | "
            f"{same_a.min() - other_a.max():+.3f} | {auc:.3f}")


def main() -> int:
    items = load_items(DATA_DIR / "prompts" / "prompts.jsonl")
    embedder = MiniLMEmbedder(backend="torch-fp32")
    knobs = GenerationKnobs(paraphrase_rate=1.0, reorder_rate=0.5)
    print("| language | measure | paraphrase mean | paraphrase min | unrelated mean | unrelated max | "
          "min - max | AUC |")
    print("|---|---|---|---|---|---|---|---|")
    notes = []
    for lang in ("zh", "en"):
        chosen = [i for i in items if lang in i.meta.get("tags", [])]
        rng = random.Random(11)
        refs = [i.references[0] for i in chosen]
        answers = [generate(ref, knobs, rng, i.prompt)[0] for ref, i in zip(refs, chosen)]
        vec_a, vec_r = embedder.encode(answers), embedder.encode(refs)
        cos = vec_a @ vec_r.T
        n = len(chosen)
        same_cos = [float(cos[i, i]) for i in range(n)]
        other_cos = [float(cos[j, i]) for i in range(n) for j in range(n) if j != i]
        f1 = [[char_f1(answers[j], refs[i]) or 0.0 for i in range(n)] for j in range(n)]
        same_f1 = [f1[i][i] for i in range(n)]
        other_f1 = [f1[j][i] for i in range(n) for j in range(n) if j != i]
        print(f"| {lang} ({n} items) | MiniLM cosine | {separation(same_cos, other_cos)} |")
        print(f"| {lang} ({n} items) | char-bigram F1 | {separation(same_f1, other_f1)} |")
        unk = [s for s in embedder.unk_shares(answers) if s is not None]
        notes.append(f"{lang}: [UNK] share of the answers mean {np.mean(unk):.2f}, min {min(unk):.2f}, "
                     f"max {max(unk):.2f}; {sum(s > 0.2 for s in unk)} of {len(unk)} above the 0.2 threshold")
    print()
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
