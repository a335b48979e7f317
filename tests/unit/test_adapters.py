"""Other libraries' insides stay behind ``fourfold/adapters/`` (issue 31, item 4).

Each adapter is held to the library installed: a name it relies on that has moved fails here with
the library's version, before a run would find it. Every module outside the package is walked with
:mod:`ast` for those names, and ``pyproject.toml`` must bound each library the installed version
is within.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import platform
import re
import tomllib
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from types import ModuleType

import flask
import gevent
import gevent.pool
import gevent.socket
import httpcore
import httpx
import pytest
from gevent.monkey import get_original
from locust import User, constant, task
from locust.argument_parser import LocustArgumentParser
from locust.env import Environment
from locust.exception import StopUser
from packaging.requirements import Requirement

import fourfold
from fourfold.adapters import argparse as argparse_adapter
from fourfold.adapters import flask as flask_adapter
from fourfold.adapters import gevent as gevent_adapter
from fourfold.adapters import httpx as httpx_adapter
from fourfold.adapters import locust as locust_adapter
from tests.unit.syntax import nodes

PACKAGE_DIR = Path(fourfold.__file__).resolve().parent
ADAPTERS_DIR = PACKAGE_DIR / "adapters"
PYPROJECT = PACKAGE_DIR.parent / "pyproject.toml"
ADAPTER_MODULES = (argparse_adapter, flask_adapter, gevent_adapter, httpx_adapter, locust_adapter)


def installed(library: str) -> str:
    """``httpx 0.29.0``; argparse is Python's."""
    return f"Python {platform.python_version()}" if library == "argparse" else f"{library} {version(library)}"


def moved(library: str, name: str, adapter: str = "") -> str:
    """The failure message: the library, its installed version, what moved, what to update."""
    return (f"{installed(library)}: {name} is gone or changed; update "
            f"fourfold/adapters/{adapter or library}.py and the library's bound in pyproject.toml")


def _user_state_names() -> bool:
    user_task = importlib.import_module("locust.user.task")      # (locust.user.task is also a function)

    class Probe(User):
        pass

    states = ("LOCUST_STATE_RUNNING", "LOCUST_STATE_STOPPING", "LOCUST_STATE_WAITING")
    return hasattr(Probe(Environment()), "_state") and all(hasattr(user_task, name) for name in states)


def _worker_send_stats() -> bool:
    from locust.runners import WorkerRunner

    return callable(getattr(WorkerRunner, "_send_stats", None))


def _worker_reads_default_args_through_the_module() -> bool:
    """``WorkerRunner.handle_message`` calls ``argument_parser.default_args_dict()`` at each call,
    through the module (so the adapter's replacement is the one it calls)."""
    from locust import argument_parser
    from locust.runners import WorkerRunner

    return (callable(getattr(argument_parser, "default_args_dict", None))
            and "argument_parser.default_args_dict()" in inspect.getsource(WorkerRunner.handle_message))


def _web_ui_update() -> bool:
    from locust.web import WebUI

    return callable(getattr(WebUI, "update_template_args", None))


def _argparse_actions() -> bool:
    return isinstance(vars(argparse.ArgumentParser()).get("_actions"), list)


def _gevent_sock() -> bool:
    sock = gevent.socket.socket()
    try:
        return hasattr(sock, "_sock")
    finally:
        sock.close()


# (library, private name, is it still there): the names each adapter reads, looked up without calling it
NAMES: list[tuple[str, str, Callable[[], bool]]] = [
    ("httpx", "Client._transport", lambda: hasattr(_mock_client(), "_transport")),
    ("httpx", "Client._mounts", lambda: isinstance(getattr(_mock_client(), "_mounts", None), dict)),
    ("httpx", "Client._merge_url", lambda: callable(getattr(httpx.Client, "_merge_url", None))),
    ("httpx", "HTTPTransport._pool", lambda: hasattr(httpx.HTTPTransport(), "_pool")),
    ("gevent", "socket._sock", _gevent_sock),
    ("locust", "User._state and locust.user.task.LOCUST_STATE_*", _user_state_names),
    ("locust", "WorkerRunner._send_stats", _worker_send_stats),
    ("locust", "WebUI.update_template_args", _web_ui_update),
    ("locust", "argument_parser.default_args_dict, read by WorkerRunner.handle_message",
     _worker_reads_default_args_through_the_module),
    ("argparse", "ArgumentParser._actions", _argparse_actions),
]


