"""Flask's and Werkzeug's insides that fourfold uses (checked against Flask 3.1.3, Werkzeug 3.1.9).

Locust's ``/swarm`` view reads the start form from ``flask.request.form``. fourfold's
``before_request`` hooks on Locust's app (:mod:`fourfold.levels.webui`) take some fields out of
that form before the view runs; Flask has no API for changing a request's form. Flask and Werkzeug
are imported inside the function, as at the call sites before: only a web UI needs them.
"""

from __future__ import annotations

from collections.abc import Collection

__all__ = ["drop_form_fields"]


def drop_form_fields(names: Collection[str]) -> None:
    """Take the fields ``names`` (every value of each) out of the form of the request being
    handled, so that whatever reads ``request.form`` next (Locust's view) does not see them.

    Relies on: ``flask.request`` forwarding an assignment to Werkzeug's ``Request``, whose ``form``
    is a ``werkzeug.utils.cached_property``; setting it replaces the parsed form for the rest of
    the request. Checked against Flask 3.1.3 and Werkzeug 3.1.9."""
    from flask import request
    from werkzeug.datastructures import ImmutableMultiDict

    form = request.form
    request.form = ImmutableMultiDict(  # type: ignore[misc]
        [(key, value) for key, value in form.items(multi=True) if key not in names])
