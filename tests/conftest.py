"""Shared fixtures: users with each role, logged-in clients, and stored sessions."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

# Each test process (and every daphne started by a test) gets its own memory cache, so no
# rendered page survives from one run into the next through the var directory.
os.environ.setdefault("SESSIONS_CACHE", "locmem")

FIXTURES_DIR = Path(
    os.environ.get(
        "SESSIONS_FIXTURES_DIR", Path(__file__).resolve().parents[2] / "shared" / "fixtures"
    )
)
PI_FIXTURES = FIXTURES_DIR / "pi"
AGENT_FACTS = FIXTURES_DIR / "expected-facts.json"


def pi_fixture_files() -> list[Path]:
    """Pi's real session files, or one placeholder when the folder is missing (the tests
    that read them are then deselected, and the summary says why)."""
    return sorted(PI_FIXTURES.glob("*.jsonl")) or [PI_FIXTURES / "missing.jsonl"]


def _deselect_without_pi_fixtures(config, items):
    """Tests marked ``pi_fixtures`` read Pi's real files from ``../shared/fixtures/pi``, and
    tests marked ``agent_fixtures`` the Claude Code / Codex examples and their facts
    (``../shared/fixtures/expected-facts.json``). CI always has that folder; a checkout
    without it runs everything else."""
    for marker, present in (
        ("pi_fixtures", PI_FIXTURES.is_dir()),
        ("agent_fixtures", AGENT_FACTS.is_file()),
    ):
        if present:
            continue
        dropped = [i for i in items if i.get_closest_marker(marker)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if not i.get_closest_marker(marker)]
            config._pi_fixtures_missing = getattr(config, "_pi_fixtures_missing", 0) + len(dropped)


def _pi_fixtures_summary(terminalreporter, config):
    missing = getattr(config, "_pi_fixtures_missing", 0)
    if missing:
        terminalreporter.write_line(
            f"{missing} tests did not run: they read the shared session files from "
            f"{FIXTURES_DIR}, which does not exist here. Put the shared folder beside the "
            "checkout (CI always has it) or set SESSIONS_FIXTURES_DIR.",
            yellow=True,
            bold=True,
        )


# A small but complete version-3 session: a branch, a tool call and result, a label,
# a context edit and a name.
SMALL_SESSION = (
    b'{"type":"session","version":3,"id":"0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a2b","timestamp":"2025-03-04T05:06:07.089Z","cwd":"/home/ana/proj"}\n'
    b'{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2025-03-04T05:06:08.000Z","message":{"role":"user","content":"Read demo.txt and summarise it","timestamp":1741064768000}}\n'
    b'{"type":"message","id":"b2c3d4e5","parentId":"a1b2c3d4","timestamp":"2025-03-04T05:06:10.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"call_1","name":"read","arguments":{"path":"demo.txt"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":1200,"output":40,"cacheRead":0,"cacheWrite":0,"totalTokens":1240,"cost":{"input":0.0036,"output":0.0006,"cacheRead":0,"cacheWrite":0,"total":0.0042}},"stopReason":"toolUse","timestamp":1741064770000}}\n'
    b'{"type":"message","id":"c3d4e5f6","parentId":"b2c3d4e5","timestamp":"2025-03-04T05:06:10.500Z","message":{"role":"toolResult","toolCallId":"call_1","toolName":"read","content":[{"type":"text","text":"hello world"}],"isError":false,"timestamp":1741064770500}}\n'
    b'{"type":"message","id":"d4e5f6a7","parentId":"c3d4e5f6","timestamp":"2025-03-04T05:06:12.000Z","message":{"role":"assistant","content":[{"type":"text","text":"The file says hello world."}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":1300,"output":12,"cacheRead":0,"cacheWrite":0,"totalTokens":1312,"cost":{"input":0.0039,"output":0.0002,"cacheRead":0,"cacheWrite":0,"total":0.0041}},"stopReason":"stop","timestamp":1741064772000}}\n'
    b'{"type":"message","id":"e5f6a7b8","parentId":"a1b2c3d4","timestamp":"2025-03-04T05:07:00.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Another route."}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":10,"output":3,"cacheRead":0,"cacheWrite":0,"totalTokens":13,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1741064820000}}\n'
    b'{"type":"label","id":"f6a7b8c9","parentId":"d4e5f6a7","timestamp":"2025-03-04T05:08:00.000Z","targetId":"a1b2c3d4","label":"start"}\n'
    b'{"type":"context_edit","id":"0a1b2c3d","parentId":"f6a7b8c9","timestamp":"2025-03-04T05:09:00.000Z","targetId":"c3d4e5f6","replacement":null}\n'
    b'{"type":"session_info","id":"1b2c3d4e","parentId":"0a1b2c3d","timestamp":"2025-03-04T05:10:00.000Z","name":"Demo of a small session"}\n'
)


# --- tests that need the team-server back ends -----------------------------------------------
# ``needs_redis`` / ``needs_postgres`` tests run only where REDIS_URL / a PostgreSQL DATABASE_URL
# is set (``.ci/services.sh start`` provides both; ``.ci/run``'s second pass uses it). Elsewhere
# they are deselected at collection and the summary says which and why: never a silent skip.
# With SESSIONS_TEAM_TESTS=required (the CI pass) a missing back end is an error instead.
_BACK_ENDS = {
    "needs_redis": ("REDIS_URL", lambda: bool(os.environ.get("REDIS_URL"))),
    "needs_postgres": (
        "a PostgreSQL DATABASE_URL",
        lambda: (
            os.environ.get("DATABASE_URL", "").split(":", 1)[0]
            in ("postgres", "postgresql", "pgsql")
        ),
    ),
}
_deselected: dict[str, int] = {}


def pytest_configure(config: pytest.Config) -> None:
    for marker, (what, _) in _BACK_ENDS.items():
        config.addinivalue_line(
            "markers", f"{marker}: runs only with {what} (.ci/services.sh start)"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Wait for this test's live broadcasts (a worker thread renders them after the commit)
    and shared copies (written after the answer) before its fixtures tear things down."""
    try:
        return (yield)
    finally:
        import sys

        broadcast = sys.modules.get("explorer.broadcast")
        if broadcast is not None:
            broadcast.drain(30)
        shared_copies = sys.modules.get("explorer.shared_copies")
        if shared_copies is not None:
            shared_copies.flush(30)


