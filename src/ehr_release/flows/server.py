"""One local Prefect server that every ehr-release process of a home shares.

Pausing a flow in one process and resuming it from another needs an API both can reach.
Two ephemeral servers on one SQLite file lock each other out, so the CLI starts a single
``prefect server start`` on loopback the first time it is needed and reuses it afterwards
(its address and process id are kept in ``<home>/prefect-server.json``; ``server stop``
stops exactly that process). An explicit ``PREFECT_API_URL`` (a real server, or the test
harness) always wins.

The server is started with its real address in its settings: Prefect's UI learns where its
API is from ``PREFECT_UI_API_URL`` (else ``PREFECT_SERVER_API_HOST``/``PORT``, default
port 4200), not from the ``--port`` option, so without them the UI calls a port nobody
listens on.

Everything Prefect keeps lies in the ehr home (``PREFECT_HOME`` = ``<home>/prefect`` unless
set) and is private like the rest of it: the server runs with the home's umask
(:data:`~ehr_release.storage.home.PRIVATE_UMASK`), its log and state file are 0600, and
what Prefect writes from a deciding process is tightened afterwards
(:func:`tighten_home`).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path

from ehr_release.flows.prefect_database import SEEDED_SERVER_SETTINGS, seed_from_template
from ehr_release.storage.home import PRIVATE_UMASK, home, make_private

STARTUP_TIMEOUT_S = 90
STOP_TIMEOUT_S = 10
HOST = "127.0.0.1"
#: How often a starting server is asked whether it answers: a refused connection costs
#: about a millisecond, and a cold run waits for the first answer.
HEALTH_POLL_S = 0.1


def configure_prefect_home() -> None:
    """Point Prefect at this home and send the flows' INFO logs to its API.

    Must run before :mod:`prefect` is imported, which is why the CLI imports flows lazily.
    Flow and task logs go to the Prefect API (the UI shows them) from INFO up; the
    terminal (or a background flow's ``flow.log``) only gets warnings, so progress output
    stays readable.
    """
    os.environ.setdefault("PREFECT_HOME", str(home() / "prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    prefect_home = _prefect_home_in_home()
    if prefect_home is not None:
        prefect_home.mkdir(parents=True, exist_ok=True, mode=0o700)
        make_private(prefect_home)


def _prefect_home_in_home() -> Path | None:
    """``PREFECT_HOME`` if it lies in the ehr home (its default), else None: a Prefect home
    the operator put elsewhere is theirs to keep."""
    raw = os.environ.get("PREFECT_HOME")
    if not raw:
        return None
    path = Path(raw).expanduser().resolve()
    return path if path.is_relative_to(home()) else None


def tighten_home() -> None:
    """Take group/other permissions off what this process wrote into the home with the
    user's umask: Prefect's results and files of the publishing flow, which runs in the
    deciding process (so does a published release under the default releases root,
    ``<home>/releases``: the home is 0700, so nobody else could read it anyway)."""
    make_private(home())


def _state_file() -> Path:
    return home() / "prefect-server.json"


def _healthy(url: str) -> bool:
    """Whether the server at ``url`` answers its health check.

    A plain-HTTP address (the local server's, on loopback) is asked without a certificate
    store: httpx loads its CA bundle for every call that may verify TLS, 33 ms of CPU a
    call here against 0.5 ms without, and a starting server is asked every
    :data:`HEALTH_POLL_S` — on the CPU the starting server needs. An HTTPS address is
    verified as always."""
    import httpx  # here, not at the top: every CLI command imports this module

    try:
        return httpx.get(f"{url}/health", timeout=2,
                         verify=not url.startswith("http://")).status_code == 200
    except httpx.HTTPError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


#: The loop services a home's server does not start, unless the environment asks for one:
#: exactly those Prefect itself leaves out of its ephemeral single-user server
#: (``prefect.server.services``: no ``RunInEphemeralServers``, no ``run_in_ephemeral``).
#: They act on what a home never holds — deployment schedules and late scheduled runs,
#: workers and work pools, paused runs, concurrency leases, workers' cleanup messages,
#: cancelled runs' children (a CLI run has none) — and polled SQLite every 5–20 s, which
#: an idle home server paid for as long as it ran (1.56 against 1.13 CPU s a minute,
#: ``bench/idle_server.py``). What the home does use stays: the task-run recorder, the event
#: persister and triggers, the log and event streams, the UI. A site that schedules runs
#: or runs workers does so against a server of its own (README, "Running against a
#: Prefect server"), which runs Prefect's defaults.
UNUSED_SERVICES = {f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in (
    "SCHEDULER", "LATE_RUNS", "FOREMAN", "PAUSE_EXPIRATIONS", "REPOSSESSOR",
    "CLEANUP_RECONCILER", "CANCELLATION_CLEANUP")}


def server_env(port: int) -> dict[str, str]:
    """The environment of a local server on ``port``: its UI is told that very address,
    and it runs only the services a home uses (:data:`UNUSED_SERVICES`)."""
    url = f"http://{HOST}:{port}/api"
    env = {**UNUSED_SERVICES, **os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_API_HOST": HOST, "PREFECT_SERVER_API_PORT": str(port),
           "PREFECT_UI_API_URL": url, "PREFECT_UI_URL": f"http://{HOST}:{port}"}
    env.pop("PREFECT_API_URL", None)
    return env


def running_server() -> str | None:
    """The API URL of this home's local server if it answers, else None."""
    state = _state_file()
    if not state.exists():
        return None
    url = str(json.loads(state.read_text())["url"])
    return url if _healthy(url) else None


UI_ENV = "PREFECT_UI_URL"


def ui_url() -> str | None:
    """The Prefect UI's address: ``PREFECT_UI_URL`` if set, else this home's running local
    server's (its API address without ``/api``), else None.

    One answer for ``ehr-release home`` and the dashboard: the dashboard once said "Prefect
    UI not configured" while ``home`` printed the address, because only the server's own
    process has ``PREFECT_UI_URL`` set (:func:`server_env`).
    """
    explicit = os.environ.get(UI_ENV, "").strip().rstrip("/")
    if explicit:
        return explicit
    api = running_server()
    return api.removesuffix("/api") if api else None


def ensure_api(start_if: Callable[[], bool] | None = None) -> str:
    """The Prefect API URL to use, starting the shared local server if none is running.

    The check and the start happen under an exclusive lock on ``<home>/prefect-server.lock``:
    two runs started together in a fresh home once started two servers, which migrated
    Prefect's database at the same time and left two of three runs stalled (issue 33). The
    second process waits for the first's server and uses it. ``start_if``: see
    :func:`local_api`.
    """
    return configured_api() or local_api(start_if)


def configured_api() -> str | None:
    """The API URL Prefect's settings name (environment, profile, ``.env``, ``prefect.toml``),
    if any."""
    from prefect.settings import PREFECT_API_URL

    configured = PREFECT_API_URL.value()
    return str(configured) if configured else None


def local_api(start_if: Callable[[], bool] | None = None) -> str:
    """This home's local server's API URL, the server started if none is running (see
    :func:`ensure_api`) and ``start_if()``, when given, says yes; RuntimeError if not."""
    url = running_server()
    if url is not None:
        return url
    if start_if is not None and not start_if():
        raise RuntimeError("no local Prefect server is running, and this process has "
                           "nothing to run on one")
    with _start_lock():
        url = running_server() or _starting_server()
        return url if url is not None else _start_server()


def ensure_api_soon(start_if: Callable[[], bool] | None = None) -> Future[str]:
    """Find the API in a thread of its own, so that a cold home's server imports (seconds, on
    the other core) while the flow process imports Prefect and the flow's modules.

    ``start_if`` is asked (in that thread) before a server is started: the flow process
    starts on a request that may still be refused, and a refused request must not leave a
    server behind (:func:`local_api`).

    Where nothing Prefect reads could name another API (:func:`only_the_local_api`), the
    thread asks for the local server at once, before Prefect is imported; otherwise it
    waits for Prefect's settings (:func:`ensure_api`). Either way the caller takes
    :func:`configured_api` first once Prefect is loaded: a setting this check missed still
    wins. The thread only checks, spawns and polls; the modules that takes are imported here
    first, so no module is imported by two threads at once.

    In a process that has loaded Prefect already (the dashboard, a test under Prefect's
    harness) the API its current settings name is taken at once, with no thread: a temporary
    settings context is no file or variable :func:`only_the_local_api` can see, nor does a
    new thread see it (a context variable). Both once started a server beside it.
    """
    named = _loaded_settings_api()
    if named is not None:
        found: Future[str] = Future()
        found.set_result(named)
        return found
    if only_the_local_api():
        # What the thread's check and start import, imported here: the main thread imports
        # Prefect meanwhile, which imports some of them too.
        import getpass  # noqa: F401 - the home's owner
        import importlib.metadata  # noqa: F401 - the Prefect template's version

        import httpx  # noqa: F401 - the health checks' client
        import platformdirs  # noqa: F401 - the home and the template's folder
        find = partial(local_api, start_if)
    else:
        import prefect.settings  # noqa: F401
        find = partial(ensure_api, start_if)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefect-api")
    found = pool.submit(find)
    pool.shutdown(wait=False)  # the thread ends with its search
    return found


def _loaded_settings_api() -> str | None:
    """The API this process's current Prefect settings name, if Prefect is loaded already
    (never loaded here for the question: that import is what the search runs beside)."""
    return configured_api() if "prefect.settings" in sys.modules else None


#: The variables by which Prefect's settings can name an API or choose a profile that does.
API_NAMING_VARIABLES = ("PREFECT_API_", "PREFECT_PROFILE")


def only_the_local_api() -> bool:
    """Whether none of the places Prefect's settings come from could name an API: no
    :data:`API_NAMING_VARIABLES` in the environment or in the working folder's ``.env``
    (Prefect reads it as more environment), no ``prefect.toml`` there, no ``[tool.prefect]``
    in its ``pyproject.toml`` and no ``PREFECT_API_URL`` in ``PREFECT_HOME``'s profiles.
    Kept conservative: a file that cannot be read counts as naming one."""
    if any(name.startswith(API_NAMING_VARIABLES) for name in os.environ):
        return False
    prefect_home = Path(os.environ.get("PREFECT_HOME", "~/.prefect")).expanduser()
    naming = {Path("prefect.toml"): ("",), Path(".env"): API_NAMING_VARIABLES,
              Path("pyproject.toml"): ("tool.prefect",),
              prefect_home / "profiles.toml": ("PREFECT_API_URL",)}
    for place, mentions in naming.items():
        try:
            text = place.read_text(errors="replace")
        except FileNotFoundError:
            continue
        except OSError:
            return False
        if any(mention in text for mention in mentions):
            return False
    return True


@contextmanager
def _start_lock() -> Iterator[None]:
    """Hold the home's server-start lock (the kernel frees it if this process dies)."""
    home().mkdir(parents=True, exist_ok=True)
    fd = os.open(home() / "prefect-server.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def server_command(port: int) -> list[str]:
    """The command that starts a home's server: ``prefect server start`` with Python's
    collector off its event loop (:mod:`ehr_release.flows.prefect_server`: a 60 s stall of
    concurrent runs). The template's test and ``bench/cold_server.py`` start theirs with it
    too, so they start the server the product starts."""
    return [sys.executable, "-m", "ehr_release.flows.prefect_server", "prefect", "server",
            "start", "--host", HOST, "--port", str(port)]


def _start_server() -> str:
    """Start the server; its address is recorded at once, so a process killed while it
    waits for the server (a refused request's flow process) leaves it to the next one."""
    port = _free_port()
    url = f"http://{HOST}:{port}/api"
    log_path = home() / "prefect-server.log"
    os.close(os.open(log_path, os.O_CREAT | os.O_WRONLY, 0o600))
    make_private(log_path)  # one written by an older version
    env = server_env(port)
    seeded = False
    with suppress(OSError):  # without the copy the server migrates, as it always did
        seeded = seed_from_template(env)
    if seeded:  # a fresh copy is migrated and registered: the server skips both
        env |= SEEDED_SERVER_SETTINGS
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            server_command(port),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True, umask=PRIVATE_UMASK)
    _write_state(url, proc.pid)
    if _wait_healthy(url, proc.pid, proc):
        return url
    if proc.poll() is not None:
        raise RuntimeError(f"the local Prefect server exited; see {home()}/prefect-server.log")
    proc.terminate()
    raise RuntimeError(f"the local Prefect server did not start within {STARTUP_TIMEOUT_S} s")


def _write_state(url: str, pid: int) -> None:
    """Record the server atomically: processes outside the lock read the file meanwhile."""
    tmp = _state_file().with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # private, like the home
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps({"url": url, "pid": pid}))
    os.replace(tmp, _state_file())


def _starting_server() -> str | None:
    """The URL of a recorded server that is still starting (its starter died), once it
    answers; None if there is none or it never does."""
    state = _state_file()
    if not state.exists():
        return None
    recorded = json.loads(state.read_text())
    if not _is_our_server(int(recorded["pid"])):
        return None
    return str(recorded["url"]) if _wait_healthy(str(recorded["url"]), recorded["pid"]) \
        else None


def _wait_healthy(url: str, pid: int, child: subprocess.Popen | None = None) -> bool:
    """Wait until ``url`` answers (True) or its process ``pid`` is gone or time is up.

    ``child``: the process as this one started it, whose own exit status tells whether it
    is gone. Its command line is no witness: right after ``Popen`` returns it may not read
    as a server's yet (6 of 200 starts here), and a health check refused in half a
    millisecond asked before it did, so a start was taken for a death. A server another
    process recorded is long past its start: :func:`_is_our_server` tells (a zombie's
    command line reads empty)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if _healthy(url):
            return True
        alive = child.poll() is None if child is not None else _is_our_server(int(pid))
        if not alive:
            return False
        time.sleep(HEALTH_POLL_S)
    return False


def _is_our_server(pid: int) -> bool:
    """Whether ``pid`` still is a ``prefect server start`` (not a reused process id).

    Where ``/proc`` is missing the recorded id is trusted.
    """
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not Path("/proc").is_dir():
        return True
    try:
        args = cmdline.read_bytes().split(b"\0")
    except OSError:
        return False
    return b"prefect" in args and b"server" in args and b"start" in args


def stop_local_server() -> bool:
    """Stop the server this home started, and wait until it is gone; True if one was stopped.

    Only the recorded process group is signalled, after checking that it still is a Prefect
    server, so a stale state file never stops an unrelated process.
    """
    state = _state_file()
    if not state.exists():
        return False
    pid = int(json.loads(state.read_text())["pid"])
    state.unlink()
    if not _is_our_server(pid):
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and _is_our_server(pid):
        time.sleep(0.2)
    if _is_our_server(pid):
        with suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    return True