@pytest.mark.parametrize(("library", "name", "present"), NAMES, ids=[name for _, name, _ in NAMES])
def test_the_private_name_is_still_there(library: str, name: str, present: Callable[[], bool]) -> None:
    assert present(), moved(library, name)


# -- httpx --

def _mock_client(**kwargs: object) -> httpx.Client:
    body = httpx.ByteStream(b"data: {}\n\n")
    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=body))
    return httpx.Client(transport=transport, trust_env=False, **kwargs)   # type: ignore[arg-type]


def test_httpx_direct_transport_is_the_plain_clients_own() -> None:
    client = _mock_client()
    assert httpx_adapter.direct_transport(client, httpx.MockTransport) is not None, \
        moved("httpx", "Client._transport or Client._mounts")
    mounted = _mock_client(mounts={"http://other": httpx.MockTransport(lambda request: httpx.Response(204))})
    assert httpx_adapter.direct_transport(mounted, httpx.MockTransport) is None, \
        moved("httpx", "Client._mounts")
    assert httpx_adapter.direct_transport(client, httpx.HTTPTransport) is None      # another kind
    client.close()
    assert httpx_adapter.direct_transport(client, httpx.MockTransport) is None      # closed


def test_httpx_merge_url_joins_as_the_client_does() -> None:
    client = _mock_client(base_url="http://127.0.0.1:9/v1")
    joined = httpx_adapter.merge_url(client, "/chat/completions")
    assert joined == httpx.URL("http://127.0.0.1:9/v1/chat/completions"), moved("httpx", "Client._merge_url")


class _Body(httpx.SyncByteStream):
    def __iter__(self):  # type: ignore[no-untyped-def]
        yield b"data: {}\n\n"


def test_httpx_transport_stream_and_the_broken_cycle() -> None:
    body = _Body()
    client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, stream=body)),
                          trust_env=False)
    with client.stream("GET", "http://127.0.0.1:9/") as response:
        assert httpx_adapter.transport_stream(response) is body, moved("httpx", "BoundSyncStream._stream")
        response.read()
    wrapper = response.stream
    assert getattr(wrapper, "_response", None) is response, moved("httpx", "BoundSyncStream._response")
    httpx_adapter.break_stream_cycle(response)
    assert wrapper._response is None  # type: ignore[attr-defined]
    straight = httpx.Response(200, stream=body)                   # from a transport: no wrapper
    assert httpx_adapter.transport_stream(straight) is body


def test_httpx_connection_pool_is_httpcores() -> None:
    transport = httpx.HTTPTransport()
    pool = httpx_adapter.connection_pool(transport)
    assert isinstance(pool, httpcore.ConnectionPool) and pool.connections == [], \
        moved("httpx", "HTTPTransport._pool")
    transport.close()


# -- gevent --

def test_gevent_os_socket_is_the_wrapped_one() -> None:
    sock = gevent.socket.socket()
    try:
        raw = gevent_adapter.os_socket(sock)
        assert raw is not None and raw.fileno() == sock.fileno() and gevent_adapter.os_socket(raw) is None, \
            moved("gevent", "socket._sock")
    finally:
        sock.close()
    plain = get_original("socket", "socket")()
    try:
        assert gevent_adapter.os_socket(plain) is None                 # the standard library's own
    finally:
        plain.close()


# -- Locust --

def test_locust_user_waiting_marks_the_wait_and_honours_a_stop() -> None:
    seen: list[str] = []

    class Probe(User):
        wait_time = constant(0)

        @task
        def probe(self) -> None:
            with locust_adapter.user_waiting(self):
                seen.append(self._state)
                gevent.sleep(0.01)
            seen.append(self._state)
            self.stop()                          # Locust marks a running user as stopping
            try:
                with locust_adapter.user_waiting(self):
                    seen.append("body ran")
            except StopUser:
                seen.append("StopUser")
                raise

    user = Probe(Environment())
    group = gevent.pool.Group()
    user.start(group)
    group.join(timeout=5)
    assert seen == ["waiting", "running", "StopUser"], moved("locust", "User._state / LOCUST_STATE_*")
    with locust_adapter.user_waiting(user):         # not on the user's greenlet: the body just runs
        seen.append("elsewhere")
    assert seen[-1] == "elsewhere"


def test_locust_a_waiting_user_is_stopped_at_once() -> None:
    class Sleeper(User):
        wait_time = constant(0)

        @task
        def sleep(self) -> None:
            with locust_adapter.user_waiting(self):
                gevent.sleep(10)

    user = Sleeper(Environment())
    group = gevent.pool.Group()
    greenlet = user.start(group)
    gevent.sleep(0.05)
    assert user.stop() is True and greenlet.dead, moved("locust", "User._state (waiting)")


