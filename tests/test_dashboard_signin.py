"""Dashboard sign-in hardening: throttling and lockout (durable, on SQLite and PostgreSQL),
equal timing for unknown users, Secure cookies, audited CSRF refusals, HTML error pages."""

from __future__ import annotations

import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from ehr_release.dashboard.app import COOKIE, create_app
from ehr_release.storage import users
from ehr_release.storage.audit import export_events, verify_chain
from ehr_release.storage.engine import get_engine, reset_engines
from ehr_release.storage.users import add_user
from tests.conftest import PG_ADMIN_URL
from tests.test_dashboard import csrf_of, signed_in
from tests.test_storage import make_run, to_awaiting

LIMITS = {"EHR_RELEASE_SIGNIN_MAX_FAILURES_PER_USER": "3",
          "EHR_RELEASE_SIGNIN_MAX_FAILURES_PER_CLIENT": "6",
          "EHR_RELEASE_SIGNIN_WINDOW_S": "600",
          "EHR_RELEASE_SIGNIN_LOCKOUT_S": "600"}


@pytest.fixture
def on_db(db_url, monkeypatch):
    """The dashboard's database is ``db_url`` (SQLite, then PostgreSQL), small limits."""
    monkeypatch.setenv("EHR_RELEASE_DATABASE_URL", db_url)
    for key, value in LIMITS.items():
        monkeypatch.setenv(key, value)
    reset_engines()
    get_engine()
    return db_url


def _events(action: str) -> list[dict]:
    rows = [json.loads(line) for line in export_events(None, "jsonl").splitlines()]
    return [r for r in rows if r["action"] == action]


def _try(client: TestClient, name: str, credential: str):
    return client.post("/login", data={"name": name, "credential": credential})


def test_wrong_credentials_lock_the_user_even_for_the_right_one(on_db) -> None:
    credential = add_user("rita", "reviewer")
    client = TestClient(create_app(), follow_redirects=False)
    for _ in range(3):
        assert _try(client, "rita", "guess").status_code == 200
    locked = _try(client, "rita", credential)
    assert locked.status_code == 429 and COOKIE not in locked.cookies
    assert "too many failed sign-ins" in locked.text
    (event,) = _events("auth.locked_out")
    assert event["actor"] == "rita" and event["payload"]["scope"] == "user"
    assert credential not in export_events(None, "jsonl")
    assert verify_chain().ok


def test_lockout_survives_a_restart(on_db) -> None:
    credential = add_user("rita", "reviewer")
    client = TestClient(create_app(), follow_redirects=False)
    for _ in range(3):
        _try(client, "rita", "guess")
    reset_engines()  # a restart: new engine, new app, nothing kept in memory
    again = TestClient(create_app(), follow_redirects=False)
    assert _try(again, "rita", credential).status_code == 429


def test_lockout_ends_after_its_time_and_success_resets_the_count(on_db, monkeypatch) -> None:
    monkeypatch.setenv("EHR_RELEASE_SIGNIN_LOCKOUT_S", "1")
    monkeypatch.setenv("EHR_RELEASE_SIGNIN_MAX_FAILURES_PER_CLIENT", "100")
    credential = add_user("rita", "reviewer")
    client = TestClient(create_app(), follow_redirects=False)
    for _ in range(3):
        _try(client, "rita", "guess")
    assert _try(client, "rita", credential).status_code == 429
    time.sleep(1.2)
    for _ in range(2):  # below the limit again, then a success clears the count
        _try(client, "rita", "guess")
    assert _try(client, "rita", credential).status_code == 303
    for _ in range(2):
        _try(client, "rita", "guess")
    assert _try(client, "rita", credential).status_code == 303


def test_one_client_guessing_many_names_is_throttled(on_db) -> None:
    credential = add_user("rita", "reviewer")
    client = TestClient(create_app(), follow_redirects=False)
    for i in range(6):
        assert _try(client, f"name{i}", "guess").status_code == 200
    assert _try(client, "rita", credential).status_code == 429
    (event,) = _events("auth.locked_out")
    assert event["payload"]["scope"] == "client"
    # Another client is not affected by this one's lock.
    other = TestClient(create_app(), follow_redirects=False, client=("10.0.0.9", 5000))
    assert _try(other, "rita", credential).status_code == 303


def test_forgotten_names_are_pruned(on_db, monkeypatch) -> None:
    monkeypatch.setenv("EHR_RELEASE_SIGNIN_WINDOW_S", "1")
    monkeypatch.setenv("EHR_RELEASE_SIGNIN_LOCKOUT_S", "1")
    client = TestClient(create_app(), follow_redirects=False)
    for i in range(3):
        _try(client, f"random{i}", "guess")
    engine = get_engine()

    def rows() -> int:
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT count(*) FROM signin_throttle")).scalar_one()

    assert rows() == 4  # three names and the client
    time.sleep(2.1)
    _try(client, "someone", "guess")
    assert rows() == 2


