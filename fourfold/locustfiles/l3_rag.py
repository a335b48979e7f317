"""L3 RAG pipeline. `locust -f locustfiles/l3_rag.py` (no --host: simulator + reference RAG service)."""

from locust import events

from fourfold.levels import RagUser

events.init_command_line_parser.add_listener(RagUser.add_arguments)
events.init.add_listener(RagUser.register)

__all__ = ["RagUser"]