def test_locust_send_stats_now_on_a_worker_only() -> None:
    from locust.runners import LocalRunner, MasterRunner, WorkerRunner

    assert callable(getattr(WorkerRunner, "_send_stats", None)), moved("locust", "WorkerRunner._send_stats")
    assert not hasattr(LocalRunner, "_send_stats") and not hasattr(MasterRunner, "_send_stats"), \
        moved("locust", "_send_stats on a local or master runner")
    sent: list[int] = []

    class Worker:
        def _send_stats(self) -> None:
            sent.append(1)

    assert locust_adapter.send_stats_now(Worker()) is True and sent == [1]
    assert locust_adapter.send_stats_now(object()) is False


def test_locust_default_args_are_built_once_and_each_caller_gets_its_own_copy(monkeypatch) -> None:
    from locust import argument_parser

    builds: list[int] = []
    original = argument_parser.default_args_dict

    def counted() -> dict:
        builds.append(1)
        return original()

    monkeypatch.setattr(argument_parser, "default_args_dict", counted)    # restored after the test
    locust_adapter.build_default_args_once()
    locust_adapter.build_default_args_once()                              # idempotent: wrapped once
    first = argument_parser.default_args_dict()
    assert first == original() and "num_users" in first and "host" in first
    first["num_users"] = "changed by a caller"
    assert [argument_parser.default_args_dict() for _ in range(50)] == [original()] * 50
    assert builds == [1]


def test_locust_web_ui_template_args() -> None:
    from locust.argument_parser import UIExtraArgOptions
    from locust.web import WebUI

    assert "template_args" in inspect.get_annotations(WebUI), moved("locust", "WebUI.template_args")
    source = inspect.getsource(WebUI.update_template_args)
    assert "self.template_args = " in source and '"extra_options"' in source, \
        moved("locust", "WebUI.update_template_args")
    assert {"default_value", "is_secret"} <= set(UIExtraArgOptions._fields), moved("locust", "extra_options")
    assets = Path(inspect.getfile(WebUI)).parent / "webui" / "dist" / "assets"
    bundle = " ".join(path.read_text(encoding="utf-8", errors="replace") for path in assets.glob("*.js"))
    for key in ("extendedTabs", "extendedTables", "extendedCsvFiles"):    # the page reads them camel-cased
        assert key in bundle, moved("locust", f"template_args' {key}")


class _FakeWebUI:
    def __init__(self) -> None:
        self.template_args: dict[str, object] = {}
        self.secret = "sk-abc"

    def update_template_args(self) -> None:       # as Locust's: a new dict each time
        self.template_args = {**self.template_args, "extra_options": {
            "api_key": {"is_secret": True, "default_value": self.secret},
            "model": {"is_secret": False, "default_value": "m"}}}


def test_locust_secret_defaults_are_blanked_now_and_after_each_update() -> None:
    args = {"extra_options": {"api_key": {"is_secret": True, "default_value": "sk-abc"},
                              "model": {"is_secret": False, "default_value": "m"}}}
    locust_adapter.hide_secret_defaults(args)
    assert args["extra_options"]["api_key"]["default_value"] == ""
    assert args["extra_options"]["model"]["default_value"] == "m"
    locust_adapter.hide_secret_defaults({})
    web_ui = _FakeWebUI()
    web_ui.update_template_args()
    locust_adapter.hide_secret_defaults_in_start_form(web_ui)
    options = web_ui.template_args["extra_options"]
    assert options["api_key"]["default_value"] == ""                                    # type: ignore[index]
    web_ui.secret = "sk-def"
    web_ui.update_template_args()
    options = web_ui.template_args["extra_options"]
    assert options["api_key"]["default_value"] == ""                                    # type: ignore[index]
    assert options["model"]["default_value"] == "m"                                     # type: ignore[index]
    locust_adapter.add_web_ui_tabs(web_ui, [{"title": "T", "key": "t"}], [{"key": "t", "structure": []}], [])
    assert web_ui.template_args["extended_tabs"] == [{"title": "T", "key": "t"}]


def test_locust_show_in_web_ui() -> None:
    parser = LocustArgumentParser()
    parser.add_argument("--hidden-one", include_in_web_ui=False)
    parser.add_argument("--hidden-two", include_in_web_ui=False)
    assert "hidden_one" not in parser.args_included_in_web_ui
    locust_adapter.show_in_web_ui(parser, {"hidden_one"})
    assert "hidden_one" in parser.args_included_in_web_ui, moved("locust", "Action.include_in_web_ui")
    assert "hidden_two" not in parser.args_included_in_web_ui


