"""Visitor limits and the messages that explain them. Counts come from the database (so they hold across
reloads and tabs); this module only decides and words the answer."""

from __future__ import annotations

from settings import Settings


def message_problem(text: str, *, settings: Settings) -> str | None:
    """Why a message cannot be sent (empty or too long), or None."""
    if not text.strip():
        return "Type a message first."
    if len(text) > settings.max_message_chars:
        return (
            f"Your message is {len(text):,} characters long; the limit is "
            f"{settings.max_message_chars:,}. Please shorten it."
        )
    return None


def turns_problem(turns_so_far: int, *, settings: Settings) -> str | None:
    if turns_so_far >= settings.max_turns_per_battle:
        return (
            f"This battle has reached its limit of {settings.max_turns_per_battle} turns. "
            "Vote, then start a new battle."
        )
    return None


def battles_problem(battles_last_hour: int, *, settings: Settings) -> str | None:
    if battles_last_hour >= settings.battles_per_visitor_per_hour:
        return (
            f"You have started {battles_last_hour} battles in the last hour (the limit is "
            f"{settings.battles_per_visitor_per_hour}). Please come back a little later."
        )
    return None


def rate_problem(messages_last_minute: int, *, settings: Settings) -> str | None:
    if messages_last_minute >= settings.messages_per_minute:
        return (
            f"Slow down: you sent {messages_last_minute} messages in the last minute (the limit is "
            f"{settings.messages_per_minute}). Wait a moment and try again."
        )
    return None
