"""Typed errors of ``db``. Every refusal leaves the database exactly as it was."""

from __future__ import annotations

from typing import Literal

VoteRefusal = Literal["already_voted", "closed", "revealed", "not_ready", "single_side", "not_owner",
                      "daily_cap", "address_cap"]


class DBError(Exception):
    """Base class of everything ``db`` raises on purpose."""


class NotFound(DBError, LookupError):
    """An id or slug that does not exist."""


class InvalidInput(DBError, ValueError):
    """Empty or oversize text, an unknown enum value, an inconsistent request."""


class BattleClosed(DBError):
    """The battle is no longer open (voted, abandoned or flagged): nothing more can be appended."""

    def __init__(self, battle_id: str, status: str) -> None:
        super().__init__(f"battle {battle_id} is {status}, not open")
        self.battle_id = battle_id
        self.status = status


class VoteRefused(DBError):
    """A vote that cannot be recorded; ``reason`` is machine-readable, the message is for people.

    Reasons: ``already_voted`` (one vote per battle), ``closed`` (abandoned or flagged), ``revealed``
    (identities shown before the vote and the caller did not accept an uncounted vote), ``not_ready``
    (a side has no reply yet), ``single_side`` (a one-model chat has nothing to compare), ``not_owner``
    (another visitor's battle), ``daily_cap`` (the voter has cast the day's allowance, see
    :func:`db.actions.votes.record_vote`), ``address_cap`` (everyone from the voter's address has cast the
    address's daily allowance).
    """

    def __init__(self, reason: VoteRefusal, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason: VoteRefusal = reason
