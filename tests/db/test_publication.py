"""No public figure moves while a battle is open (issue 39), on SQLite and PostgreSQL.

Probe of the old code (at 0836aef): a visitor opened an anonymous battle, sent a turn to Model A only
(a reply the grader labelled, a correction, a verdict) and watched first-try accuracy, the fix counts
and the Fixing board's figures of that model move, then voted knowing which model sat on side A. Every
leaderboard query now shares one predicate (``db.vote_filters.VoteFilters.published``): a battle counts
once it is closed (voted, skipped or swept as stale) and, with ``closed_before`` (the public pages pass
now less the publication delay), only if it closed before then.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine

from db import actions, boards
from db.boards import fixing, side_totals, vote_features
from db.views import BattleView
from tests.db.conftest import Arena

VOTE_FIGURES = ("pairwise_counts", "counted_votes", "vote_style_features")


def _plain(value: Any) -> Any:
    """A result as plain lists and dicts, so that two reads compare with ``==``."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _figures(engine: Engine, **filters: Any) -> dict[str, Any]:
    """Every public figure of the leaderboard's queries under the same filters."""
    reads: dict[str, Any] = {
        "pairwise_counts": boards.pairwise_counts(engine, **filters),
        "counted_votes": vote_features.counted_votes(engine, **filters),
        "vote_style_features": vote_features.vote_style_features(engine, **filters),
        "fix_counts": boards.fix_counts(engine, **filters),
        "first_try_counts": boards.first_try_counts(engine, **filters),
        "fixing_totals": side_totals.fixing_totals(engine, **filters),
        "judge_table": fixing.judge_table(engine, **filters),
        "graded_replies": fixing.graded_replies(engine, **filters),
        "reply_flags": fixing.reply_flags(engine, **filters),
    }
    for judge in ("person", "grader"):
        reads[f"fix_outcomes/{judge}"] = fixing.fix_outcomes(engine, judge=judge, **filters)
        reads[f"correction_links/{judge}"] = fixing.correction_links(engine, judge=judge, **filters)
        reads[f"turns_to_fix_counts/{judge}"] = fixing.turns_to_fix_counts(engine, judge=judge, **filters)
    return {name: _plain(value) for name, value in reads.items()}


VIEWS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "anonymous": {"modes": ("anonymous",)},
    "everything": {"modes": None, "exclude_flagged": False},  # the widest view the queries allow
}


def _every_view(engine: Engine, **extra: Any) -> dict[str, dict[str, Any]]:
    return {view: _figures(engine, **filters, **extra) for view, filters in VIEWS.items()}


def _turn_to_model_a(engine: Engine, battle: BattleView) -> None:
    """The probe's turn: side A only; a graded reply, a correction the person judges, the graded answer."""
    actions.append_message(engine, battle_id=battle.id, side="a", kind="request", content="Add a meeting")
    actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="Sorry!\ncall()",
                           grader_label="partial", grader_mistakes=["chatty"])
    correction = actions.record_correction(engine, battle_id=battle.id, side="a", content="Just the call.")
    actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="call()",
                           grader_label="correct", grader_mistakes=[])
    actions.set_correction_outcome(engine, correction_id=correction.id, outcome="fixed", judged_by="person")


def _close(engine: Engine, battle: BattleView, how: str) -> dt.datetime:
    """Close the battle as a visitor or the sweeper does; returns its closing time."""
    if how == "vote":
        for side in ("b",):  # a vote needs a reply on each side
            actions.append_message(engine, battle_id=battle.id, side=side, kind="request", content="Add it")
            actions.append_message(engine, battle_id=battle.id, side=side, kind="reply", content="call()",
                                   grader_label="correct", grader_mistakes=[])
        actions.record_vote(engine, battle_id=battle.id, choice="a", visitor_id=battle.visitor_id)
    elif how == "skip":
        actions.abandon_battle(engine, battle_id=battle.id, visitor_id=battle.visitor_id)
    else:
        later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
        assert actions.abandon_stale_battles(engine, older_than=later) == 1
    closed = actions.get_battle(engine, battle_id=battle.id)
    assert closed.status == {"vote": "voted"}.get(how, "abandoned") and closed.closed_at is not None
    return closed.closed_at


