"""The four levels as Locust Users, for the stock locustfiles and for your own.

A locustfile imports one concrete User and attaches fourfold's listeners with Locust's events::

    from locust import events
    from fourfold.levels import RagUser

    events.init_command_line_parser.add_listener(RagUser.add_arguments)
    events.init.add_listener(RagUser.register)

Importing this package changes nothing in Locust: no listener, no option, until those two lines.
"""

from fourfold.levels.base import LLMUser
from fourfold.levels.embed_batches import EmbedUser
from fourfold.levels.l1_throughput import ThroughputUser
from fourfold.levels.l2_gateway import GatewayUser, H1User, H2User, OpenLoopUser
from fourfold.levels.l3_rag import RagUser
from fourfold.levels.l4_session import SessionUser
from fourfold.levels.ladder import LadderShape

__all__ = ["EmbedUser", "GatewayUser", "H1User", "H2User", "LLMUser", "LadderShape", "OpenLoopUser",
           "RagUser", "SessionUser", "ThroughputUser"]
