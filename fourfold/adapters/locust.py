"""Locust's insides that fourfold uses (checked against locust 2.47.0).

- a User's run state, to sleep as a Locust wait does (:func:`user_waiting`);
- a worker's stats report, sent now rather than at the next 3 s tick (:func:`send_stats_now`);
- the web UI's template arguments: the extra tabs, tables and downloads
  (:func:`add_web_ui_tabs`, the shape of Locust's ``examples/extend_web_ui.py``) and the start
  form's option defaults (:func:`hide_secret_defaults_in_start_form`);
- the ``include_in_web_ui`` mark Locust's parser puts on each option (:func:`show_in_web_ui`);
- Locust's own options' defaults, built once per process instead of once per option of every
  spawn message a worker handles (:func:`build_default_args_once`).

Locust is imported inside the functions: importing it patches the standard library with gevent
(``locust/__init__.py``), which a module that merely imports this one must not do.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any

import gevent

from fourfold.adapters.argparse import actions

__all__ = ["add_web_ui_tabs", "build_default_args_once", "hide_secret_defaults",
           "hide_secret_defaults_in_start_form", "send_stats_now",
           "show_in_web_ui", "user_waiting"]


@contextmanager
def user_waiting(user: Any) -> Iterator[None]:
    """The body of the ``with`` as a Locust wait of ``user``, as ``TaskSet.wait`` marks one: on
    the user's own greenlet, a user being stopped raises ``StopUser`` before the body and after
    it, and while the body runs the user is "waiting" (a stop kills it there at once, with nothing
    more sent). On any other greenlet the body just runs. An exception from the body passes
    through with the user's state left as it is.

    Private names: ``User._state`` and the ``LOCUST_STATE_RUNNING`` / ``_STOPPING`` / ``_WAITING``
    values of ``locust.user.task``; the user's greenlet is the public ``User.greenlet``. Checked
    against locust 2.47.0."""
    from locust.exception import StopUser
    from locust.user.task import LOCUST_STATE_RUNNING, LOCUST_STATE_STOPPING, LOCUST_STATE_WAITING

    own = gevent.getcurrent() is user.greenlet
    if own:
        if user._state == LOCUST_STATE_STOPPING:
            raise StopUser()
        user._state = LOCUST_STATE_WAITING
    yield
    if own:
        if user._state == LOCUST_STATE_STOPPING:
            raise StopUser()
        user._state = LOCUST_STATE_RUNNING


def send_stats_now(runner: Any) -> bool:
    """On a worker, send the stats report (and with it whatever the ``report_to_master`` listeners
    add: fourfold's records) to the master now; False on a runner that sends none (local, master).
    An error of the send (the master gone) is raised to the caller.

    Private name: ``WorkerRunner._send_stats``; checked against locust 2.47.0."""
    send = getattr(runner, "_send_stats", None)
    if send is None:
        return False
    send()
    return True


def add_web_ui_tabs(web_ui: Any, tabs: list[dict[str, Any]], tables: list[dict[str, Any]],
                    csv_files: list[dict[str, str]]) -> None:
    """Extra tabs on Locust's page (``{"title", "key"}``), their tables (``{"key", "structure":
    [{"key", "title"}, ...]}``, rows from ``extended_stats`` in ``/stats/requests``) and download
    links (``{"href", "title"}``), replacing any given before.

    Private names: the ``extended_tabs``, ``extended_tables`` and ``extended_csv_files`` keys of
    ``WebUI.template_args``, which the page's script reads (shown in Locust's
    ``examples/extend_web_ui.py``, not documented as API); checked against locust 2.47.0."""
    web_ui.template_args["extended_tabs"] = tabs
    web_ui.template_args["extended_tables"] = tables
    web_ui.template_args["extended_csv_files"] = csv_files


def hide_secret_defaults(template_args: dict[str, Any]) -> None:
    """Blank every secret option's value in the start form's defaults (in place).

    Private names: ``template_args["extra_options"]``, one entry per option in the form with its
    ``is_secret`` and ``default_value`` (``locust.argument_parser.ui_extra_args_dict``); checked
    against locust 2.47.0."""
    for option in (template_args.get("extra_options") or {}).values():
        if option.get("is_secret") and option.get("default_value"):
            option["default_value"] = ""


def hide_secret_defaults_in_start_form(web_ui: Any) -> None:
    """Keep secret options' values (an API key) out of the page: Locust puts every option's value
    into the start form's HTML, a secret's too (a password field, but in the page source). Blanks
    them now and after every rebuild of the page's arguments (:func:`hide_secret_defaults`).

    Private name: ``WebUI.update_template_args``, which Locust calls to rebuild
    ``WebUI.template_args`` (each load of the page, each test start) and which this replaces with
    itself followed by the blanking; checked against locust 2.47.0."""
    update = web_ui.update_template_args

    def update_template_args() -> None:
        update()
        hide_secret_defaults(web_ui.template_args)

    web_ui.update_template_args = update_template_args
    hide_secret_defaults(web_ui.template_args)


def show_in_web_ui(parser: Any, dests: Collection[str]) -> None:
    """Put the options whose ``dest`` is in ``dests`` into the web UI's start form, after they were
    added with ``include_in_web_ui=False``.

    Private name: the ``include_in_web_ui`` attribute ``LocustArgumentParser.add_argument`` sets on
    each action and the form reads (``args_included_in_web_ui``); the actions come from
    :func:`fourfold.adapters.argparse.actions`. Checked against locust 2.47.0."""
    for action in actions(parser):
        if action.dest in dests:
            action.include_in_web_ui = True  # type: ignore[attr-defined]


def build_default_args_once() -> None:
    """Make ``locust.argument_parser.default_args_dict`` build its dict once per process.

    A worker handles each spawn message (the test's start, and every change of the user count: a
    ladder step, an edit in the web UI) by keeping the master's options that are not Locust's own,
    and it asks ``default_args_dict()`` once per option: each call builds Locust's whole parser
    (~2.4 ms). With fourfold's options a worker's event loop stood still 209 to 272 ms at each
    spawn message (gevent's blocking monitor showed where), while its users' streams were in
    flight. The dict is Locust's own options' defaults (no event hook adds to that parser) read
    with the process's environment, so one build serves the process; each caller gets a copy.
    Idempotent.

    Private name: the module attribute ``locust.argument_parser.default_args_dict``, which
    ``WorkerRunner.handle_message`` and ``ui_extra_args_dict`` look up through the module at each
    call; checked against locust 2.47.0."""
    from locust import argument_parser

    build = argument_parser.default_args_dict
    if getattr(build, "fourfold_once", False):
        return
    built: list[dict[str, Any]] = []

    def default_args_dict() -> dict[str, Any]:
        if not built:
            built.append(build())
        return dict(built[0])

    default_args_dict.fourfold_once = True  # type: ignore[attr-defined]
    argument_parser.default_args_dict = default_args_dict