@pytest.mark.parametrize("how", ["vote", "skip", "sweep"])
def test_an_open_battle_moves_no_public_figure(arena: Arena, engine: Engine, how: str) -> None:
    visitor = actions.get_or_create_visitor(engine, anon_id="visitor-1")
    empty = _every_view(engine)
    battle = arena.battle("m1", "m2", visitor_id=visitor.id, replies=False)
    _turn_to_model_a(engine, battle)
    assert _every_view(engine) == empty, "the open battle's side A shows on no board"
    closed_at = _close(engine, battle, how)
    assert _every_view(engine, closed_before=closed_at) == empty, "closed at the cutoff: not before it"
    assert _every_view(engine, closed_before=closed_at - dt.timedelta(hours=24)) == empty
    published = _every_view(engine, closed_before=closed_at + dt.timedelta(seconds=1))
    assert published == _every_view(engine), "past the cutoff: as without one"
    moved = {name for name, value in published["defaults"].items() if value != empty["defaults"][name]}
    expected = set(empty["defaults"]) - (set() if how == "vote" else set(VOTE_FIGURES))
    assert moved == expected
    after = closed_at + dt.timedelta(seconds=1)
    first_try = boards.first_try_counts(engine, closed_before=after)
    b_replied = int(how == "vote")  # m1's first try was partial; m2's (side B, before the vote) correct
    assert (first_try.trials.tolist(), first_try.successes.tolist()) == ([1, b_replied, 0], [0, b_replied, 0])
    fixes = boards.fix_counts(engine, closed_before=after)
    assert (fixes.trials.tolist(), fixes.successes.tolist()) == ([1, 0, 0], [1, 0, 0])
    assert boards.pairwise_counts(engine, closed_before=after).total == b_replied


def test_a_late_label_or_verdict_keeps_the_closing_time(arena: Arena, engine: Engine) -> None:
    """The roll-up recomputed after the close (a grader's late label) stays closed: it neither leaves
    the boards nor comes back as open."""
    battle = arena.battle("m1", "m2", replies=False)
    _turn_to_model_a(engine, battle)
    first = actions.get_battle(engine, battle_id=battle.id).sides["a"].replies[0]
    closed_at = _close(engine, battle, "skip")
    after = closed_at + dt.timedelta(seconds=1)
    assert boards.first_try_counts(engine, closed_before=after).successes.tolist() == [0, 0, 0]
    actions.set_grader_label(engine, message_id=first.id, label="correct", mistakes=[])
    assert boards.first_try_counts(engine, closed_before=after).successes.tolist() == [1, 0, 0]
    assert boards.first_try_counts(engine, closed_before=closed_at).trials.tolist() == [0, 0, 0]


def test_a_battle_flagged_while_open_stays_out_even_of_the_widest_view(arena: Arena, engine: Engine) -> None:
    empty = _every_view(engine)
    battle = arena.battle("m1", "m2", replies=False)
    _turn_to_model_a(engine, battle)
    actions.flag_battle(engine, battle_id=battle.id, reason="spam")
    assert _every_view(engine) == empty
    assert actions.unflag_battle(engine, battle_id=battle.id).status == "open"
    assert _every_view(engine) == empty, "unflagged, it is open again: still nothing"
    _close(engine, battle, "skip")
    assert _every_view(engine) != empty


def test_automatic_arena_runs_count_at_once(engine: Engine, arena: Arena) -> None:
    """Mode ``auto`` has no visitor to unmask anything to: the operator's runs count as stored."""
    auto = actions.open_battle(engine, mode="auto", scenario="calendar", contestant_a="m2")
    actions.append_message(engine, battle_id=auto.id, side="a", kind="request", content="x")
    actions.append_message(engine, battle_id=auto.id, side="a", kind="reply", content="y",
                           grader_label="correct")
    assert fixing.reply_flags(engine, modes=("auto",)).graded == (0, 1, 0)
    assert fixing.auto_battle_ids(engine) == [auto.id]