# -- Flask / Werkzeug, argparse --

def test_flask_drop_form_fields_before_the_view_reads_the_form() -> None:
    app = flask.Flask("probe")

    @app.before_request
    def drop() -> None:
        flask_adapter.drop_form_fields({"api_key"})

    @app.post("/swarm")
    def swarm() -> dict[str, list[str]]:
        return {key: flask.request.form.getlist(key) for key in flask.request.form}

    answer = app.test_client().post("/swarm", data={"api_key": "", "host": "http://h", "tag": ["a", "b"]})
    assert answer.json == {"host": ["http://h"], "tag": ["a", "b"]}, \
        f"{moved('flask', 'request.form (assignable)')} (Werkzeug {version('werkzeug')})"


def test_argparse_actions_in_order() -> None:
    parser = argparse.ArgumentParser()
    added = parser.add_argument("--x")
    found = argparse_adapter.actions(parser)
    assert isinstance(found, list) and found[-1] is added, moved("argparse", "ArgumentParser._actions")


# -- the door: nothing outside the adapters, every function says what it relies on --

# attributes named so by another library; fourfold's own attributes of these names are reached as self.x
PRIVATE_ATTRIBUTES = {
    "_transport": "httpx", "_mounts": "httpx", "_merge_url": "httpx", "_stream": "httpx",
    "_response": "httpx", "_pool": "httpx", "_sock": "gevent", "_state": "locust", "_greenlet": "locust",
    "_send_stats": "locust", "_actions": "argparse",
}
# names of another library's insides, wherever code (not a docstring) uses them
INSIDE_NAMES = {
    "LOCUST_STATE_RUNNING": "locust", "LOCUST_STATE_STOPPING": "locust", "LOCUST_STATE_WAITING": "locust",
    "update_template_args": "locust", "template_args": "locust", "default_args_dict": "locust",
}
INSIDE_STRINGS = {"extended_tabs": "locust", "extended_tables": "locust", "extended_csv_files": "locust",
                  "extra_options": "locust"}
ATTRIBUTE_ONLY = {"include_in_web_ui": "locust"}     # an attribute; the add_argument keyword is Locust's API
ASSIGNED_ATTRIBUTES = {"form": "flask"}              # request.form = ...


def _docstrings(walked: tuple[ast.AST, ...]) -> set[int]:
    found = set()
    for node in walked:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def inside_uses(source: str | Path) -> list[tuple[int, str, str]]:
    """(line, name, library) of every use of another library's insides in ``source`` (a module's
    text, or a module of fourfold's, read through tests/unit/syntax.py)."""
    walked = nodes(source) if isinstance(source, Path) else tuple(ast.walk(ast.parse(source)))
    docstrings = _docstrings(walked)
    found = []
    for node in walked:
        if isinstance(node, ast.Attribute):
            owner = node.value.id if isinstance(node.value, ast.Name) else ""
            if node.attr in PRIVATE_ATTRIBUTES and owner not in ("self", "cls"):
                found.append((node.lineno, node.attr, PRIVATE_ATTRIBUTES[node.attr]))
            library = INSIDE_NAMES.get(node.attr) or ATTRIBUTE_ONLY.get(node.attr)
            if library:
                found.append((node.lineno, node.attr, library))
        elif isinstance(node, ast.Name) and node.id in INSIDE_NAMES:
            found.append((node.lineno, node.id, INSIDE_NAMES[node.id]))
        elif isinstance(node, ast.alias) and node.name in INSIDE_NAMES:
            found.append((node.lineno, node.name, INSIDE_NAMES[node.name]))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2 \
                and node.func.id in ("getattr", "hasattr", "setattr", "delattr"):
            name = node.args[1]
            if isinstance(name, ast.Constant) and name.value in PRIVATE_ATTRIBUTES:
                found.append((node.lineno, name.value, PRIVATE_ATTRIBUTES[name.value]))
        elif isinstance(node, ast.Constant) and node.value in INSIDE_STRINGS and id(node) not in docstrings:
            found.append((node.lineno, node.value, INSIDE_STRINGS[node.value]))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr in ASSIGNED_ATTRIBUTES:
                    found.append((node.lineno, f"{target.attr} =", ASSIGNED_ATTRIBUTES[target.attr]))
    return sorted(found)


