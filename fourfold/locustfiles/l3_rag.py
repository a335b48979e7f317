"""L3 RAG pipeline. `locust -f locustfiles/l3_rag.py` (no --host: simulator + reference RAG service)."""

from fourfold.levels.l3_rag import RagUser

__all__ = ["RagUser"]