# ``.ci/run``'s second pass (PostgreSQL + Redis) sets this: the engine's tests that touch no
# database run in the first pass of the same run, on the same code, and no back end can change
# their answer (the engine has no Django imports), so that pass spends its minutes on the tests
# the back ends can change. The summary says how many and why.
ENGINE_TESTS_RAN = "SESSIONS_ENGINE_TESTS_RAN"
_DATABASE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "live_server",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
    }
)
_ENGINE_DIR = Path(__file__).resolve().parent / "session"


def _deselect_engine_tests_already_run(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(ENGINE_TESTS_RAN) != "1":
        return
    dropped = [
        item
        for item in items
        if _ENGINE_DIR in Path(str(item.path)).parents
        and not _DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        and not item.get_closest_marker("django_db")
        and not _is_django_test_case(getattr(item, "cls", None))
    ]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = set(map(id, dropped))
        items[:] = [item for item in items if id(item) not in gone]
        config._engine_tests_not_repeated = len(dropped)


def _is_django_test_case(cls) -> bool:
    from django.test import SimpleTestCase

    return isinstance(cls, type) and issubclass(cls, SimpleTestCase)


def _engine_tests_summary(terminalreporter, config) -> None:
    n = getattr(config, "_engine_tests_not_repeated", 0)
    if n:
        terminalreporter.write_line(
            f"{n} engine tests (tests/session, no database) were deselected: {ENGINE_TESTS_RAN}=1 "
            "says the first pass of this run runs them, and no database or channel layer can "
            "change their answer."
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _deselect_without_pi_fixtures(config, items)
    _deselect_engine_tests_already_run(config, items)
    kept, dropped = [], []
    for item in items:
        missing = [
            what
            for marker, (what, present) in _BACK_ENDS.items()
            if item.get_closest_marker(marker) and not present()
        ]
        if missing:
            dropped.append(item)
            reason = " and ".join(missing)
            _deselected[reason] = _deselected.get(reason, 0) + 1
        else:
            kept.append(item)
    if not dropped:
        return
    if os.environ.get("SESSIONS_TEAM_TESTS") == "required":
        raise pytest.UsageError(
            "SESSIONS_TEAM_TESTS=required but these tests lack their back end: "
            + ", ".join(f"{n} need {reason}" for reason, n in _deselected.items())
        )
    items[:] = kept
    config.hook.pytest_deselected(items=dropped)


def _deselected_lines() -> list[str]:
    return [
        f"deselected {n} test(s) that need {reason}: not set here "
        "(start them with .ci/services.sh start)"
        for reason, n in _deselected.items()
    ]


def pytest_report_collectionfinish(
    config: pytest.Config, start_path: Path, items: list[pytest.Item]
) -> list[str]:
    return _deselected_lines()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    _pi_fixtures_summary(terminalreporter, config)
    _engine_tests_summary(terminalreporter, config)
    lines = _deselected_lines()
    if lines:
        terminalreporter.write_sep("=", "team-server tests not run")
        for line in lines:
            terminalreporter.write_line(line)


def _fixture_stamps() -> dict[Path, tuple[int, int]]:
    if not FIXTURES_DIR.is_dir():
        return {}
    return {
        p: (p.stat().st_mtime_ns, p.stat().st_size) for p in FIXTURES_DIR.rglob("*") if p.is_file()
    }


@pytest.fixture(autouse=True)
def _shared_fixtures_stay_unchanged():
    """The shared example files are read-only evidence: a test (or the code it drives) that
    opens one in place with Pi's migrating ``SessionManager.open`` rewrites it, and every
    later test then reads a different file. Fail the test that did it, not the later ones."""
    before = _fixture_stamps()
    yield
    changed = sorted(str(p) for p, stamp in _fixture_stamps().items() if before.get(p) != stamp)
    assert not changed, f"this test changed shared fixture files (use a copy): {changed}"


@pytest.fixture(scope="session", autouse=True)
def _memory_cache():
    from django.test import override_settings

    with override_settings(
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    ):
        yield


@pytest.fixture(scope="session", autouse=True)
def _in_process_channel_layer():
    """Consumers run inside this process (channels' communicators) use the in-memory layer even
    when REDIS_URL is set; every daphne the tests start (tests/live/server.py) uses Redis.

    Why: each of those tests has an event loop of its own that is torn down by cancelling
    every task. A consumer refused at once (foreign origin) is cancelled while its first Redis
    receive starts; with channels_redis 4.3 on redis-py 8 that cancellation is sometimes lost
    and the receive polls Redis forever, hanging the teardown until the test times out (about
    one refused connection in ten). The Redis path is tested through real daphne processes.
    SESSIONS_TEST_IN_PROCESS_REDIS=1 keeps Redis here too, to study that hang.
    """
    from django.conf import settings
    from django.test import override_settings

    if not settings.CHANNEL_LAYERS["default"]["BACKEND"].startswith("channels_redis") or (
        os.environ.get("SESSIONS_TEST_IN_PROCESS_REDIS") == "1"
    ):
        yield
        return
    with override_settings(
        CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    ):
        yield


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, with every other session on it ended before it is
    dropped: pooled connections are sessions too, and PostgreSQL refuses to drop a database
    in use (the test database would be left behind with a warning)."""
    yield
    from django.db import connections

    default = connections["default"]
    if default.vendor == "postgresql":
        # A connection another thread still holds (it is never returned to the pool) would
        # block the drop as well; they all belong to this test run.
        with django_db_blocker.unblock(), default.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                # Only this role's sessions: an autovacuum worker runs as the bootstrap
                # superuser, which the test role may not end (the drop cancels it itself).
                " AND usename = current_user"
            )
    for conn in connections.all(initialized_only=True):
        conn.close()
        if hasattr(conn, "close_pool"):
            conn.close_pool()


@pytest.fixture
def sent_broadcasts(monkeypatch) -> list[dict]:
    """Every message ``explorer.broadcast`` hands to the channel layer (still sent)."""
    from explorer import broadcast

    seen: list[dict] = []
    real = broadcast.send

    def spy(session, message):
        seen.append(message)
        real(session, message)

    monkeypatch.setattr(broadcast, "send", spy)
    return seen


@pytest.fixture
def small_session_bytes() -> bytes:
    return SMALL_SESSION


def _user_with_role(django_user_model, username: str, role: str | None):
    from explorer.permissions import set_role

    user = django_user_model.objects.create_user(username=username, password="pw-" + username)
    if role:
        set_role(user, role)
    return user


@pytest.fixture
def viewer_user(db, django_user_model):
    return _user_with_role(django_user_model, "vera", "viewer")


@pytest.fixture
def editor_user(db, django_user_model):
    return _user_with_role(django_user_model, "eddie", "editor")


@pytest.fixture
def admin_user(db, django_user_model):
    return _user_with_role(django_user_model, "ada", "admin")


@pytest.fixture
def norole_user(db, django_user_model):
    return _user_with_role(django_user_model, "nobody", None)


def _client_for(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    client.user = user
    return client


@pytest.fixture
def viewer_client(viewer_user):
    return _client_for(viewer_user)


@pytest.fixture
def editor_client(editor_user):
    return _client_for(editor_user)


@pytest.fixture
def admin_client(admin_user):
    return _client_for(admin_user)


@pytest.fixture
def csrf_client_factory(db):
    """Clients that enforce CSRF like a browser would."""
    from django.test import Client

    def make(user):
        client = Client(enforce_csrf_checks=True)
        client.force_login(user)
        return client

    return make


@pytest.fixture
def make_session(db) -> Callable:
    """Import bytes (default: the small session) and return the stored ``Session``."""
    from explorer import services

    def make(data: bytes | None = None, *, source_path: str = "", user=None):
        result = services.import_bytes(
            SMALL_SESSION if data is None else data, source_path=source_path, user=user
        )
        assert result.ok, [str(p) for p in result.problems]
        # The import's own live frames (its meter comes up to half a second later) are out
        # before the test watches the session: a viewer sees only what the test does.
        from explorer import broadcast

        broadcast.drain(30)
        return result.session

    return make