def _count_verifications(monkeypatch) -> list[str]:
    """Wrap the Argon2 hasher so a test can count the credentials it checked."""
    calls: list[str] = []
    real = users._hasher()

    class Counting:
        def verify(self, hash_: str, credential: str) -> bool:
            calls.append(credential)
            return real.verify(hash_, credential)

        def __getattr__(self, name: str):
            return getattr(real, name)

    counting = Counting()
    monkeypatch.setattr(users, "_hasher", lambda: counting)
    return calls


def test_a_parallel_burst_gets_no_more_guesses_than_the_limit(on_db, monkeypatch) -> None:
    add_user("rita", "reviewer")
    calls = _count_verifications(monkeypatch)
    app = create_app()

    def attempt(i: int) -> int:
        client = TestClient(app, follow_redirects=False, client=(f"10.0.0.{i}", 5000))
        return _try(client, "rita", f"guess{i}").status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = list(pool.map(attempt, range(8)))
    assert len(calls) == 3 and sorted(codes) == [200] * 3 + [429] * 5, (calls, codes)


def test_unknown_user_is_checked_against_a_dummy_hash(ehr_home, monkeypatch) -> None:
    add_user("rita", "reviewer")
    calls = _count_verifications(monkeypatch)
    client = TestClient(create_app(), follow_redirects=False)
    _try(client, "nobody", "guess")
    _try(client, "rita", "guess")
    assert len(calls) == 2


@pytest.mark.production_hashing
def test_unknown_user_takes_as_long_as_a_wrong_credential(ehr_home, monkeypatch) -> None:
    monkeypatch.setenv("EHR_RELEASE_SIGNIN_MAX_FAILURES_PER_USER", "100")
    monkeypatch.setenv("EHR_RELEASE_SIGNIN_MAX_FAILURES_PER_CLIENT", "100")
    add_user("rita", "reviewer")
    client = TestClient(create_app(), follow_redirects=False)
    timings: dict[str, list[float]] = {"rita": [], "nobody": []}
    for _ in range(5):  # interleaved, so load on the machine hits both alike
        for name, spent in timings.items():
            start = time.perf_counter()
            _try(client, name, "guess")
            spent.append(time.perf_counter() - start)
    known, unknown = (statistics.median(timings[n]) for n in ("rita", "nobody"))
    assert unknown > 0.5 * known, (known, unknown)


def test_cookies_are_secure_when_configured_or_over_https(ehr_home, monkeypatch) -> None:
    credential = add_user("rita", "reviewer")

    def cookie_header(app, base_url: str = "http://testserver") -> str:
        client = TestClient(app, base_url=base_url, follow_redirects=False)
        return _try(client, "rita", credential).headers["set-cookie"]

    assert "secure" not in cookie_header(create_app()).lower()
    assert "secure" in cookie_header(create_app(secure_cookies=True)).lower()
    assert "secure" in cookie_header(create_app(), "https://testserver").lower()
    monkeypatch.setenv("EHR_RELEASE_SECURE_COOKIES", "1")
    assert "secure" in cookie_header(create_app()).lower()


def test_cli_dashboard_passes_secure_cookies(monkeypatch) -> None:
    import uvicorn
    from typer.testing import CliRunner

    from ehr_release import cli

    served: list = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.append(app))
    made: list[dict] = []
    import ehr_release.dashboard.app as dashboard_app

    real = dashboard_app.create_app
    monkeypatch.setattr(dashboard_app, "create_app",
                        lambda **kw: made.append(kw) or real(**kw))
    result = CliRunner().invoke(cli.app, ["dashboard", "--secure-cookies"])
    assert result.exit_code == 0, result.output
    assert made[-1]["secure_cookies"] is True and served


@pytest.mark.parametrize(("var", "value"), [
    ("EHR_RELEASE_SIGNIN_MAX_FAILURES_PER_USER", "many"),
    ("EHR_RELEASE_SIGNIN_LOCKOUT_S", "0"),
    ("EHR_RELEASE_SECURE_COOKIES", "perhaps"),
])
def test_a_bad_setting_stops_the_dashboard_with_one_line(monkeypatch, var, value) -> None:
    import uvicorn
    from typer.testing import CliRunner

    from ehr_release import cli

    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: None)
    monkeypatch.setenv(var, value)
    result = CliRunner().invoke(cli.app, ["dashboard"])
    assert result.exit_code == 1 and var in result.output, result.output
    assert "Traceback" not in result.output


@pytest.fixture
def world(ehr_home):
    engine = get_engine()
    run = make_run(engine, requester="steward.sam")
    to_awaiting(run.id, engine)
    creds = {name: add_user(name, role) for name, role in
             [("steward.sam", "steward"), ("rita", "reviewer")]}
    return run.id, creds, create_app(publish=lambda _: None)


