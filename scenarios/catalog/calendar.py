"""The study's calendar scenario: the API, its state, its sentences and the verbatim dialogue of
``seed-experiment.md`` (what makes results comparable). Generated dialogues: ``calendar_dialogues``."""

from __future__ import annotations

from scenarios.api import Api, Effect, Function, Param
from scenarios.base import Scenario, Turn
from scenarios.catalog.calendar_dialogues import generate
from scenarios.corrections import Phrasebook
from scenarios.fields import DateValue
from scenarios.premade import load_premade
from scenarios.state import State

ADD = "add_calendar_entry"
REMOVE = "remove_calendar_entry"
DEFAULT_DURATION = 30.0  # minutes, from the system prompt

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

_SLOT = ("title", "date", "time")
API = Api(
    namespace="action",
    functions=(
        Function(ADD, (Param("title", "title"), Param("date", "date"), Param("time", "time"),
                       Param("duration", "minutes", default=DEFAULT_DURATION)),
                 Effect("upsert", "entries", _SLOT),
                 doc="adds an entry; the same title, date and time updates it (the study's turn 4)"),
        Function(REMOVE, (Param("title", "title"), Param("date", "date"), Param("time", "time")),
                 Effect("delete", "entries", _SLOT), doc="removes the entry with that title, date and time"),
    ),
    aliases={
        "name": "title", "event": "title", "event_name": "title", "summary": "title", "subject": "title",
        "description": "title", "day": "date", "event_date": "date", "start_date": "date",
        "start_time": "time", "start": "time", "hour": "time", "duration_minutes": "duration",
        "length": "duration", "minutes": "duration",
    },
)

PHRASES = Phrasebook(
    hints={
        "missing_argument:duration": "Duration is required.",
        f"missing_argument@{REMOVE}": "API requires three params.",
        "bad_format:date": "Respect the date format.",
        "bad_format:time": "Time in 24h format.",
        "bad_format:duration": "Duration in minutes, as a number.",
        "bad_format:title": "The title must be a quoted string.",
        f"bad_format:params@{REMOVE}": "API requires three params.",
        f"bad_format@{REMOVE}": "API requires three params.",
        "wrong_title": "It's the wrong event now.",
    },
    fixes={
        "bad_format:date": "Date in YYYY-MM-DD format.",
        f"wrong_function@{REMOVE}": f"Use {REMOVE} to cancel.",
        "wrong_title": 'The event is "{value}".',
    },
)


def overlaps(api: Api, state: State) -> int:
    """Pairs of calendar entries on the same day (years equal or unknown) whose times intersect."""
    spans = []
    for record in state:
        day, start, minutes = record.get("date"), record.get("time"), record.get("duration")
        if isinstance(day, DateValue) and isinstance(start, tuple) and isinstance(minutes, float):
            spans.append((day, 60 * int(start[0]) + int(start[1]), max(minutes, 1.0)))
    count = 0
    for i, (day_a, a, length_a) in enumerate(spans):
        for day_b, b, length_b in spans[i + 1:]:
            years = day_a.year is None or day_b.year is None or day_a.year == day_b.year
            if years and (day_a.month, day_a.day) == (day_b.month, day_b.day) \
                    and a < b + length_b and b < a + length_a:
                count += 1
    return count


TURNS = (
    Turn(
        user="Add a meeting with Fred on Nov 11 at 5PM",
        expected='action.add_calendar_entry("Meeting with Fred", date="2023-11-11", time="17:00", duration=30)',  # noqa: E501
        assumes=("year",),
    ),
    Turn(
        user="The current year is 2024.",
        expected='action.add_calendar_entry("Meeting with Fred", date="2024-11-11", time="17:00", duration=30)',  # noqa: E501
        kind="correction",
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
    api=API,
    phrases=PHRASES,
    year_from_dialogue=True,
    conflicts=overlaps,
    generator=generate,
    premade=tuple(load_premade()),
)
