"""The embedded RAG service takes its stages from --sim-profile unless the options name them
(the candidate re-ranks: the article's recall@3 68.3 -> 79.1 % row needs the two profiles to differ)."""

from __future__ import annotations

import pytest

from fourfold.levels.l3_rag import RagUser
from fourfold.levels.options import Settings

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("settings", "stages"), [
    (Settings(sim_profile="baseline"), ("bm25", "none")),
    (Settings(sim_profile="candidate"), ("bm25", "lexical")),
    (Settings(sim_profile="candidate", rag_rerank="none"), ("bm25", "none")),      # an explicit value wins
])
def test_the_embedded_rag_service_follows_the_profile_unless_told(settings, stages):
    url, handles = RagUser.start_embedded(settings)
    try:
        service = handles[-1]
        assert url == service.url
        assert (service.config["retriever"], service.config["rerank"]) == stages
    finally:
        for handle in reversed(handles):
            handle.stop()