@pytest.mark.parametrize("sent", [None, "forged"])
def test_missing_or_wrong_csrf_token_is_refused_and_audited(world, sent) -> None:
    run_id, creds, app = world
    client = signed_in(app, "rita", creds["rita"])
    token = csrf_of(client, "/")
    form = {"decision": "approve", "reason": "ok"} | ({"csrf": sent} if sent else {})
    response = client.post(f"/runs/{run_id}/decision", data=form)
    assert response.status_code == 403
    (event,) = _events("dashboard.csrf_refused")
    assert event["actor"] == "rita" and event["run_id"] == run_id
    assert event["payload"]["route"] == "POST /runs/{run_id}/decision"
    assert event["payload"]["why"] == ("missing" if sent is None else "mismatch")
    trail = export_events(None, "jsonl")
    assert token not in trail and "forged" not in trail


def test_missing_csrf_on_sign_out_is_audited(world) -> None:
    _, creds, app = world
    client = signed_in(app, "rita", creds["rita"])
    assert client.post("/logout", data={}).status_code == 403
    (event,) = _events("dashboard.csrf_refused")
    assert event["payload"]["route"] == "POST /logout"


def _is_error_page(response, status: int) -> None:
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    assert f"<h1>{status}" in response.text
    assert "Traceback" not in response.text and '{"detail"' not in response.text


def test_refusals_and_unknown_pages_are_html(world) -> None:
    run_id, creds, app = world
    client = signed_in(app, "steward.sam", creds["steward.sam"])
    _is_error_page(client.get("/runs/rel-" + "0" * 32), 404)
    _is_error_page(client.get("/no/such/page"), 404)
    _is_error_page(client.get("/audit"), 403)
    token = csrf_of(client, "/")
    _is_error_page(client.post(f"/runs/{run_id}/decision",
                               data={"decision": "approve", "reason": "x", "csrf": token}), 403)
    reviewer = signed_in(app, "rita", creds["rita"])
    token = csrf_of(reviewer, "/")
    bad_form = reviewer.post(f"/runs/{run_id}/decision", data={"csrf": token})
    _is_error_page(bad_form, 400)
    assert "reason" in bad_form.text
    _is_error_page(client.delete("/"), 405)


def test_an_unexpected_error_is_a_plain_500_page(world, monkeypatch, caplog) -> None:
    _, creds, app = world
    client = signed_in(app, "rita", creds["rita"])
    from ehr_release.storage import runs

    def boom(**_):
        raise RuntimeError("patient 4711 code 250.01")

    monkeypatch.setattr(runs, "list_runs", boom)
    response = client.get("/")
    _is_error_page(response, 500)
    assert "4711" not in response.text and "250.01" not in response.text
    assert "4711" not in caplog.text


@pytest.mark.parametrize("url", [
    "postgresql+psycopg://admin:s3cretpw@127.0.0.1:1/nodb",
    "nosuchdriver://admin:s3cretpw@host/db",
])
def test_database_down_or_wrong_url_is_an_html_page(ehr_home, monkeypatch, url) -> None:
    monkeypatch.setenv("EHR_RELEASE_DATABASE_URL", url)
    reset_engines()
    client = TestClient(create_app(), follow_redirects=False)
    response = _try(client, "rita", "guess")
    _is_error_page(response, 503)
    assert "s3cretpw" not in response.text and "rita" not in response.text
    client.cookies.set(COOKIE, "some-session")
    _is_error_page(client.get("/"), 503)


@pytest.mark.postgres
def test_postgres_refusing_connections_is_an_html_page(pg_url, ehr_home, monkeypatch) -> None:
    monkeypatch.setenv("EHR_RELEASE_DATABASE_URL", pg_url)
    reset_engines()
    credential = add_user("rita", "reviewer")
    app = create_app()
    client = signed_in(app, "rita", credential)
    db = pg_url.rsplit("/", 1)[1]
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'ALTER DATABASE "{db}" ALLOW_CONNECTIONS false'))
            conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE datname = :db AND pid <> pg_backend_pid()"), {"db": db})
        _is_error_page(client.get("/"), 503)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'ALTER DATABASE "{db}" ALLOW_CONNECTIONS true'))
        admin.dispose()
    assert client.get("/").status_code == 200


@pytest.mark.production_hashing
def test_credentials_are_stored_at_the_production_argon2_cost(ehr_home) -> None:
    """What the other tests' cheap hashing (conftest) leaves out: a credential is stored as
    Argon2id at argon2-cffi's default cost (RFC 9106's second recommendation: 64 MiB,
    3 passes, 4 lanes), and signs its user in."""
    from argon2 import Type, extract_parameters

    credential = add_user("rita", "reviewer")
    with get_engine().connect() as conn:
        stored = conn.execute(sa.text("SELECT credential_hash FROM users WHERE name = 'rita'")
                              ).scalar_one()
    used = extract_parameters(stored)
    assert used.type is Type.ID
    assert used.memory_cost >= 65536 and used.time_cost >= 3 and used.parallelism >= 4
    assert users.authenticate("rita", credential, client="t").name == "rita"
