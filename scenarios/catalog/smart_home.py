"""The smart home scenario: lights, thermostats and alarms by voice, one line of API calls per request.

Every request has one natural call: a light's brightness is always written (100 when it is turned on
without a level, 0 when it is turned off), an alarm's days and label have the defaults the system prompt
states, and ``add_alarm`` on an existing time replaces that alarm (how its days or label change). The
trap: an alarm at an hour that says neither morning nor evening ("Set an alarm for 7."); any time is
accepted there and recorded as an assumption, and the next turn says which ("I meant 7 in the
evening."). Generated dialogues: ``smart_home_dialogues``.
"""

from __future__ import annotations

from scenarios.api import Api, Effect, Function, Param
from scenarios.base import Scenario, Turn
from scenarios.catalog.smart_home_dialogues import DAYS, DEFAULT_LABEL, ROOMS, generate
from scenarios.corrections import Phrasebook

SET_LIGHT = "set_light"
SET_THERMOSTAT = "set_thermostat"
ADD_ALARM = "add_alarm"
REMOVE_ALARM = "remove_alarm"
_ROOM_LIST = ", ".join(f'"{r}"' for r in ROOMS)
_DAY_LIST = ", ".join(f'"{d}"' for d in DAYS)

SYSTEM_PROMPT = (
    "You are a helpful voice assistant for a smart home. Your job is to translate user requests into "
    "API calls using this Python API:\n"
    "```\n"
    "home.set_light(room, on, brightness)  # on: True or False; brightness: percent, 0 to 100\n"
    "home.set_thermostat(room, celsius)  # the target temperature in degrees Celsius\n"
    f'home.add_alarm(time="HH:MM", days=["mon", ...], label="{DEFAULT_LABEL}")  '
    "# replaces the alarm at that time, if any\n"
    'home.remove_alarm(time="HH:MM")\n'
    "```\n"
    f"Rooms: {_ROOM_LIST}. Times are 24-hour \"HH:MM\". Days are a list of 3-letter lowercase names: "
    f"{_DAY_LIST}. A light turned on with no level given has brightness 100; a light turned off has "
    f"brightness 0. An alarm rings every day unless days are given, and its label is \"{DEFAULT_LABEL}\" "
    "unless one is given. Respond to every request with a single line of executable code."
)

_ROOM = Param("room", "choice", choices=ROOMS)
_TIME = Param("time", "time")
API = Api(
    namespace="home",
    functions=(
        Function(SET_LIGHT, (_ROOM, Param("on", "bool"), Param("brightness", "number")),
                 Effect("upsert", "lights", ("room",)),
                 doc="switches a room's light on or off at a brightness (percent)"),
        Function(SET_THERMOSTAT, (_ROOM, Param("celsius", "number", mistake="wrong_temperature")),
                 Effect("upsert", "thermostats", ("room",)), doc="sets a room's target temperature"),
        Function(ADD_ALARM, (_TIME, Param("days", "days", required=False, default=DAYS, choices=DAYS),
                             Param("label", "text", required=False, default=DEFAULT_LABEL)),
                 Effect("upsert", "alarms", ("time",)),
                 doc="adds an alarm; an alarm at the same time is replaced (new days or label)"),
        Function(REMOVE_ALARM, (_TIME,), Effect("delete", "alarms", ("time",)),
                 doc="removes the alarm at that time"),
    ),
    aliases={
        "location": "room", "area": "room", "place": "room", "state": "on", "power": "on",
        "is_on": "on", "switch": "on", "level": "brightness", "dim": "brightness", "percent": "brightness",
        "temperature": "celsius", "temp": "celsius", "degrees": "celsius", "target": "celsius",
        "at": "time", "alarm_time": "time", "repeat": "days", "weekdays": "days", "day": "days",
        "name": "label", "title": "label",
    },
)

