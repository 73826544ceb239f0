"""Fixtures of the db tests: every test runs on SQLite and on PostgreSQL (a fresh schema per test)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import Engine

from db import repository as repo
from db.engine import make_engine
from db.models import Base
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
    """Small builder for test data through the real repository functions."""

    engine: Engine

    def contestants(self, *slugs: str) -> None:
        for slug in slugs:
            repo.upsert_contestant(self.engine, slug=slug, display_name=slug.upper(), family="test")

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
        battle = repo.open_battle(
            self.engine, mode=mode, scenario=scenario, contestant_a=a, contestant_b=b, visitor_id=visitor_id
        )
        if replies:
            for side in battle.sides:
                repo.append_message(self.engine, battle_id=battle.id, side=side, kind="request", content="hi")
                repo.append_message(self.engine, battle_id=battle.id, side=side, kind="reply", content="ok")
        return repo.get_battle(self.engine, battle_id=battle.id)


@pytest.fixture
def arena(engine: Engine) -> Arena:
    built = Arena(engine)
    built.contestants("m1", "m2", "m3")
    return built
