"""Other libraries' insides, behind one door each.

The rule: every private name of another library that fourfold uses (an underscore attribute, a
method it replaces, a structure it edits that the library does not document) lives in this
package and nowhere else, one module per library:

- :mod:`fourfold.adapters.httpx`: the client's transport, mounts and URL joining, the bound
  response stream, the connection pool of ``httpx.HTTPTransport``;
- :mod:`fourfold.adapters.gevent`: the OS socket inside a gevent socket;
- :mod:`fourfold.adapters.locust`: a User's wait state, a worker's stats report, the web UI's
  template arguments and start form, Locust's option defaults built once;
- :mod:`fourfold.adapters.flask`: replacing a request's parsed form (Flask / Werkzeug);
- :mod:`fourfold.adapters.argparse`: a parser's list of actions.

Each function's docstring names the private name it uses and the version it was checked
against; ``tests/unit/test_adapters.py`` fails with the library's installed version when a name
has moved, and fails when a module outside this package uses one of the names.
``pyproject.toml`` bounds these libraries below their next minor version. An adapter imports its
library inside its functions where importing it has side effects (Locust patches the standard
library with gevent when imported), so importing fourfold changes nothing.
"""

__all__ = ["argparse", "flask", "gevent", "httpx", "locust"]