def test_no_module_outside_the_adapters_uses_another_librarys_insides() -> None:
    # a use spells its name in the module's text: the modules that spell none are not parsed
    names = {*PRIVATE_ATTRIBUTES, *INSIDE_NAMES, *INSIDE_STRINGS, *ATTRIBUTE_ONLY, *ASSIGNED_ATTRIBUTES}
    spelled = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\b")
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if ADAPTERS_DIR in path.parents or not spelled.search(path.read_text(encoding="utf-8")):
            continue
        for line, name, library in inside_uses(path):
            found.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{line}: {name} ({library}): "
                         f"use fourfold/adapters/{library}.py")
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(("source", "expected"), [
    ("client._transport\n", 1),
    ("self._transport\n", 0),
    ('getattr(client, "_mounts", True)\n', 1),
    ('hasattr(sock, "_sock")\n', 1),
    ("runner._send_stats()\n", 1),
    ("from locust.user.task import LOCUST_STATE_RUNNING\n", 1),
    ("web_ui.update_template_args = f\n", 1),
    ('web_ui.template_args["extended_tabs"] = []\n', 2),
    ('parser.add_argument("--x", include_in_web_ui=False)\n', 0),
    ("action.include_in_web_ui = True\n", 1),
    ("request.form = form\n", 1),
    ("form = request.form\n", 0),
    ('"""The docstring names _transport, template_args and "extended_tabs"."""\n', 0),
])
def test_the_checker_finds_insides(source: str, expected: int) -> None:
    assert len(inside_uses(source)) == expected, inside_uses(source)


# adapter -> the libraries (as its docstrings name them, distribution) whose versions it was checked against
CHECKED = {
    "argparse": [("Python", None)],
    "flask": [("Flask", "flask"), ("Werkzeug", "werkzeug")],
    "gevent": [("gevent", "gevent")],
    "httpx": [("httpx", "httpx")],
    "locust": [("locust", "locust")],
}


@pytest.mark.parametrize("module", ADAPTER_MODULES, ids=lambda m: m.__name__.rpartition(".")[2])
def test_every_adapter_function_names_the_version_installed(module: ModuleType) -> None:
    """Each function says which version it was checked against: the installed one (major.minor)."""
    adapter = module.__name__.rpartition(".")[2]
    names: list[str] = module.__all__
    functions: list[Callable[..., object]] = [getattr(module, name) for name in names]
    assert functions, f"{adapter}: no __all__"
    for function in functions:
        doc = " ".join((inspect.getdoc(function) or "").split())
        assert "checked against" in doc.lower(), f"{adapter}.{function.__name__}: name the version checked"
        for label, dist in CHECKED[adapter]:
            installed = platform.python_version() if dist is None else version(dist)
            minor = ".".join(installed.split(".")[:2])
            assert re.search(rf"{label} {re.escape(minor)}(\.|\b)", doc), \
                f"{adapter}.{function.__name__}: checked against another {label} than {installed}, installed"


# libraries whose insides fourfold uses -> their adapter; each bounded above, the installed version inside
BOUNDED = {"locust": "locust", "httpx": "httpx", "gevent": "gevent", "flask": "flask", "werkzeug": "flask"}


@pytest.mark.parametrize("library", sorted(BOUNDED))
def test_pyproject_bounds_each_library_and_the_installed_version_is_inside(library: str) -> None:
    dependencies = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    requirement = next((Requirement(d) for d in dependencies if Requirement(d).name.lower() == library), None)
    adapter = f"fourfold/adapters/{BOUNDED[library]}.py"
    assert requirement is not None, f"pyproject.toml: no dependency on {library} ({adapter})"
    assert any(spec.operator == "<" for spec in requirement.specifier), \
        f"pyproject.toml: {requirement}: no upper bound"
    assert requirement.specifier.contains(version(library)), \
        f"{installed(library)} is outside pyproject.toml's {requirement}: check {adapter} against it"


def test_the_adapters_import_no_library_with_side_effects() -> None:
    """Importing an adapter must not import Locust (which patches the standard library)."""
    for module in ADAPTER_MODULES:
        tree = ast.parse(inspect.getsource(module))
        top = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        names = {alias.name for node in top if isinstance(node, ast.Import) for alias in node.names}
        names |= {node.module or "" for node in top if isinstance(node, ast.ImportFrom)}
        assert not {n for n in names if n.split(".")[0] in ("locust", "flask", "werkzeug")}, module.__name__
    importlib.import_module("fourfold.adapters")
