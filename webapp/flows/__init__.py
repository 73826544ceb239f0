"""One module per visitor action on a battle, each the page's only door for that request.

``open_battle`` (pickers' choices, the battle a tab shows, starting one), ``send_turn`` (a message to A,
B or both, a side's retry, streaming and storing the replies), ``vote``, ``judge`` (a person's verdict on
a correction) and ``skip`` (leave without a vote). Each takes the run's ``webapp.context.Context``,
writes (and commits) through ``db`` before the page confirms anything, and answers in ``Feedback`` or
``Refused`` words for the visitor.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Feedback:
    """What the page tells the visitor after an action (kind: success | info | warning | error)."""

    kind: str
    text: str


class Refused(Exception):
    """An action the database (or the pool) refused; the message is for the visitor."""
