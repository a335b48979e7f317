"""Embeddings and rerank by batch size. `locust -f locustfiles/embeddings.py` (no --host: the simulator)."""

from locust import events

from fourfold.levels import EmbedUser

events.init_command_line_parser.add_listener(EmbedUser.add_arguments)
events.init.add_listener(EmbedUser.register)

__all__ = ["EmbedUser"]
