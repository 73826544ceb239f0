"""Generated smart home dialogues: lights, thermostats and alarms, drawn from a seeded ``random.Random``.

Each dialogue is 4 to 7 user turns against the home as it stands:

* a light turned on (brightness 100), off (brightness 0), dimmed ("Dim the bedroom to 30%.") or set to
  full or half brightness;
* a thermostat set in degrees Celsius, or made warmer or cooler by a stated step, relative to the value
  the dialogue set earlier ("Make the bedroom 2 degrees warmer.") or to one the request states ("It's 19
  degrees in the office. Make it 2 degrees warmer.");
* a new alarm, its time said in 12-hour or 24-hour words ("6:30 am", "quarter to seven in the morning",
  "18:00"), on a day set ("on weekdays", "on Monday and Thursday", "every day", "on weekends", "every day
  except Sunday", or nothing: every day), with a label or none ("Alarm");
* a change of an alarm set earlier (its days, its label: the same add call, which replaces it), or its
  removal; the alarm named by its label or by its time, never ambiguously.

In about half of them one request, at a random position, is the trap: an alarm whose hour does not say
morning or evening ("Set an alarm for 7."). Any time is accepted there (``assumes=("time",)``) and the
next turn, a correction, says which ("I meant 7 in the evening."): the generator draws the half of the
day, so a model cannot know it. Alarm times are unique (the alarm's key); user texts are unique within a
dialogue, word for word (the grader finds a turn by its words).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from scenarios.base import Turn

TRAP_SHARE = 0.5
ROOMS = ("kitchen", "bedroom", "bathroom", "office", "hallway", "lounge", "nursery")
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
WEEKDAYS = DAYS[:5]
WEEKEND = DAYS[5:]
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
DEFAULT_LABEL = "Alarm"
LABELS = ("Gym", "Pills", "Call Mum", "Water the plants", "Yoga", "School run", "Medicine", "Feed the cat",
          "Bins out", "Standup", "Piano practice", "Laundry", "Dog walk", "Meditation")
TRAP_LABELS = ("Pills", "Call Mum", "Water the plants", "Medicine", "Feed the cat", "Laundry")  # any hour
NUMBER_WORDS = ("twelve", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                "eleven")
# (what the user says, the days); "" says nothing: every day, the system prompt's default.
DAY_SETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("", DAYS), ("every day", DAYS), ("daily", DAYS), ("on weekdays", WEEKDAYS),
    ("every day except the weekend", WEEKDAYS), ("on weekends", WEEKEND), ("at the weekend", WEEKEND),
    ("every day except Sunday", DAYS[:6]),
)
LIGHT_ON = ("Turn on the {room} light.", "Switch on the lights in the {room}.",
            "Lights on in the {room}, please.")
LIGHT_OFF = ("Turn off the {room} light.", "Switch the {room} lights off.", "Lights off in the {room}.")
LIGHT_DIM = ("Dim the {room} to {level}%.", "Set the {room} light to {level} percent.",
             "Put the {room} lights at {level}%.")
LIGHT_FULL = ("Full brightness in the {room}.", "Put the {room} light on full brightness.",
              "Turn the {room} light up to full.")
LIGHT_HALF = ("Half brightness in the {room}.", "Set the {room} light to half brightness.")
HEAT_SET = ("Set the {room} thermostat to {t} degrees.", "Heat the {room} to {t}°C.",
            "I'd like the {room} at {t} degrees.", "Make it {t} degrees in the {room}.")
HEAT_STEP = ("Make the {room} {step} {way}.", "Turn the {room} thermostat {step} {way}.")
HEAT_STATED = ("It's {t} degrees in the {room}. Make it {step} {way}.",
               "The {room} is at {t} degrees; make it {step} {way}, please.")
STEPS = ((0.5, "half a degree"), (1.0, "a degree"), (1.0, "one degree"), (2.0, "two degrees"),
         (2.0, "2 degrees"), (3.0, "3 degrees"))
ALARM_ADD = ("Set an alarm for {time}{days}{label}.", "Add an alarm at {time}{days}{label}.",
             "I need an alarm at {time}{days}{label}.")
LABEL_WORDS = (' called "{label}"', " called {label}", ' labelled "{label}"', " with the label {label}")
ALARM_DAYS = ("Make the {ref} alarm ring {days} instead.", "Change the {ref} alarm to ring {days}.")
ALARM_RENAME = ('Rename the {ref} alarm to "{label}".', 'Call the {ref} alarm "{label}" instead.')
ALARM_REMOVE = ("Delete the {ref} alarm.", "Remove the {ref} alarm.", "Cancel the {ref} alarm, please.",
                "I don't need the {ref} alarm any more.")
TRAP_ADD = ("Set an alarm for {hour}{days}{label}.", "Add an alarm at {hour}{days}{label}.")
TRAP_FIX = ("I meant {hour} in the {half}.", "That's {hour} in the {half}.", "{hour} in the {half}, please.")
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True, slots=True)
class Alarm:
    time: tuple[int, int]
    days: tuple[str, ...]
    label: str

    def add_call(self) -> str:
        days = ", ".join(f'"{d}"' for d in self.days)
        return f'home.add_alarm("{hhmm(self.time)}", days=[{days}], label="{self.label}")'

    def remove_call(self) -> str:
        return f'home.remove_alarm("{hhmm(self.time)}")'


def hhmm(time: tuple[int, int]) -> str:
    return f"{time[0]:02d}:{time[1]:02d}"


def light_call(room: str, on: bool, brightness: int) -> str:
    return f'home.set_light("{room}", on={on}, brightness={brightness})'


def thermostat_call(room: str, celsius: float) -> str:
    return f'home.set_thermostat("{room}", celsius={celsius:g})'


def said_time(rng: random.Random, time: tuple[int, int], *, short: bool = False) -> str:
    """An unambiguous time in a person's words: "18:00", "06:30", "6:30 am", "quarter to seven in the
    morning" (``short``: no words, to name an alarm: "the 6:30 am alarm")."""
    hour, minute = time
    twelve = hour % 12 or 12
    half = "in the morning" if hour < 12 else "in the afternoon" if hour < 17 else "in the evening"
    forms = [hhmm(time)] if hour < 10 or hour > 12 else []  # "11:00" could be either half of the day
    suffix = rng.choice(("am", " am", " AM")) if hour < 12 else rng.choice(("pm", " pm", " PM"))
    forms.append(f"{twelve}{suffix}" if minute == 0 else f"{twelve}:{minute:02d}{suffix}")
    if hour != 12 and not short:
        if minute == 0:
            forms.append(f"{NUMBER_WORDS[twelve % 12]} o'clock {half}")
        elif minute == 30:
            forms.append(f"half past {NUMBER_WORDS[twelve % 12]} {half}")
        elif minute == 15:
            forms.append(f"quarter past {NUMBER_WORDS[twelve % 12]} {half}")
        elif minute == 45 and twelve != 11:
            forms.append(f"quarter to {NUMBER_WORDS[(twelve + 1) % 12]} {half}")
    return rng.choice(forms)


