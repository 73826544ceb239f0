"""Visitor limits and the messages that explain them. Counts come from the database (so they hold across
reloads and tabs); this module only decides and words the answer. Each answer is a :class:`Refusal`:
the visitor's words, which also know the limit they come from (what ``webapp.metrics`` counts)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

from settings import Settings

Limit = Literal[
    "message_chars", "turns_per_battle", "retries_per_side", "battles_per_hour", "battles_per_hour_address",
    "generations_per_minute", "generations_per_minute_address", "one_turn_in_flight", "in_flight_address",
    "model_queue", "votes_per_day", "votes_per_day_address",
]
LIMITS: tuple[Limit, ...] = get_args(Limit)


class Refusal(str):
    """A limit's answer: the words for the visitor (it is a ``str``), and ``limit``, which one it is."""

    limit: Limit

    def __new__(cls, words: str, limit: Limit) -> Refusal:
        refusal = super().__new__(cls, words)
        refusal.limit = limit
        return refusal


def message_problem(text: str, *, settings: Settings) -> str | None:
    """Why a message cannot be sent (empty, or too long: a :class:`Refusal`), or None."""
    if not text.strip():
        return "Type a message first."
    if len(text) > settings.max_message_chars:
        return Refusal(
            f"Your message is {len(text):,} characters long; the limit is "
            f"{settings.max_message_chars:,}. Please shorten it.", "message_chars"
        )
    return None


def turns_problem(turns_so_far: int, *, settings: Settings, mode: str = "anonymous") -> Refusal | None:
    """The turn limit, worded for the mode: a single-model chat has no vote to ask for."""
    if turns_so_far < settings.max_turns_per_battle:
        return None
    head = f"This {'chat' if mode == 'direct' else 'battle'} has reached its limit of "
    head += f"{settings.max_turns_per_battle} turns. "
    if mode == "direct":
        return Refusal(head + "Press *New chat* to start another.", "turns_per_battle")
    return Refusal(head + "Vote (or skip it), then start a new battle.", "turns_per_battle")


def battles_problem(mine: int, address: int, *, settings: Settings) -> Refusal | None:
    """Battles started in the last hour by this visitor and from this address (a few times as many)."""
    limit = settings.battles_per_visitor_per_hour
    if mine >= limit:
        return Refusal(
            f"You have started {mine} battles in the last hour (the limit is {limit}). "
            "Please come back a little later.", "battles_per_hour"
        )
    if address >= limit * settings.address_limit_factor:
        return Refusal("Many battles were started from your network in the last hour. Please come back "
                       "later.", "battles_per_hour_address")
    return None


def rate_problem(mine: int, address: int, *, planned: int, settings: Settings) -> Refusal | None:
    """Generations started in the last minute (every side, every retry, finished or cut short) plus the
    ``planned`` ones, per visitor and per address hash."""
    limit = settings.generations_per_minute
    if mine + planned > limit:
        return _visitor_rate_words(mine, settings)
    if address + planned > limit * settings.address_limit_factor:
        return NETWORK_RATE
    return None


def _visitor_rate_words(mine: int, settings: Settings) -> Refusal:
    return Refusal(
        f"Slow down: {mine} replies were generated for you in the last minute (the limit is "
        f"{settings.generations_per_minute}, each side and each retry counts). Wait a moment and try again.",
        "generations_per_minute",
    )


NETWORK_RATE = Refusal("Slow down: many replies were generated for your network in the last minute. Try "
                       "again soon.", "generations_per_minute_address")
NETWORK_IN_FLIGHT = Refusal("Many replies are being generated for your network right now. Try again in a "
                            "moment.", "in_flight_address")


def in_flight_problem(flying: int, *, planned: int, settings: Settings) -> Refusal | None:
    """Generations in flight from this address (every visitor, every server process) plus ``planned``."""
    if flying + planned > settings.generations_in_flight_per_address:
        return NETWORK_IN_FLIGHT
    return None


def ledger_refusal(reason: str, count: int, *, settings: Settings) -> Refusal:
    """The words for a refusal of the generation ledger (``db.generations.GenerationRefused``)."""
    words = {"busy": BUSY, "rate_address": NETWORK_RATE, "in_flight_address": NETWORK_IN_FLIGHT}
    return words.get(reason) or _visitor_rate_words(count, settings)


def votes_problem(mine: int, address: int, *, settings: Settings) -> Refusal | None:
    """The optional daily vote cap (``ARENA_VOTES_PER_VISITOR_PER_DAY``; 0: none): votes cast since
    midnight UTC by this visitor and from this address (a few times as many)."""
    cap = settings.votes_per_visitor_per_day
    if not cap:
        return None
    if mine >= cap:
        return Refusal(
            f"You have cast {mine} votes today, the most a visitor may cast in a day ({cap}). Voting opens "
            "again at midnight UTC; you can still chat, correct the models or skip this battle.",
            "votes_per_day",
        )
    if address >= cap * settings.address_limit_factor:
        return Refusal("Many votes were cast from your network today. Voting opens again at midnight UTC.",
                       "votes_per_day_address")
    return None


def retries_problem(generations_on_side: int, *, settings: Settings) -> Refusal | None:
    """A side may regenerate, but not without end: at most twice the turn limit of replies per side."""
    cap = 2 * settings.max_turns_per_battle
    if generations_on_side >= cap:
        return Refusal(f"This side has generated {generations_on_side} replies, the most a battle allows "
                       f"({cap}).", "retries_per_side")
    return None


ARENA_BUSY = Refusal("The arena is busy right now: try again in a minute.", "model_queue")


def line_problem(lengths: dict[str, int], slugs: Iterable[str], *, settings: Settings) -> Refusal | None:
    """The arena is busy when a model this turn needs has a full line."""
    if any(lengths.get(slug, 0) >= settings.model_queue_limit for slug in slugs):
        return ARENA_BUSY
    return None


def line_notice(ahead: int) -> str:
    """What a visitor reads while their request waits for a model."""
    return f"Waiting in line: {ahead} request{'s' if ahead != 1 else ''} ahead of you for this model."


BUSY = Refusal("A reply is still being generated for you (in this or another tab). Wait for it to finish.",
               "one_turn_in_flight")
