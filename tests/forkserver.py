"""Real ``locust`` and ``fourfold`` processes without paying for Python's start-up each time: fork servers.

Starting ``python -m locust`` costs ~1.4 s of CPU before the run's first line (the interpreter,
Locust, gevent, Flask, numpy, fourfold's levels), ``python -m fourfold history ...`` ~1.5 s (pandas,
scipy, the report's modules): most of what a test's short run or command costs, and the suite starts
a few hundred of them on CI's two cores. A fork server is one process per test worker and module that
imported all of that once (``python -u -m tests.forkserver locust|fourfold``, started on first use);
each process is a child forked from it that changes to its directory and environment, points its
standard streams at files and calls the module's own ``main()`` with its arguments: Locust's
start-up, the locustfile's import, the run, the exit code and the ``atexit`` handlers (the embedded
target's stop) are the process's own, as with ``python -m locust``. The ``fourfold`` server imports
no gevent (the command line runs unpatched, as it does for a user).

:func:`run` is ``subprocess.run([python, "-m", module, *args], capture_output=True, text=True)``;
:func:`popen` a :class:`subprocess.Popen` look-alike (pid, poll, wait, communicate, send_signal,
terminate, kill, returncode). What a forked child cannot get from its parent falls back to a real
process: a ``preexec_fn``, or an environment that differs from the server's in what the interpreter
reads only when it starts (``PYTHONPATH``, ``PYTHONHASHSEED``...). ``FOURFOLD_TEST_NO_FORKSERVER=1``
turns it off (every process a real one); ``FOURFOLD_FORKSERVER_CPU_LOG=FILE`` appends each child's
CPU seconds to FILE with the test that started it.

The protocol, one JSON object a line: the test process writes ``{"id", "argv", "cwd", "env",
"stdout", "stderr", "session"}``; the server answers ``{"id", "pid"}`` once it forked and
``{"pid", "rc", "cpu_s"}`` when that child ended (``rc`` as subprocess gives it: negative for a
signal). The server's loop uses the original (not gevent's) ``select``, ``fork`` and ``wait4``: no
hub runs in it, so a child starts with no greenlet of its parent's.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# a file to which each child's CPU seconds are appended, with the test that started it (profiling the suite)
CPU_LOG = os.environ.get("FOURFOLD_FORKSERVER_CPU_LOG", "")
# what the interpreter reads only at start-up: a child that needs other values is a real process
STARTUP_ENV = ("PYTHONPATH", "PYTHONHASHSEED", "PYTHONOPTIMIZE", "PYTHONWARNINGS", "PYTHONSAFEPATH",
               "PYTHONNOUSERSITE", "PYTHONUTF8", "PYTHONIOENCODING", "PYTHONHOME", "PYTHONDEVMODE",
               "PYTHONMALLOC", "PYTHONTRACEMALLOC", "PYTHONFAULTHANDLER", "PYTHONPLATLIBDIR",
               "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
               "LOCUST_SKIP_MONKEY_PATCH", "LOCUST_PLAYWRIGHT")


# ---------------------------------------------------------------- the server (its own process)

def _preload(module: str) -> None:
    """What a child of this server would import first, imported once here."""
    if module == "locust":
        import locust.main  # noqa: F401   (patches the standard library with gevent, as `python -m locust` does)

        import fourfold.levels  # noqa: F401
        import fourfold.locustfiles  # noqa: F401
    else:                                         # `python -m fourfold`: the report and history commands
        import fourfold.cli
        import fourfold.cli.compare  # noqa: F401
        import fourfold.cli.history  # noqa: F401
        import fourfold.cli.repeat  # noqa: F401
        import fourfold.reports.html  # noqa: F401

        assert "gevent.monkey" not in sys.modules or not _patched(), "the fourfold server must not be patched"


def _patched() -> bool:
    from gevent import monkey

    return monkey.is_module_patched("socket")


def _serve(module: str) -> None:
    _preload(module)
    if "gevent.monkey" in sys.modules and _patched():
        from gevent import monkey

        select = monkey.get_original("select", "select")
        fork = monkey.get_original("os", "fork")
        read = monkey.get_original("os", "read")
        write = monkey.get_original("os", "write")
    else:
        import select as select_module

        select, fork, read, write = select_module.select, os.fork, os.read, os.write
    pending = b""

    def say(message: dict[str, Any]) -> None:
        write(1, (json.dumps(message) + "\n").encode())

    while True:
        ready, _, _ = select([0], [], [], 0.02)
        if ready:
            data = read(0, 65536)
            if not data:
                return                                    # the test worker closed the pipe: done
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = fork()
                if pid == 0:
                    _child(module, request)               # never returns
                say({"id": request["id"], "pid": pid})
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            say({"pid": pid, "rc": rc, "cpu_s": round(usage.ru_utime + usage.ru_stime, 3)})


def _child(module: str, request: dict[str, Any]) -> None:
    """In the forked child: the run's directory, environment and streams, then the module's main()
    (Locust's, or fourfold's command line)."""
    import traceback

    code: int = 1
    try:
        if request.get("session"):
            os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            if path is None:                              # stderr into stdout (subprocess.STDOUT)
                os.dup2(1, fd)
                continue
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        sys.argv = [module, *request["argv"]]
        sys.path[0] = os.getcwd()                        # as `python -m MODULE` run in that directory
        if module == "locust":
            import gevent

            gevent.reinit()
            from locust.main import main
        else:
            from fourfold.cli import main
        try:
            code = (main() or 0) & 0xFF
        except SystemExit as stop:
            if stop.code is None:
                code = 0
            elif isinstance(stop.code, int):
                code = stop.code & 0xFF
            else:
                print(stop.code, file=sys.stderr)
                code = 1
        except BaseException:                             # noqa: BLE001 (as the interpreter: print, exit 1)
            traceback.print_exc()
            code = 1
        try:
            atexit._run_exitfuncs()
        except BaseException:                             # noqa: BLE001
            traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:                             # noqa: BLE001
                pass
        os._exit(code)


# ---------------------------------------------------------------- the test process's side

class _Server:
    """One fork server for this test process, started on first use; a reader thread collects its
    answers (a gevent-patched thread: a greenlet of this process's hub)."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.env = _base_env()
        self.tmp = tempfile.mkdtemp(prefix="fourfold-forkserver-")    # the children's captured streams
        atexit.register(shutil.rmtree, self.tmp, ignore_errors=True)
        self.proc = subprocess.Popen([sys.executable, "-u", "-m", "tests.forkserver", module], cwd=REPO,
                                     env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.lock = threading.Lock()
        self.next_id = 0
        self.pids: dict[int, _Waiter] = {}
        self.exits: dict[int, _Waiter] = {}
        self.tests: dict[int, str] = {}
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            if "id" in message:
                self.pids.pop(message["id"]).set(message["pid"])
            else:
                self.exits.setdefault(message["pid"], _Waiter()).set(message["rc"])
                if CPU_LOG:                             # which test's child used how much CPU
                    test = self.tests.pop(message["pid"], "?")
                    with open(CPU_LOG, "a", encoding="utf-8") as log:
                        log.write(f"{test}\t{self.module}\t{message['cpu_s']}\n")

    def spawn(self, argv: list[str], cwd: Path, env: dict[str, str], stdout: str, stderr: str | None,
              session: bool) -> int:
        with self.lock:
            self.next_id += 1
            waiter = self.pids[self.next_id] = _Waiter()
            line = json.dumps({"id": self.next_id, "argv": argv, "cwd": str(cwd), "env": env,
                               "stdout": stdout, "stderr": stderr, "session": session}) + "\n"
            assert self.proc.stdin is not None
            self.proc.stdin.write(line.encode())
        pid = waiter.get(60)
        assert pid is not None, "the fork server did not answer"
        if CPU_LOG:
            self.tests[pid] = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
        return pid

    def exit_of(self, pid: int) -> _Waiter:
        return self.exits.setdefault(pid, _Waiter())

    def accepts(self, env: dict[str, str]) -> bool:
        return all(env.get(name) == self.env.get(name) for name in STARTUP_ENV)


class _Waiter:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.value: int | None = None

    def set(self, value: int) -> None:
        self.value = value
        self.event.set()

    def get(self, timeout: float | None) -> int | None:
        self.event.wait(timeout)
        return self.value


def _base_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LOCUST_HOST", None)
    return env


_servers: dict[str, _Server] = {}
_server_lock = threading.Lock()


def _get_server(module: str) -> _Server | None:
    if os.environ.get("FOURFOLD_TEST_NO_FORKSERVER") == "1":
        return None
    with _server_lock:
        server = _servers.get(module)
        if server is None or server.proc.poll() is not None:
            server = _servers[module] = _Server(module)
        return server


class Forked:
    """A :class:`subprocess.Popen` look-alike for a child of the fork server (text streams)."""

    def __init__(self, server: _Server, args: list[str], cwd: Path, env: dict[str, str],
                 session: bool, merge: bool) -> None:
        self.args = [sys.executable, "-m", server.module, *args]
        self._dir = tempfile.mkdtemp(prefix="run-", dir=server.tmp)
        self._out, self._err = os.path.join(self._dir, "stdout"), os.path.join(self._dir, "stderr")
        self._merged = merge
        self.pid = server.spawn(list(args), cwd, env, self._out, None if merge else self._err, session)
        self._exit = server.exit_of(self.pid)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self._exit.event.is_set():
            self.returncode = self._exit.value
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exit.event.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.returncode = self._exit.value
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str | None]:
        """(stdout, stderr) once the child ended (stderr None when it went into stdout); the files
        are removed, so a second call gets "" (subprocess's gets nothing more either)."""
        self.wait(timeout)

        def text(path: str) -> str:
            return Path(path).read_text(encoding="utf-8", errors="replace") if os.path.exists(path) else ""

        out, err = text(self._out), None if self._merged else text(self._err)
        shutil.rmtree(self._dir, ignore_errors=True)
        return out, err

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def popen(args: list[str], cwd: Path, env: dict[str, str], *, session: bool = False, merge: bool = False,
          preexec_fn: Any = None, module: str = "locust") -> Any:
    """``[python, -m, module, *args]`` (``locust`` or ``fourfold``) started in ``cwd`` with ``env``,
    stdout and stderr captured (text; ``merge``: stderr into stdout; ``session``: in a session of
    its own): a :class:`Forked` child of the module's fork server, or a real
    :class:`subprocess.Popen` where a fork cannot give the child what it asks for."""
    server = _get_server(module) if preexec_fn is None else None
    if server is not None and server.accepts(env):
        return Forked(server, args, cwd, env, session, merge)
    return subprocess.Popen([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge else subprocess.PIPE,
                            text=True, preexec_fn=preexec_fn, start_new_session=session)


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float,
        module: str = "locust") -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, -m, module, *args], capture_output=True, text=True, timeout=timeout)``."""
    proc = popen(args, cwd, env, module=module)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode is not None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


if __name__ == "__main__":
    _serve(sys.argv[1])
