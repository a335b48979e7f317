"""L2 gateway: HTTP/1.1 and HTTP/2 side by side. `locust -f locustfiles/l2_protocols.py --host URL -u 16`.

H1User (scenario h1, fourfold's HTTP/1.1 transport) and H2User (scenario h2, httpx + h2: ALPN over
https, h2c prior knowledge over http) share -u by weight (1:1); run one alone by naming it
(`locust -f ... H2User`) or pick in the web UI with --class-picker. The embedded simulator speaks
HTTP/1.1 only: give --host an HTTP/2 server.
"""

from locust import events

from fourfold.levels import H1User, H2User

events.init_command_line_parser.add_listener(H1User.add_arguments)
events.init.add_listener(H1User.register)

__all__ = ["H1User", "H2User"]
