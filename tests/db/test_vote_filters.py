"""``VoteFilters``: validated when built, and its vote, battle and side predicates agree on what counts."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from sqlalchemy import Engine, func, select

from db import actions
from db.engine import read_session
from db.errors import InvalidInput
from db.models import Battle, SideStats, Vote
from db.vote_filters import DEFAULT_MODES, HUMAN_MODES, VoteFilterArgs, VoteFilters


def test_filters_validate_themselves() -> None:
    with pytest.raises(InvalidInput, match="since must be timezone-aware"):
        VoteFilters(since=dt.datetime(2026, 1, 1))
    with pytest.raises(InvalidInput, match="until must be timezone-aware"):
        VoteFilters(until=dt.datetime(2026, 1, 1))
    with pytest.raises(InvalidInput, match="mode must be one of"):
        VoteFilters(modes=["anonymous", "ranked"])
    filters = VoteFilters(modes=["named"], since=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    assert filters.modes == ("named",) and hash(filters) == hash(VoteFilters(**dataclasses.asdict(filters)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        filters.scenario = "chess"  # type: ignore[misc]


def test_keyword_arguments_and_the_function_default_modes() -> None:
    assert VoteFilters.of({}).modes == DEFAULT_MODES
    assert VoteFilters.of({}, modes=HUMAN_MODES).modes == HUMAN_MODES
    assert VoteFilters.of({"modes": None}, modes=HUMAN_MODES).modes is None, "an explicit None: every mode"
    with pytest.raises(InvalidInput):
        VoteFilters.of({"since": dt.datetime(2026, 1, 1)})


def test_a_battle_level_query_refuses_a_vote_filter_instead_of_ignoring_it() -> None:
    vote_level: VoteFilterArgs = {"corrections_only": True}
    assert VoteFilters.of(vote_level, votes=True).corrections_only
    for name in ("corrections_only", "exclude_revealed"):
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{name}'"):
            VoteFilters.of({name: True})  # type: ignore[misc]
    with pytest.raises(TypeError, match="'scenarios'"):
        VoteFilters.of({"scenarios": "calendar"}, votes=True)  # type: ignore[typeddict-unknown-key]


def _counted(engine: Engine, filters: VoteFilters) -> tuple[int, int, int]:
    """Votes, battles and sides the three predicates of ``filters`` keep."""
    with read_session(engine) as session:
        votes = session.scalar(select(func.count()).select_from(Vote).where(*filters.vote_conditions()))
        battles = session.scalar(select(func.count()).select_from(Battle).where(*filters.battle_conditions()))
        sides = session.scalar(select(func.count()).select_from(SideStats).where(*filters.side_conditions()))
    return int(votes or 0), int(battles or 0), int(sides or 0)


def test_flagged_and_revealed_are_left_out_by_every_predicate(arena, engine: Engine) -> None:
    counted = arena.battle()
    actions.record_vote(engine, battle_id=counted.id, choice="a")
    flagged = arena.battle()
    actions.record_vote(engine, battle_id=flagged.id, choice="b")
    actions.flag_battle(engine, battle_id=flagged.id, reason="abuse")
    revealed = arena.battle()
    actions.mark_revealed(engine, battle_id=revealed.id)
    actions.record_vote(engine, battle_id=revealed.id, choice="tie", accept_revealed=True)
    sides_per_battle = len(counted.sides)

    assert _counted(engine, VoteFilters()) == (1, 2, 2 * sides_per_battle)
    assert _counted(engine, VoteFilters(exclude_flagged=False)) == (2, 3, 3 * sides_per_battle)
    assert _counted(engine, VoteFilters(exclude_revealed=False))[0] == 2
    assert _counted(engine, VoteFilters(exclude_flagged=False, exclude_revealed=False))[0] == 3
    assert _counted(engine, VoteFilters(modes=["named"])) == (0, 0, 0)
    assert _counted(engine, VoteFilters(corrections_only=True))[0] == 0
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    assert _counted(engine, VoteFilters(since=later)) == (0, 0, 0)
    assert _counted(engine, VoteFilters(until=later)) == (1, 2, 2 * sides_per_battle)
