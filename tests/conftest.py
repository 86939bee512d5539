"""Shared fixtures: an isolated working folder and database per test, PostgreSQL on demand."""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ["EHR_RELEASE_TEST_MODE"] = "1"
# Keep Prefect's local result storage out of the user's ~/.prefect during tests; each
# pytest-xdist worker (``make test`` runs several) gets its own, whatever the caller set.
if os.environ.get("PYTEST_XDIST_WORKER") or "PREFECT_HOME" not in os.environ:
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="ehr-prefect-home-")
# A test that forgets the ehr_home fixture must not write audit events into the checkout's
# .ehr_release/ (found: the retry-policy test did) or into a database named by the
# developer's environment.
DEFAULT_HOME = Path(tempfile.mkdtemp(prefix="ehr-home-"))
os.environ["EHR_RELEASE_HOME"] = str(DEFAULT_HOME)
os.environ.pop("EHR_RELEASE_DATABASE_URL", None)
# Tests publish under their tmp_path folders: the releases root is the temp folder.
os.environ["EHR_RELEASE_RELEASES_ROOT"] = tempfile.gettempdir()



def _shared_data() -> Path:
    """The workplace's shared data: ``$EHR_RELEASE_SHARED_DATA``, else ``../shared/data``
    beside the checkout, else the workplace's own copy (a clone in a temp dir has no
    neighbour)."""
    if os.environ.get("EHR_RELEASE_SHARED_DATA"):
        return Path(os.environ["EHR_RELEASE_SHARED_DATA"])
    candidates = [Path(__file__).resolve().parents[1].parent / "shared" / "data",
                  Path("/work/shared/data")]
    return next((c for c in candidates if c.exists()), candidates[0])


SHARED_DATA = _shared_data()


PG_ADMIN_URL = os.environ.get("EHR_RELEASE_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@pytest.fixture
def ehr_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh ``.ehr_release`` folder with its own SQLite database."""
    from ehr_release.storage.engine import reset_engines

    home = tmp_path / "ehr_home"
    monkeypatch.setenv("EHR_RELEASE_HOME", str(home))
    monkeypatch.setenv("EHR_RELEASE_DATABASE_URL", f"sqlite:///{home / 'db.sqlite'}")
    reset_engines()
    yield home
    reset_engines()


@pytest.fixture
def test_site(ehr_home: Path) -> Path:
    """``ehr_home`` made a test site: a seed is accepted only there (the audit chain's first
    event says so, :mod:`ehr_release.storage.site`); documents say TEST SITE on page 1."""
    from ehr_release.storage.site import create_site

    create_site(test=True)
    return ehr_home


def _postgres_reachable() -> str | None:
    try:
        import sqlalchemy as sa

        engine = sa.create_engine(PG_ADMIN_URL, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as exc:  # any driver or network error means "not reachable"
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A throw-away PostgreSQL database; skips (or fails with REQUIRE_POSTGRES=1) if absent."""
    import sqlalchemy as sa

    problem = _postgres_reachable()
    if problem is not None:
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL at {PG_ADMIN_URL} is required but unreachable: {problem}")
        pytest.skip(f"PostgreSQL at {PG_ADMIN_URL} unreachable: {problem}")
    name = f"ehr_test_{secrets.token_hex(6)}"
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    yield url
    from ehr_release.storage.engine import reset_engines

    reset_engines()
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, ehr_home: Path) -> str:
    """Run a storage test once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{ehr_home / 'db.sqlite'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def any_db(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The default database of the code under test is SQLite, then PostgreSQL."""
    from ehr_release.storage.engine import reset_engines

    monkeypatch.setenv("EHR_RELEASE_DATABASE_URL", db_url)
    reset_engines()
    yield db_url
    reset_engines()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