def said_days(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    """A day set in words: a common set, or one to three named days ("on Monday and Thursday")."""
    if rng.random() < 0.6:
        return rng.choice(DAY_SETS)
    picked = sorted(rng.sample(range(7), rng.randint(1, 3)))
    plural = rng.random() < 0.5
    names = [DAY_NAMES[i] + ("s" if plural else "") for i in picked]
    words = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"on {words}", tuple(DAYS[i] for i in picked)


def _words(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(text.lower()))


class _Home:
    """A dialogue being written: the home as the expected replies leave it, and the turns."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lights: dict[str, tuple[bool, int]] = {}
        self.thermostats: dict[str, float] = {}
        self.alarms: list[Alarm] = []
        self.turns: list[Turn] = []
        self.labels = list(LABELS)
        rng.shuffle(self.labels)

    def said(self, text: str) -> bool:
        return any(_words(t.user) == _words(text) for t in self.turns)

    def say(self, text: str, expected: str, *, assumes: tuple[str, ...] = ()) -> bool:
        if self.said(text):
            return False
        self.turns.append(Turn(text, expected, assumes=assumes))
        return True

    # lights
    def light(self) -> bool:
        room = self.rng.choice(ROOMS)
        kind = self.rng.choices(("on", "off", "dim", "full", "half"), weights=(3, 3, 4, 2, 1))[0]
        if kind == "on":
            on, level, text = True, 100, self.rng.choice(LIGHT_ON).format(room=room)
        elif kind == "off":
            on, level, text = False, 0, self.rng.choice(LIGHT_OFF).format(room=room)
        elif kind == "dim":
            level = self.rng.choice((10, 20, 25, 30, 40, 60, 70, 75, 80))
            on, text = True, self.rng.choice(LIGHT_DIM).format(room=room, level=level)
        elif kind == "full":
            on, level, text = True, 100, self.rng.choice(LIGHT_FULL).format(room=room)
        else:
            on, level, text = True, 50, self.rng.choice(LIGHT_HALF).format(room=room)
        if self.lights.get(room) == (on, level) or not self.say(text, light_call(room, on, level)):
            return False
        self.lights[room] = (on, level)
        return True

    # thermostats
    def heat(self) -> bool:
        room = self.rng.choice(ROOMS)
        celsius = self.rng.randint(16, 24) + (0.5 if self.rng.random() < 0.2 else 0.0)
        if self.thermostats.get(room) == celsius:
            return False
        text = self.rng.choice(HEAT_SET).format(room=room, t=f"{celsius:g}")
        if not self.say(text, thermostat_call(room, celsius)):
            return False
        self.thermostats[room] = celsius
        return True

    def heat_step(self) -> bool:
        step, step_words = self.rng.choice(STEPS)
        warmer = self.rng.random() < 0.6
        way = "warmer" if warmer else "cooler"
        if self.thermostats and self.rng.random() < 0.7:
            room = self.rng.choice(sorted(self.thermostats))
            base = self.thermostats[room]
            text = self.rng.choice(HEAT_STEP).format(room=room, step=step_words, way=way)
        else:
            unset = [r for r in ROOMS if r not in self.thermostats]
            if not unset:
                return False
            room = self.rng.choice(unset)
            base = float(self.rng.randint(16, 23))
            text = self.rng.choice(HEAT_STATED).format(room=room, t=f"{base:g}", step=step_words, way=way)
        celsius = base + step if warmer else base - step
        if not 10 <= celsius <= 30 or not self.say(text, thermostat_call(room, celsius)):
            return False
        self.thermostats[room] = celsius
        return True

    # alarms
    def _taken(self) -> set[tuple[int, int]]:
        return {a.time for a in self.alarms}

    def _new_label(self) -> str:
        used = {a.label for a in self.alarms}
        fresh = [label for label in self.labels if label not in used]
        return fresh[0] if fresh else DEFAULT_LABEL

    def _label_words(self, label: str) -> str:
        if label == DEFAULT_LABEL:
            return ""
        words = self.rng.choice(LABEL_WORDS if " " not in label else LABEL_WORDS[::2])  # quoted when long
        return words.format(label=label)

    def add_alarm(self) -> bool:
        time = (self.rng.randint(5, 22), self.rng.choice((0, 0, 15, 30, 30, 45)))
        if time in self._taken():
            return False
        days_words, days = said_days(self.rng)
        label = self._new_label() if self.rng.random() < 0.6 else DEFAULT_LABEL
        alarm = Alarm(time, days, label)
        text = self.rng.choice(ALARM_ADD).format(time=said_time(self.rng, time),
                                                 days=f" {days_words}" if days_words else "",
                                                 label=self._label_words(label))
        if not self.say(text, alarm.add_call()):
            return False
        self.alarms.append(alarm)
        return True

    def _ref(self, alarm: Alarm) -> str:
        """The alarm as the user names it: by its label when no other alarm has it, else by its time."""
        unique = sum(a.label == alarm.label for a in self.alarms) == 1
        if alarm.label != DEFAULT_LABEL and unique and self.rng.random() < 0.6:
            return alarm.label if " " not in alarm.label else f'"{alarm.label}"'
        return said_time(self.rng, alarm.time, short=True)

    def _swap(self, old: Alarm, new: Alarm) -> None:
        self.alarms[self.alarms.index(old)] = new

    def change_days(self) -> bool:
        if not self.alarms:
            return False
        alarm = self.rng.choice(self.alarms)
        days_words, days = said_days(self.rng)
        if not days_words or set(days) == set(alarm.days):
            return False
        changed = replace(alarm, days=days)
        text = self.rng.choice(ALARM_DAYS).format(ref=self._ref(alarm), days=days_words)
        if not self.say(text, changed.add_call()):
            return False
        self._swap(alarm, changed)
        return True

    def rename(self) -> bool:
        if not self.alarms:
            return False
        alarm = self.rng.choice(self.alarms)
        label = self._new_label()
        if label == DEFAULT_LABEL:
            return False
        changed = replace(alarm, label=label)
        text = self.rng.choice(ALARM_RENAME).format(ref=self._ref(alarm), label=label)
        if not self.say(text, changed.add_call()):
            return False
        self._swap(alarm, changed)
        return True

    def remove(self) -> bool:
        if not self.alarms:
            return False
        alarm = self.rng.choice(self.alarms)
        text = self.rng.choice(ALARM_REMOVE).format(ref=self._ref(alarm))
        if not self.say(text, alarm.remove_call()):
            return False
        self.alarms.remove(alarm)
        return True

    def trap(self) -> bool:
        """An alarm at an hour without morning or evening, then the correction that says which."""
        taken = self._taken()
        hours = [h for h in range(5, 11) if (h, 0) not in taken and (h + 12, 0) not in taken]
        if not hours:
            return False
        hour = self.rng.choice(hours)
        evening = self.rng.random() < 0.5
        days_words, days = self.rng.choice(DAY_SETS[:5])  # never a set that hints at the half of the day
        used = {a.label for a in self.alarms}
        labels = [label for label in TRAP_LABELS if label not in used]
        label = self.rng.choice(labels) if labels and self.rng.random() < 0.5 else DEFAULT_LABEL
        alarm = Alarm((hour + 12 if evening else hour, 0), days, label)
        text = self.rng.choice(TRAP_ADD).format(hour=hour, days=f" {days_words}" if days_words else "",
                                                label=self._label_words(label))
        fix = self.rng.choice(TRAP_FIX).format(hour=hour, half="evening" if evening else "morning")
        if self.said(text) or self.said(fix):
            return False
        self.turns.append(Turn(text, alarm.add_call(), assumes=("time",)))
        self.turns.append(Turn(fix[0].upper() + fix[1:], alarm.add_call(), kind="correction"))
        self.alarms.append(alarm)
        return True


def generate(rng: random.Random) -> tuple[Turn, ...]:
    """One smart home dialogue of 4 to 7 turns (the trap and its correction counted)."""
    home = _Home(rng)
    length = rng.randint(4, 7)
    trap_at = rng.randrange(length - 1) if rng.random() < TRAP_SHARE else None
    steps: tuple[tuple[Callable[[], bool], float], ...] = (
        (home.light, 0.25), (home.heat, 0.15), (home.heat_step, 0.1), (home.add_alarm, 0.22),
        (home.change_days, 0.08), (home.rename, 0.07), (home.remove, 0.13))
    tries = 0
    while len(home.turns) < length and tries < 200:
        tries += 1
        if trap_at is not None and len(home.turns) >= trap_at:
            home.trap()  # once: with every trap hour taken (never seen), the dialogue goes without
            trap_at = None
            continue
        step = rng.choices([s for s, _ in steps], weights=[w for _, w in steps])[0]
        step()
    if len(home.turns) < 4:  # pragma: no cover - the steps above never all fail for so long
        raise AssertionError("the smart home generator could not write a dialogue")
    return tuple(home.turns)
