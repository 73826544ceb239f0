"""Fixtures of the db tests: every test runs on SQLite and on PostgreSQL (a fresh schema per test)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from sqlalchemy import Engine, select

from db import actions
from db.engine import make_engine, write_session
from db.models import Base, UTCDateTime
from db.views import BattleView


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('db') / 'arena.db'}"
    return str(request.getfixturevalue("pg_schema_url"))


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = make_engine(db_url)
    Base.metadata.create_all(eng)
    yield eng
    eng.dispose()


@dataclass
class Arena:
    """Small builder for test data through the real ``db.actions`` functions.

    The public figures count closed battles only (``db.vote_filters.VoteFilters.published``): a test that
    reads them after building battles closes those first, as a vote or "Skip" does (:meth:`close_all`).
    """

    engine: Engine
    opened: list[str] = field(default_factory=list)

    def contestants(self, *slugs: str) -> None:
        for slug in slugs:
            actions.upsert_contestant(self.engine, slug=slug, display_name=slug.upper(), family="test")

    def battle(
        self,
        a: str = "m1",
        b: str | None = "m2",
        *,
        mode: str = "anonymous",
        scenario: str = "calendar",
        visitor_id: int | None = None,
        replies: bool = True,
    ) -> BattleView:
        battle = actions.open_battle(
            self.engine, mode=mode, scenario=scenario, contestant_a=a, contestant_b=b, visitor_id=visitor_id
        )
        self.opened.append(battle.id)
        if replies:
            for side in battle.sides:
                actions.append_message(self.engine, battle_id=battle.id, side=side, kind="request",
                                       content="hi")
                actions.append_message(self.engine, battle_id=battle.id, side=side, kind="reply",
                                       content="ok")
        return actions.get_battle(self.engine, battle_id=battle.id)

    def close_all(self) -> int:
        """Abandon ("Skip") every battle this builder opened that is still open; returns how many."""
        closed = 0
        for battle_id in self.opened:
            if actions.get_battle(self.engine, battle_id=battle_id).status == "open":
                actions.abandon_battle(self.engine, battle_id=battle_id)
                closed += 1
        return closed


@pytest.fixture
def arena(engine: Engine) -> Arena:
    built = Arena(engine)
    built.contestants("m1", "m2", "m3")
    return built


def back_date(engine: Engine, delta: dt.timedelta) -> None:
    """Move every stored time back by ``delta``, as if the whole history had happened that long ago.

    The public boards show battles closed before now less ``ARENA_PUBLIC_EXPORT_DELAY_HOURS``: a test
    that reads them through the pages, where the cutoff is the real clock, ages its data this way."""
    with write_session(engine) as session:
        for mapper in Base.registry.mappers:
            names = [a.key for a in mapper.column_attrs if isinstance(a.columns[0].type, UTCDateTime)]
            for row in session.scalars(select(mapper.class_)) if names else ():
                for name in names:
                    value = getattr(row, name)
                    if value is not None:
                        setattr(row, name, value - delta)
