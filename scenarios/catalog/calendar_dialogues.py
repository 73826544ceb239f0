"""Generated calendar dialogues: the study's kind of requests, with names, dates, times and durations
drawn from a seeded ``random.Random``.

Each dialogue opens with an event on an absolute date. In about 40% of them that first request omits the
year (the study's trap) and the next turn states it ("The current year is 2026."); the others say the year
in the first request. Then four kinds of follow-up, against the calendar as it stands:

* another event, on an absolute date (year implied) or a relative one ("the same day", "the next day",
  "two days later", "the Friday after that");
* a new duration for the last event ("Set the duration to 3 hours.", "Make it 90 minutes long."): the
  same add call with the new duration (an add on the same title, date and time updates);
* a move of the last event ("Make it 6pm instead."): remove it, then add it at the new time, on one line;
* a cancellation of any event ("Cancel the yoga class."): the remove call with its title, date and time.

Times are said in 12-hour ("5PM", "8:30 am") or 24-hour words ("17:00"); durations in words ("half an
hour", "1/2h", "90 minutes", "3 hours") or not at all (the system prompt's default of 30 minutes).
Titles are unique within a dialogue and dates stay inside the stated year (Jan 1 .. Dec 24 + a week).
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from scenarios.base import Turn

YEARS = (2024, 2025, 2026, 2027)
TRAP_SHARE = 0.4
NAMES = ("Fred", "Paul", "Ana", "Maria", "Tom", "Priya", "Kenji", "Lena", "Omar", "Sofia", "Jack", "Chen",
         "Nina", "Diego", "Grace", "Ivan", "Lucy", "Sam", "Yusuf", "Emma")
# (what the user says, the title the call should carry); "{name}" is filled with a name.
ACTIVITIES = (
    ("a meeting with {name}", "Meeting with {name}"), ("lunch with {name}", "Lunch with {name}"),
    ("dinner with {name}", "Dinner with {name}"), ("a call with {name}", "Call with {name}"),
    ("a dentist appointment", "Dentist Appointment"), ("a yoga class", "Yoga Class"),
    ("a rock concert", "Rock Concert"), ("a piano lesson", "Piano Lesson"), ("a haircut", "Haircut"),
    ("a team standup", "Team Standup"), ("a football match", "Football Match"),
    ("a book club", "Book Club"), ("a job interview", "Job Interview"), ("a cooking class", "Cooking Class"),
)
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# (words, minutes); "" says nothing: the default of 30 minutes.
DURATIONS = (("", 30), ("", 30), ("for half an hour", 30), ("1/2h", 30), ("for 90 minutes", 90),
             ("for 3 hours", 180), ("for an hour", 60), ("for 45 minutes", 45), ("for two hours", 120),
             ("2h", 120))
NEW_DURATIONS = ("Set the duration to {words}.", "Make it {words} long.", "It will last {words}.")
DURATION_WORDS = ((30, "half an hour"), (45, "45 minutes"), (60, "an hour"), (90, "90 minutes"),
                  (120, "2 hours"), (180, "3 hours"), (240, "4 hours"))
ADD_PHRASES = ("Add {what} {when}{duration}.", "Schedule {what} {when}{duration}.",
               "Put {what} in my calendar {when}{duration}.", "I have {what} {when}{duration}. Add it.")
CANCEL_PHRASES = ("Cancel the {what}.", "Remove the {what} from my calendar.", "Delete the {what}, please.",
                  "I can't make the {what}, cancel it.")
MOVE_PHRASES = ("Make it {time} instead.", "Move it to {time}.", "Actually, push it to {time}.")


@dataclass(frozen=True, slots=True)
class Event:
    what: str  # as the user says it ("a yoga class")
    title: str
    day: dt.date
    time: tuple[int, int]
    minutes: int

    @property
    def the(self) -> str:
        """"yoga class" for "a yoga class", "lunch with Ana" as it is."""
        return self.what[2:] if self.what.startswith("a ") else self.what

    def add_call(self) -> str:
        return (f'action.add_calendar_entry("{self.title}", date="{self.day.isoformat()}", '
                f'time="{_hhmm(self.time)}", duration={self.minutes})')

    def remove_call(self) -> str:
        return f'action.remove_calendar_entry("{self.title}", "{self.day.isoformat()}", "{_hhmm(self.time)}")'


def _hhmm(time: tuple[int, int]) -> str:
    return f"{time[0]:02d}:{time[1]:02d}"


def _said_time(rng: random.Random, time: tuple[int, int]) -> str:
    hour, minute = time
    if rng.random() < 0.35:
        return _hhmm(time)
    suffix = rng.choice(("PM", "pm", " PM", " pm")) if hour >= 12 else rng.choice(("AM", "am", " am"))
    twelve = hour - 12 if hour > 12 else hour
    return f"{twelve}{suffix}" if minute == 0 else f"{twelve}:{minute:02d}{suffix}"


def _said_date(rng: random.Random, day: dt.date, *, year: bool) -> str:
    month = MONTHS[day.month - 1]
    form = rng.choice((f"{month[:3]} {day.day}", f"{month} {day.day}", f"{day.day} {month}"))
    if year:
        form += f", {day.year}" if not form[0].isdigit() else f" {day.year}"
    return f"on {form}"


class _Dialogue:
    """A dialogue being written: the calendar so far and the turns."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.year = rng.choice(YEARS)
        self.events: list[Event] = []
        self.turns: list[Turn] = []
        self.names = list(NAMES)
        rng.shuffle(self.names)
        self.activities = list(ACTIVITIES)
        rng.shuffle(self.activities)
        self.last: Event | None = None  # what "it" and "the same day" refer to (None after a cancellation)

    def said(self, text: str) -> bool:
        return any(" ".join(t.user.lower().split()) == " ".join(text.lower().split()) for t in self.turns)

    def new_event(self, day: dt.date) -> Event:
        what, title = self.activities.pop()
        if "{name}" in what:
            name = self.names.pop()
            what, title = what.format(name=name), title.format(name=name)
        time = (self.rng.randint(7, 21), self.rng.choice((0, 0, 0, 30, 15, 45)))
        taken = {(e.day, e.time) for e in self.events}
        while (day, time) in taken:
            time = ((time[0] + 1 - 7) % 15 + 7, time[1])
        return Event(what, title, day, time, 30)

    def open(self) -> None:
        day = dt.date(self.year, self.rng.randint(1, 11), self.rng.randint(1, 24))
        event = self.new_event(day)
        words, minutes = self.rng.choice(DURATIONS)
        event = replace(event, minutes=minutes)
        trap = self.rng.random() < TRAP_SHARE
        when = f"{_said_date(self.rng, day, year=not trap)} at {_said_time(self.rng, event.time)}"
        text = self.rng.choice(ADD_PHRASES).format(what=event.what, when=when, duration=_duration(words))
        self.events.append(event)
        self.last = event
        self.turns.append(Turn(text, event.add_call(), assumes=("year",) if trap else ()))
        if trap:
            self.turns.append(Turn(f"The current year is {self.year}.", event.add_call(), kind="correction"))

    def add(self) -> bool:
        last = self.last
        if last is not None and self.rng.random() < 0.6:
            offset, when_day = self.rng.choice(((0, "on the same day"), (1, "on the next day"),
                                                (2, "two days later"), (-1, "")))
            if offset < 0:
                target = self.rng.randrange(7)
                offset = (target - last.day.weekday()) % 7 or 7
                when_day = f"on the {WEEKDAYS[target]} after that"
            day = last.day + dt.timedelta(days=offset)
        else:
            day = dt.date(self.year, self.rng.randint(1, 11), self.rng.randint(1, 24))
            when_day = _said_date(self.rng, day, year=False)
        if not self.activities or not self.names:
            return False
        event = self.new_event(day)
        words, minutes = self.rng.choice(DURATIONS)
        event = replace(event, minutes=minutes)
        when = f"{when_day} at {_said_time(self.rng, event.time)}"
        text = self.rng.choice(ADD_PHRASES).format(what=event.what, when=when, duration=_duration(words))
        if self.said(text):
            return False
        self.events.append(event)
        self.last = event
        self.turns.append(Turn(text, event.add_call()))
        return True

    def _swap(self, old: Event, new: Event) -> None:
        self.events[self.events.index(old)] = new
        self.last = new

    def resize(self) -> bool:
        last = self.last
        if last is None:
            return False
        minutes, words = self.rng.choice([d for d in DURATION_WORDS if d[0] != last.minutes])
        text = self.rng.choice(NEW_DURATIONS).format(words=words)
        if self.said(text):
            return False
        self._swap(last, replace(last, minutes=minutes))
        self.turns.append(Turn(text, replace(last, minutes=minutes).add_call()))
        return True

    def move(self) -> bool:
        last = self.last
        if last is None:
            return False
        taken = {(e.day, e.time) for e in self.events}
        hour = self.rng.choice([h for h in range(7, 22) if h != last.time[0]])
        time = (hour, 0)
        if (last.day, time) in taken:
            return False
        said = _said_time(self.rng, time)
        text = self.rng.choice(MOVE_PHRASES).format(time=said)
        if self.said(text):
            return False
        moved = replace(last, time=time)
        self.turns.append(Turn(text, f"{last.remove_call()}; {moved.add_call()}"))
        self._swap(last, moved)
        return True

    def cancel(self) -> bool:
        if len(self.events) < 2:
            return False
        event = self.rng.choice(self.events[:-1] if self.rng.random() < 0.7 else self.events)
        text = self.rng.choice(CANCEL_PHRASES).format(what=event.the)
        if self.said(text):
            return False
        self.events.remove(event)
        if event is self.last:
            self.last = None
        self.turns.append(Turn(text, event.remove_call()))
        return True


def _duration(words: str) -> str:
    if not words:
        return ""
    return f". {words}" if words[0].isdigit() else f" {words}"


def generate(rng: random.Random) -> tuple[Turn, ...]:
    """One calendar dialogue of 4 to 7 turns."""
    dialogue = _Dialogue(rng)
    dialogue.open()
    length = rng.randint(4, 7)
    steps: tuple[tuple[Callable[[], bool], float], ...] = (
        (dialogue.add, 0.45), (dialogue.resize, 0.2), (dialogue.move, 0.15), (dialogue.cancel, 0.2))
    tries = 0
    while len(dialogue.turns) < length and tries < 50:
        tries += 1
        step = rng.choices([s for s, _ in steps], weights=[w for _, w in steps])[0]
        step()
    return tuple(dialogue.turns)
