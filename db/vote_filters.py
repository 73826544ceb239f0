"""The filters, in one value, and the model axis every leaderboard array is indexed by.

``VoteFilters`` is the one filter value of ``db``: the boards (:mod:`db.boards`), the export
(:mod:`db.export`) and the web app's Leaderboard and Dataset pages pass it around. It validates itself
when built and turns into the SQL predicates of the counted votes (:meth:`VoteFilters.vote_conditions`),
of battles (:meth:`VoteFilters.battle_conditions`) and of the battle facts copied into ``side_stats``
(:meth:`VoteFilters.side_conditions`); the export builds its own battle selection from the same value
(``db.export.filters.conditions``). The public board queries keep their keyword arguments (typed by
``VoteFilterArgs`` / ``BattleFilterArgs``; :meth:`VoteFilters.vote_args` and
:meth:`VoteFilters.battle_args` give them from a value) and build one ``VoteFilters`` from them.

Only published battles count, in every one of these predicates (:meth:`VoteFilters.published`): a
visitor's battle counts once it is closed (voted or abandoned) and, when ``closed_before`` is given (the
public pages pass now less ``ARENA_PUBLIC_EXPORT_DELAY_HOURS``, the export's delay), closed before then.
An open anonymous battle therefore moves no public figure: its visitor cannot watch a count change to
learn which model sits on which side before voting. Automatic-arena battles (mode ``auto``) are the
operator's runs, stored whole by ``python -m scenarios run``, and count as soon as they are stored.

Fields: ``scenario`` (one slug or None for all), ``modes`` (None for all modes), ``since``/``until`` (UTC,
half-open ``[since, until)``: the vote time for votes, the battle start for battles, sides and the
export), ``exclude_flagged``, ``corrections_only`` (battles in which someone sent a correction) and
``closed_before``. Votes also take ``exclude_revealed`` (votes cast after identities were shown); the
battle and side predicates leave it and ``corrections_only`` out, as those queries never took them.
``include_open`` is the export's alone (``python -m db export --include-open``): no board counts an open
battle. The defaults are the public leaderboard's (anonymous battles, flagged and revealed left out);
the operator's export starts from ``db.export.EXPORT_DEFAULTS`` (every mode, flagged battles kept).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
from sqlalchemy import ColumnElement, SQLColumnExpression, and_, or_, select
from sqlalchemy.orm import Session

from db.checks import require_aware, require_choice
from db.models import MODES, Battle, Contestant, SideStats, Vote
from db.views import ModelCounts

DEFAULT_MODES: tuple[str, ...] = ("anonymous",)  # the public leaderboard: anonymous battles only
HUMAN_MODES: tuple[str, ...] = ("anonymous", "named", "direct")  # the Fixing board: every human mode


class BattleFilterArgs(TypedDict, total=False):
    """The keyword filters of the battle- and side-level queries (``**filters`` of those functions)."""

    scenario: str | None
    modes: Sequence[str] | None
    since: dt.datetime | None
    until: dt.datetime | None
    exclude_flagged: bool
    closed_before: dt.datetime | None


class VoteFilterArgs(BattleFilterArgs, total=False):
    """The keyword filters of the counted-vote queries: the battle ones and two facts of the vote."""

    corrections_only: bool
    exclude_revealed: bool


@dataclass(frozen=True)
class VoteFilters:
    """Which votes (battles, sides) a board counts and which battles an export holds; invalid values
    raise ``InvalidInput``."""

    scenario: str | None = None
    modes: Sequence[str] | None = DEFAULT_MODES  # stored as a tuple
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    corrections_only: bool = False
    exclude_flagged: bool = True
    exclude_revealed: bool = True
    closed_before: dt.datetime | None = None  # the publication delay's cutoff (None: closed is enough)
    include_open: bool = False  # the export only: also battles still open (no board ever counts them)

    def __post_init__(self) -> None:
        if self.modes is not None:
            object.__setattr__(self, "modes", tuple(self.modes))
        for mode in self.modes or ():
            require_choice(mode, MODES, what="mode")
        require_aware(self.since, what="since")
        require_aware(self.until, what="until")
        require_aware(self.closed_before, what="closed_before")

    def published(
        self, closed: SQLColumnExpression[dt.datetime | None], mode: SQLColumnExpression[str] | None = None
    ) -> ColumnElement[bool]:
        """THE publication predicate every leaderboard query shares: closed (``closed`` is the closing
        time column, NULL while open) and, with ``closed_before``, closed before it. With ``mode``, an
        automatic-arena battle counts without either (it has no visitor to unmask anything to)."""
        rule: ColumnElement[bool] = closed.is_not(None)
        if self.closed_before is not None:
            rule = and_(rule, closed < self.closed_before)
        return rule if mode is None else or_(mode == "auto", rule)

    @classmethod
    def of(cls, args: BattleFilterArgs, *, modes: Sequence[str] | None = DEFAULT_MODES,
           votes: bool = False) -> VoteFilters:
        """The filters a function's keyword arguments give; ``modes`` is that function's default.

        Only a counted-vote query (``votes``) takes ``VoteFilterArgs``: a battle- or side-level one
        refuses a vote filter (as Python refuses an unknown keyword) instead of silently ignoring it.
        """
        allowed = VoteFilterArgs.__annotations__.keys() if votes else BattleFilterArgs.__annotations__.keys()
        for name in args:
            if name not in allowed:
                raise TypeError(f"unexpected keyword argument {name!r}")
        given: BattleFilterArgs = {"modes": modes, **args}
        return cls(**given)

    def battle_args(self) -> BattleFilterArgs:
        """These filters as the keyword arguments of a battle- or side-level board query."""
        return {"scenario": self.scenario, "modes": self.modes, "since": self.since, "until": self.until,
                "exclude_flagged": self.exclude_flagged, "closed_before": self.closed_before}

    def vote_args(self) -> VoteFilterArgs:
        """These filters as the keyword arguments of a counted-vote board query."""
        return {**self.battle_args(), "corrections_only": self.corrections_only,
                "exclude_revealed": self.exclude_revealed}

    def window(self, column: SQLColumnExpression[dt.datetime]) -> list[ColumnElement[bool]]:
        """``since <= column < until``, each bound only when given."""
        clauses: list[ColumnElement[bool]] = []
        if self.since is not None:
            clauses.append(column >= self.since)
        if self.until is not None:
            clauses.append(column < self.until)
        return clauses

    def vote_conditions(self) -> list[ColumnElement[bool]]:
        """The counted-vote predicate (``pairwise_counts`` and the Votes board's per-vote reads)."""
        # ``== False`` (not ``IS``) so that the partial index ix_votes_counted_pairs matches the predicate.
        not_flagged = Vote.flagged == False  # noqa: E712
        where = self._fact_conditions(Vote.created_at, Vote.scenario, Vote.mode, not_flagged)
        where.append(self.published(Vote.created_at))  # a vote closes its battle: its time is the close
        if self.corrections_only:
            where.append(Vote.with_corrections.is_(True))
        if self.exclude_revealed:
            where.append(Vote.revealed == False)  # noqa: E712
        return where

    def battle_conditions(self) -> list[ColumnElement[bool]]:
        """The predicate on ``battles`` (the time is the battle's start)."""
        not_flagged = Battle.status != "flagged"
        where = self._fact_conditions(Battle.created_at, Battle.scenario, Battle.mode, not_flagged)
        return [*where, self.published(Battle.closed_at, Battle.mode)]

    def side_conditions(self) -> list[ColumnElement[bool]]:
        """:meth:`battle_conditions` on the battle facts copied into ``side_stats``."""
        flagged = SideStats.flagged.is_(False)
        where = self._fact_conditions(SideStats.started_at, SideStats.scenario, SideStats.mode, flagged)
        return [*where, self.published(SideStats.closed_at, SideStats.mode)]

    def _fact_conditions(
        self,
        started: SQLColumnExpression[dt.datetime],
        scenario: SQLColumnExpression[str],
        mode: SQLColumnExpression[str],
        not_flagged: ColumnElement[bool],
    ) -> list[ColumnElement[bool]]:
        where = self.window(started)
        if self.scenario is not None:
            where.append(scenario == self.scenario)
        if self.modes is not None:
            where.append(mode.in_(list(self.modes)))
        if self.exclude_flagged:
            where.append(not_flagged)
        return where


def model_index(session: Session, models: Sequence[str] | None) -> tuple[tuple[str, ...], dict[int, int]]:
    """The slug order of the arrays and a map contestant id -> row index (ids outside it are dropped).

    By default every contestant ordered by slug, so the arrays of one page line up."""
    rows = session.execute(select(Contestant.id, Contestant.slug).order_by(Contestant.slug)).all()
    if models is None:
        slugs = tuple(slug for _, slug in rows)
    else:
        slugs = tuple(models)
        if len(set(slugs)) != len(slugs):
            raise ValueError("models contains duplicates")
    position = {slug: i for i, slug in enumerate(slugs)}
    return slugs, {cid: position[slug] for cid, slug in rows if slug in position}


def model_counts(
    session: Session, models: Sequence[str] | None, rows: Sequence[Any], success: str
) -> ModelCounts:
    """Successes out of trials per model from ``(contestant id, label, count)`` rows."""
    slugs, index = model_index(session, models)
    successes = np.zeros(len(slugs), dtype=np.int64)
    trials = np.zeros(len(slugs), dtype=np.int64)
    for contestant_id, label, count in rows:
        i = index.get(contestant_id)
        if i is None:
            continue
        trials[i] += count
        if label == success:
            successes[i] += count
    return ModelCounts(models=slugs, successes=successes, trials=trials)
