"""The study's calendar scenario, verbatim from ``seed-experiment.md`` (what makes results comparable)."""

from __future__ import annotations

from scenarios.base import Scenario, Turn

SYSTEM_PROMPT = (
    "You are a helpful vocal assistant on a mobile device. Your job is to translate user requests into "
    "API calls using this Python API:\n"
    "```\n"
    'action.add_calendar_entry(title, date="YYYY-MM-DD", time="HH:MM", duration=m) # duration in minutes\n'
    "action.remove_calendar_entry(title, date, time)\n"
    "```\n"
    "You can use 30 minutes as the default duration for new events. Respond to every request with a "
    "single line of executable code."
)

TURNS = (
    Turn(
        user="Add a meeting with Fred on Nov 11 at 5PM",
        expected='action.add_calendar_entry("Meeting with Fred", date="2023-11-11", time="17:00", duration=30)',  # noqa: E501
        year_known=False,
    ),
    Turn(
        user="The current year is 2024.",
        expected='action.add_calendar_entry("Meeting with Fred", date="2024-11-11", time="17:00", duration=30)',  # noqa: E501
        is_correction=True,
    ),
    Turn(
        user="I'm going to a rock concert in the evening of the same day at 8pm. Add a calendar entry for that.",  # noqa: E501
        expected='action.add_calendar_entry("Rock Concert", date="2024-11-11", time="20:00", duration=30)',
    ),
    Turn(
        user="Set the duration to 3 hours.",
        expected='action.add_calendar_entry("Rock Concert", date="2024-11-11", time="20:00", duration=60*3)',
    ),
    Turn(
        user="Add a meeting with Paul on the next day at 8am. 1/2h.",
        expected='action.add_calendar_entry("Meeting with Paul", date="2024-11-12", time="08:00", duration=30)',  # noqa: E501
    ),
    Turn(
        user="Cancel the meeting with Fred.",
        expected='action.remove_calendar_entry("Meeting with Fred", "2024-11-11", "17:00")',
    ),
)

CALENDAR = Scenario(
    slug="calendar",
    title="Calendar API calls",
    system_prompt=SYSTEM_PROMPT,
    turns=TURNS,
    description="Translate six spoken requests into calendar API calls; the first one omits the year.",
)

FREE_CHAT = Scenario(
    slug="free-chat",
    title="Free chat",
    system_prompt="You are a helpful assistant.",
    description="Talk about anything; corrections and votes are yours alone (no grader).",
)