PHRASES = Phrasebook(
    hints={
        "bad_format:time": "Time in 24h format.",
        "bad_format:days": "Days as a list of 3-letter names.",
        "bad_format:on": "The on parameter is True or False.",
        "bad_format:room": "Unknown room.",
        "bad_format:brightness": "Brightness as a number.",
        "bad_format:celsius": "Temperature as a number.",
        "wrong_room": "Wrong room.",
        "wrong_on": "The light is on when it should be off, or the other way round.",
        "wrong_brightness": "Wrong brightness.",
        "wrong_temperature": "Wrong temperature.",
        "wrong_time": "Wrong time.",
        "wrong_days": "Wrong days.",
        "wrong_label": "Wrong label.",
        "regression": "You changed something else too.",
    },
    fixes={
        "bad_format:time": 'Write the time in 24h format, like "07:30".',
        "bad_format:days": 'Write the days as a list like ["mon", "fri"].',
        "bad_format:on": "Write on as True or False.",
        "bad_format:room": f"The room is one of {', '.join(ROOMS)}, in quotes.",
        "bad_format:brightness": "Write the brightness as a number from 0 to 100.",
        "bad_format:celsius": "Write the temperature as a number of degrees.",
        "missing_argument:brightness": "The brightness is {value}.",
        "missing_argument:on": "The light should be {value}.",
        f"wrong_room@{SET_LIGHT}": "It's the {value} light.",
        f"wrong_room@{SET_THERMOSTAT}": "It's the {value} thermostat.",
        "wrong_on": "The light should be {value}.",
        "wrong_brightness": "The brightness is {value}%.",
        "wrong_temperature": "The temperature is {value} degrees.",
        f"wrong_time@{ADD_ALARM}": "The alarm is at {value}.",
        f"wrong_time@{REMOVE_ALARM}": "Remove the alarm at {value}.",
        "wrong_days": "The alarm rings on {value}.",
        "wrong_label": 'The label is "{value}".',
        f"wrong_function@{REMOVE_ALARM}": f"Use home.{REMOVE_ALARM} to delete an alarm.",
        f"wrong_function@{ADD_ALARM}": f"Use home.{ADD_ALARM} to set or change an alarm.",
        f"wrong_function@{SET_LIGHT}": f"Use home.{SET_LIGHT} for the lights.",
        f"wrong_function@{SET_THERMOSTAT}": f"Use home.{SET_THERMOSTAT} for the heating.",
        "regression": "Leave the other lights, thermostats and alarms as they were.",
    },
)

_WEEKDAYS = '["mon", "tue", "wed", "thu", "fri"]'
_EVERY_DAY = "[" + _DAY_LIST + "]"

TURNS = (
    Turn(
        user="Turn on the kitchen light.",
        expected='home.set_light("kitchen", on=True, brightness=100)',
    ),
    Turn(
        user="Set an alarm for 7.",
        expected=f'home.add_alarm("19:00", days={_EVERY_DAY}, label="Alarm")',
        assumes=("time",),
    ),
    Turn(
        user="I meant 7 in the evening.",
        expected=f'home.add_alarm("19:00", days={_EVERY_DAY}, label="Alarm")',
        kind="correction",
    ),
    Turn(
        user="Dim the bedroom to 30%.",
        expected='home.set_light("bedroom", on=True, brightness=30)',
    ),
    Turn(
        user="Set the lounge thermostat to 21 degrees.",
        expected='home.set_thermostat("lounge", celsius=21)',
    ),
    Turn(
        user="Make the 7 pm alarm ring on weekdays only.",
        expected=f'home.add_alarm("19:00", days={_WEEKDAYS}, label="Alarm")',
    ),
)

SMART_HOME = Scenario(
    slug="smart-home",
    title="Smart home API calls",
    system_prompt=SYSTEM_PROMPT,
    turns=TURNS,
    description="Turn spoken requests into calls for lights, thermostats and alarms; one alarm's hour "
                "leaves morning or evening unsaid.",
    api=API,
    phrases=PHRASES,
    generator=generate,
)
