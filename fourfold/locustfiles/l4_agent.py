"""L4 agentic sessions: users offer tools, run the ones the model calls and send the results back until
it answers in text. `locust -f locustfiles/l4_agent.py` (no --host: the embedded simulator; --dataset: a
conversations-with-tools JSONL, default the bundled tools sample)."""

from locust import events

from fourfold.levels.l4_agent import AgentUser

events.init_command_line_parser.add_listener(AgentUser.add_arguments)
events.init.add_listener(AgentUser.register)

__all__ = ["AgentUser"]
