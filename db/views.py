"""Plain, frozen values ``db``'s functions return: no ORM objects (and no open session) leak out of ``db``.

The count types hold plain numpy arrays so that ``ranking`` consumes them without importing ``db``
(and ``db`` never imports ``ranking``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

Int64Array = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ContestantView:
    id: int
    slug: str
    display_name: str
    family: str
    source: str
    params: dict[str, Any]
    enabled: bool


@dataclass(frozen=True, slots=True)
class VisitorView:
    id: int
    anon_id: str
    address_hash: str | None
    created_at: dt.datetime


@dataclass(frozen=True, slots=True)
class MessageView:
    id: int
    conversation_id: int
    side: str
    position: int
    role: str
    kind: str
    content: str
    created_at: dt.datetime
    first_try: bool = False
    superseded: bool = False
    ttft_ms: float | None = None
    total_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    grader_label: str | None = None
    grader_mistakes: tuple[str, ...] | None = None
    grader_notes: tuple[str, ...] | None = None  # the same mistakes in words


@dataclass(frozen=True, slots=True)
class CorrectionView:
    id: int
    battle_id: str
    side: str
    faulty_message_id: int
    feedback_message_id: int
    next_reply_message_id: int | None
    outcome: str
    judged_by: str | None
    created_at: dt.datetime
    judged_at: dt.datetime | None


@dataclass(frozen=True, slots=True)
class ConversationView:
    id: int
    side: str
    contestant: ContestantView
    system_prompt: str
    params: dict[str, Any]
    messages: tuple[MessageView, ...] = ()
    corrections: tuple[CorrectionView, ...] = ()

    @property
    def replies(self) -> tuple[MessageView, ...]:
        """Replies that stand (retried ones left out)."""
        return tuple(m for m in self.messages if m.kind == "reply" and not m.superseded)


@dataclass(frozen=True, slots=True)
class VoteView:
    id: int
    battle_id: str
    choice: str
    visitor_id: int | None
    created_at: dt.datetime
    revealed: bool
    flagged: bool

    @property
    def counted(self) -> bool:
        """Whether the leaderboard counts it (not revealed before the vote, not flagged)."""
        return not (self.revealed or self.flagged)


@dataclass(frozen=True, slots=True)
class BattleView:
    """A whole battle, enough to render it or resume it after a page reload."""

    id: str
    mode: str
    scenario: str
    status: str
    visitor_id: int | None
    revealed_before_vote: bool
    revealed_at: dt.datetime | None
    flag_reason: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    closed_at: dt.datetime | None
    sides: dict[str, ConversationView] = field(default_factory=dict)
    vote: VoteView | None = None
    dialogue: dict[str, Any] | None = None  # the generated dialogue played (migration 0007), if any

    @property
    def is_open(self) -> bool:
        return self.status == "open"


@dataclass(frozen=True, slots=True)
class PairCounts:
    """Vote counts over model pairs, in the order of ``models``.

    ``wins[i, j]``: battles where i beat j (whatever side each sat on). ``ties`` and ``both_bad`` are
    symmetric. The total number of votes is ``wins.sum() + ties.sum() // 2 + both_bad.sum() // 2`` minus
    the diagonal (always zero: a model never meets itself), see :attr:`total`.
    """

    models: tuple[str, ...]
    wins: Int64Array
    ties: Int64Array
    both_bad: Int64Array

    @property
    def total(self) -> int:
        return int(self.wins.sum() + self.ties.sum() // 2 + self.both_bad.sum() // 2)


@dataclass(frozen=True, slots=True)
class ModelCounts:
    """Per-model successes out of trials, in the order of ``models``.

    For fix counts: ``successes`` = corrections judged fixed, ``trials`` = corrections judged fixed or
    not fixed (``unknown`` is not a trial). For first-try counts: replies labelled ``correct`` out of
    first replies the grader labelled.
    """

    models: tuple[str, ...]
    successes: Int64Array
    trials: Int64Array


@dataclass(frozen=True, slots=True)
class HourCount:
    hour: dt.datetime
    count: int


@dataclass(frozen=True, slots=True)
class LatencyFigures:
    """Generation figures of one contestant over a window (replies with timing only)."""

    model: str
    replies: int
    errors: int
    mean_ttft_ms: float | None
    mean_total_ms: float | None
    max_total_ms: float | None
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class ModerationEventView:
    """One row of the append-only moderation log."""

    id: int
    battle_id: str | None  # a flag or unflag's battle (None for a contestant's enable / disable)
    action: str  # flag | unflag | enable | disable
    reason: str
    admin_session: str
    prior_status: str | None  # the battle's status before a flag or unflag
    created_at: dt.datetime
    contestant: str | None = None  # an enable or disable's contestant slug


@dataclass(frozen=True, slots=True)
class BattleSummaryView:
    """A battle in the admin's list: enough to recognise it and flag it without pasting an id."""

    id: str
    mode: str
    scenario: str
    status: str
    created_at: dt.datetime
    contestant_a: str
    contestant_b: str | None
    first_request: str
    messages: int
    flag_reason: str | None
