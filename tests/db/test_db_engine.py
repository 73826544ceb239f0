"""Engine set-up: the SQLite pragmas and PostgreSQL settings each durability mode promises."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, insert
from sqlalchemy.exc import DBAPIError, IntegrityError

from db.checks import retry_read
from db.engine import make_engine, read_session, write_session
from db.models import Base, Conversation


def test_sqlite_pragmas_and_foreign_keys(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'dir' / 'a.db'}"
    engine = make_engine(url)  # creates the parent folders
    Base.metadata.create_all(engine)
    with engine.connect() as conn:
        pragma = conn.exec_driver_sql
        assert pragma("PRAGMA journal_mode").scalar() == "wal"
        assert pragma("PRAGMA foreign_keys").scalar() == 1
        assert pragma("PRAGMA busy_timeout").scalar() == 30_000
        assert pragma("PRAGMA synchronous").scalar() == 2  # FULL: fsync per commit
    with pytest.raises(IntegrityError), write_session(engine) as session:
        session.execute(insert(Conversation).values(battle_id="none", side="a", contestant_id=1,
                                                    system_prompt="", params={}))
    engine.dispose()
    relaxed = make_engine(url, durability="crash_safe")
    with relaxed.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
    relaxed.dispose()
    assert (tmp_path / "nested" / "dir" / "a.db.writers").exists()  # the writers' queue lock file


def test_read_session_sees_committed_writes(engine: Engine) -> None:
    from db import actions

    actions.upsert_contestant(engine, slug="m1", display_name="M1")
    with read_session(engine) as session:
        assert session.execute(Base.metadata.tables["contestants"].select()).one().slug == "m1"


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "mysql://u@h/db"])
def test_unsupported_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        make_engine(url)


def test_bad_durability_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        make_engine(f"sqlite:///{tmp_path / 'x.db'}", durability="maybe")  # type: ignore[arg-type]


@pytest.mark.postgres
def test_postgres_durability_modes(pg_schema_url: str) -> None:
    for durability, expected in (("fsync", "on"), ("crash_safe", "off")):
        engine = make_engine(pg_schema_url, durability=durability)  # type: ignore[arg-type]
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW synchronous_commit").scalar() == expected
            assert conn.exec_driver_sql("SHOW search_path").scalar().startswith("t_")  # options kept
        assert engine.pool._pre_ping  # type: ignore[attr-defined]
        engine.dispose()


def _dropped(invalidated: bool) -> DBAPIError:
    return DBAPIError("SELECT 1", None, Exception("server closed the connection"),
                      connection_invalidated=invalidated)


def test_retry_read_retries_once_only_when_the_connection_died() -> None:
    calls: list[int] = []

    @retry_read
    def flaky(*, fail_times: int, invalidated: bool) -> str:
        calls.append(1)
        if len(calls) <= fail_times:
            raise _dropped(invalidated)
        return "rows"

    assert flaky(fail_times=1, invalidated=True) == "rows" and len(calls) == 2
    calls.clear()
    with pytest.raises(DBAPIError):  # a second failure is not hidden
        flaky(fail_times=2, invalidated=True)
    assert len(calls) == 2
    calls.clear()
    with pytest.raises(DBAPIError):  # an ordinary error is never retried
        flaky(fail_times=1, invalidated=False)
    assert len(calls) == 1


def _child_writes(url: str, engine_holder: list) -> None:  # runs in a forked child
    from db import actions

    actions.upsert_contestant(engine_holder[0], slug="child", display_name="Child")


def test_forked_child_is_not_deadlocked_by_a_gate_held_in_the_parent(tmp_path: Path) -> None:
    import multiprocessing
    import threading
    import time

    from db import actions
    from db.engine import writer_gate

    url = f"sqlite:///{tmp_path / 'fork.db'}"
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with writer_gate(engine):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    child = multiprocessing.get_context("fork").Process(target=_child_writes, args=(url, [engine]))
    child.start()
    time.sleep(0.3)
    release.set()  # the parent's queue position ends; the child must get its turn
    holder.join(10)
    child.join(30)
    if child.exitcode is None:
        child.kill()
    assert child.exitcode == 0
    assert actions.get_contestant(engine, slug="child").display_name == "Child"
    engine.dispose()