# --------------------------------------------------------------------------- credentials
@pytest.fixture(autouse=True)
def cheap_credential_hashing(request: pytest.FixtureRequest,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials made and checked in the test process are hashed with Argon2id at
    argon2-cffi's own profile for tests (``argon2.profiles.CHEAPEST``), not at the
    production cost: 0.45 CPU s for a hash and its check, paid by every test that adds a
    user or signs one in (the dashboard's tests: about 0.4 s of each one's set-up).

    Argon2 writes its parameters into each hash and verification reads them from there, so
    the code under test is the same; only the cost differs. A test marked
    ``production_hashing`` gets the production hasher (the one that holds its parameters,
    and the timing test of unknown names). Processes a test starts (the CLI) hash at the
    production cost."""
    if request.node.get_closest_marker("production_hashing"):
        return
    from ehr_release.storage import users

    monkeypatch.setattr(users, "_hasher", _cheapest_hasher)
    monkeypatch.setattr(users, "_dummy_hash", _cheapest_dummy_hash)


@functools.cache
def _cheapest_hasher():
    from argon2 import PasswordHasher, profiles

    return PasswordHasher.from_parameters(profiles.CHEAPEST)


@functools.cache
def _cheapest_dummy_hash() -> str:
    return _cheapest_hasher().hash(secrets.token_urlsafe(24))


# --------------------------------------------------------------------------- flows
@pytest.fixture(scope="session")
def harness():
    """A Prefect test server, and the settings our flows run under in production
    (:mod:`ehr_release.flows.run_settings`). A flow run in a thread of its own sees them only
    when the thread runs in a copy of the test's context (``tests.flow_helpers.start``)."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    from ehr_release.flows.run_settings import flow_run_settings

    with prefect_test_harness(server_startup_timeout=120), \
            flow_run_settings(str(PREFECT_API_URL.value())):
        yield


@pytest.fixture
def flow_csv(test_site: Path, tmp_path: Path) -> Path:
    """The flow tests' small extract (``tests.flow_helpers.CSV``), in a fresh test site (the
    flow tests run seeded releases)."""
    from tests.flow_helpers import CSV

    data = tmp_path / "extract.csv"
    data.write_text(CSV)
    return data


@pytest.fixture
def aside_stopped() -> Iterator[None]:
    """Stop the flow's second process (:mod:`ehr_release.tasks.aside`) a test started."""
    yield
    from ehr_release.tasks import aside

    aside.stop_worker()


@pytest.fixture
def cpu_free(monkeypatch) -> None:
    """The second process starts whatever else the machine is doing now (the tests of what
    it does must not depend on the load of the machine running them)."""
    from ehr_release.tasks import aside

    monkeypatch.setattr(aside, "_cpu_free", lambda: True)


@pytest.fixture
def env(harness, flow_csv, tmp_path, monkeypatch):
    _install_doubles(monkeypatch)
    return flow_csv, tmp_path / "out"


def _install_doubles(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import doubles

    doubles.install(monkeypatch)


#: Debian's Chromium, which the browser tests drive with Playwright (no browser download).
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def chromium_path() -> Path:
    """The browser for the dashboard's browser tests: skipped without it, failed when
    ``REQUIRE_BROWSER=1`` (CI) says it must be there."""
    if not CHROMIUM.exists():
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is required (apt-get install chromium) but missing")
        pytest.skip(f"{CHROMIUM} not installed")
    return CHROMIUM


# --------------------------------------------------------------------------- servers
#: How long a server told to stop may take to exit before it counts as left behind.
SERVER_EXIT_GRACE_S = 15


@pytest.fixture(scope="session", autouse=True)
def no_local_server_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each worker's session ends with no Prefect server of its test homes running.

    A search for the API begun under Prefect's harness once started a home's server in
    every test that published in process: one run of the suite left 38 running, each
    taking CPU from the tests after it. Any left now are stopped and fail the session."""
    yield
    import signal
    import time

    from tests.flow_helpers import server_pids, servers_under

    def running() -> dict[int, str]:
        """This worker's test homes' servers, the default home's (:data:`DEFAULT_HOME`,
        a test without a home of its own) included."""
        return {**servers_under(tmp_path_factory.getbasetemp()),
                **dict.fromkeys(server_pids(DEFAULT_HOME), str(DEFAULT_HOME))}

    deadline = time.monotonic() + SERVER_EXIT_GRACE_S
    while (left := running()) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    assert not left, ("local Prefect servers of test homes left running: "
                      + ", ".join(sorted(set(left.values()))))
