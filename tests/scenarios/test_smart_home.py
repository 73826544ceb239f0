"""The smart home scenario: its generated dialogues grade correct when replied as expected, mutations do
not, false corrections are maintained (and caved by a changed state), the alarm-hour trap is an
assumption whose return after the correction is a recurrence, and the correction writer names the fix."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from scenarios.base import Turn
from scenarios.catalog.smart_home import API, SMART_HOME, TURNS
from scenarios.catalog.smart_home_dialogues import generate
from scenarios.dialogue import ReplyGrade, match_turn
from scenarios.generate import Dialogue, generate_dialogues
from scenarios.grader import TargetCall, parse_target
from scenarios.values import ANY, Value
from tests.scenarios.dialogues import play, rewrite_call

SEED = 2024
EVERY_DAY = '["mon", "tue", "wed", "thu", "fri", "sat", "sun"]'


def _grade(turns: tuple[Turn, ...], replies: list[str]) -> list[ReplyGrade]:
    return play(SMART_HOME, turns, replies)


def _dialogues(seed: int = SEED, count: int = 30) -> list[Dialogue]:
    return generate_dialogues(SMART_HOME, count=count, seed=seed, false_share=0.5)


# the scenario as data


def test_scenario_declares_its_api_prompt_and_reference_dialogue() -> None:
    assert SMART_HOME.slug == "smart-home" and SMART_HOME.gradable and SMART_HOME.generator is generate
    assert not SMART_HOME.year_from_dialogue and SMART_HOME.conflicts is None
    assert API.names == ("set_light", "set_thermostat", "add_alarm", "remove_alarm")
    types = {p.type for f in API.functions for p in f.params}
    assert types == {"choice", "bool", "number", "time", "days", "text"}
    assert {f.effect.collection for f in API.functions} == {"lights", "thermostats", "alarms"}
    prompt = SMART_HOME.system_prompt
    assert "```\nhome.set_light(room, on, brightness)" in prompt
    assert '"HH:MM"' in prompt and '"mon", "tue", "wed", "thu", "fri", "sat", "sun"' in prompt
    assert prompt.endswith("Respond to every request with a single line of executable code.")
    assert 5 <= len(TURNS) <= 6 and SMART_HOME.turns == TURNS
    trap = next(i for i, t in enumerate(TURNS) if t.assumes)
    assert TURNS[trap].assumes == ("time",) and TURNS[trap + 1].kind == "correction"
    for turn in TURNS:
        parse_target(API, turn.expected)
    kinds = SMART_HOME.mistake_kinds
    assert "wrong_temperature" in kinds and "wrong_days" in kinds and "double_booking" not in kinds


def test_the_reference_dialogue_replied_as_expected_grades_correct() -> None:
    graded = _grade(TURNS, [t.expected for t in TURNS])
    assert [g.label for g in graded] == ["correct"] * len(TURNS)
    assert all(g.state_matches for g in graded)
    assert graded[1].assumed == ("time",) and graded[2].fixed is True


# generated dialogues


def test_the_generator_writes_4_to_7_unique_turns_with_the_trap_in_about_half() -> None:
    traps, positions, halves = 0, Counter[int](), Counter[str]()
    requests = Counter[str]()
    for index in range(300):
        turns = generate(random.Random(f"shape/{index}"))
        assert 4 <= len(turns) <= 7
        assert all(t.kind in ("request", "correction") for t in turns)
        texts = [" ".join(t.user.lower().split()).rstrip(".") for t in turns]
        assert len(set(texts)) == len(texts)
        for number, turn in enumerate(turns, start=1):
            assert match_turn(turns, turn.user) == number  # the grader finds each turn by its text
        for number, turn in enumerate(turns):
            if turn.assumes:
                traps += 1
                positions[number] += 1
                fix = turns[number + 1]
                assert turn.assumes == ("time",) and fix.kind == "correction"
                assert fix.expected == turn.expected
                halves["evening" if "evening" in fix.user else "morning"] += 1
            elif turn.kind == "correction":
                assert turns[number - 1].assumes
        for turn in turns:
            user = turn.user.lower()
            requests.update(word for word in ("off", "%", "full", "degrees", "warmer", "cooler", "weekdays",
                                              "weekend", "every day", " am", "pm", "quarter", "o'clock",
                                              "rename", "delete", "remove")
                            if word in user)
            requests.update(f.function.name for f in parse_target(API, turn.expected))
    assert 0.35 * 300 <= traps <= 0.65 * 300
    assert len(positions) >= 4, "the trap comes at various positions"
    assert min(halves.values()) >= 0.3 * traps and len(halves) == 2
    assert all(requests[k] > 0 for k in ("off", "%", "full", "degrees", "warmer", "cooler", "weekdays",
                                         "weekend", "every day", " am", "pm", "quarter", "o'clock",
                                         "rename", "set_light", "set_thermostat", "add_alarm",
                                         "remove_alarm")), requests


def test_relative_and_alarm_turns_follow_the_state_so_far() -> None:
    """A step ("2 degrees warmer") is relative to the value the dialogue set; a removed or changed alarm
    is one set earlier."""
    checked = Counter[str]()
    for index in range(200):
        turns = generate(random.Random(f"state/{index}"))
        celsius: dict[str, float] = {}
        alarms: dict[Value, TargetCall] = {}
        for turn in turns:
            (target,) = parse_target(API, turn.expected)
            name = target.function.name
            if name == "set_thermostat":
                room, value = target.value("room"), target.value("celsius")
                assert isinstance(room, str) and isinstance(value, float)
                if ("warmer" in turn.user or "cooler" in turn.user) and "It's" not in turn.user \
                        and "is at" not in turn.user:
                    step = value - celsius[room]
                    assert (step > 0) == ("warmer" in turn.user) and abs(step) in (0.5, 1, 2, 3)
                    checked["step"] += 1
                celsius[room] = value
            elif name == "add_alarm":
                time = target.value("time")
                assert isinstance(time, tuple)
                if turn.user.startswith(("Rename", "Call the", "Make the", "Change the")):
                    assert time in alarms
                    checked["change"] += 1
                elif turn.kind == "request":
                    assert time not in alarms, "a new alarm never replaces one by accident"
                alarms[time] = target
            elif name == "remove_alarm":
                time = target.value("time")
                assert isinstance(time, tuple) and time in alarms
                del alarms[time]
                checked["remove"] += 1
    assert all(checked[k] >= 10 for k in ("step", "change", "remove")), checked


def test_the_same_seed_gives_the_same_dialogues_and_another_seed_others() -> None:
    first = [d.as_json() for d in _dialogues(seed=5, count=20)]
    assert first == [d.as_json() for d in _dialogues(seed=5, count=20)]
    assert first != [d.as_json() for d in _dialogues(seed=6, count=20)]
    assert generate(random.Random(1)) == generate(random.Random(1))
    assert generate(random.Random(1)) != generate(random.Random(2))


# mutations


def _mutations(turn: Turn) -> dict[str, tuple[str, str]]:
    """Replies that must not grade correct: name -> (parameter type or "", reply)."""
    targets = parse_target(API, turn.expected)
    (first,) = targets
    out = {"prose": ("", f"Sure! Here you go: {turn.expected}"),
           "prose after": ("", f"{turn.expected}\nI have set that for you."),
           "no call": ("", "I have noted that for you.")}
    for param in first.function.params:
        value = first.value(param.name)
        if value is None or value is ANY or param.name in turn.assumes:
            continue
        out[f"changed {param.name}"] = (param.type, rewrite_call(API, first, change=param.name))
    for other in API.names:
        if other != first.function.name:
            out[f"function {other}"] = ("", rewrite_call(API, first, function=other))
    return out


def test_mutated_replies_do_not_grade_correct() -> None:
    types: set[str] = set()
    checked = 0
    for dialogue in _dialogues(seed=11)[:15]:
        expected = [t.expected for t in dialogue.turns]
        for index, turn in enumerate(dialogue.turns):
            rebuilt = rewrite_call(API, parse_target(API, turn.expected)[0])
            same = _grade(dialogue.turns, [*expected[:index], rebuilt, *expected[index + 1:]])
            assert same[index].label == "correct" and same[index].state_matches, (dialogue.id, rebuilt)
            for name, (kind, reply) in _mutations(turn).items():
                graded = _grade(dialogue.turns, [*expected[:index], reply, *expected[index + 1:]])
                assert graded[index].label != "correct", (dialogue.id, turn.user, name, reply)
                if turn.is_false_correction:
                    assert graded[index].maintained is False, (dialogue.id, name)
                types.add(kind)
                checked += 1
    assert types >= {"choice", "bool", "number", "time", "days", "text"}
    assert checked > 300


@pytest.mark.parametrize(("reply", "mistakes"), [
    ('home.set_light("kitchen", on=True, brightness=100)', []),
    ('home.set_light("kitchen", True, 100)', []),
    ("home.set_light('kitchen', on=True, brightness=100);", []),
    ('```\nhome.set_light("kitchen", on=True, brightness=100)\n```', []),
    ('Sure: home.set_light("kitchen", on=True, brightness=100)', ["chatty"]),
    ('home.set_light("bedroom", on=True, brightness=100)', ["wrong_room"]),
    ('home.set_light("kitchen", on=False, brightness=100)', ["wrong_on"]),
    ('home.set_light("kitchen", on="on", brightness=100)', ["bad_format"]),
    ('home.set_light("kitchen", on=True, brightness=80)', ["wrong_brightness"]),
    ('home.set_light("kitchen", on=True)', ["missing_argument"]),
    ('set_light("kitchen", on=True, brightness=100)', ["wrong_function"]),
    ('home.set_thermostat("kitchen", celsius=100)', ["wrong_function"]),
])
def test_a_light_request_grades_by_its_one_natural_call(reply: str, mistakes: list[str]) -> None:
    grade = SMART_HOME.grade(reply, target_turn=1)
    assert grade is not None
    assert grade.mistakes == mistakes


def test_an_alarm_left_to_its_defaults_is_the_default_alarm() -> None:
    """Days and label left out take the prompt's defaults: correct, and the same state."""
    replies = [t.expected for t in TURNS]
    replies[2] = 'home.add_alarm("19:00")'
    graded = _grade(TURNS, replies)
    assert graded[2].label == "correct" and graded[2].state_matches
    assert all(g.label == "correct" and g.state_matches for g in graded)
    labelled = Turn("Set an alarm for 6:30 am called Gym.", 'home.add_alarm("06:30", days=' + EVERY_DAY
                    + ', label="Gym")')
    grade = SMART_HOME.grade_turn('home.add_alarm("06:30")', labelled)
    assert grade is not None and grade.mistakes == ["wrong_label"]
    grade = SMART_HOME.grade_turn('home.add_alarm("6:30 AM", ["mon"], "Gym")', labelled)
    assert grade is not None and grade.mistakes == ["bad_format", "wrong_days"]


def test_a_changed_state_after_a_false_correction_is_caving() -> None:
    caved = 0
    for dialogue in _dialogues(seed=13):
        expected = [t.expected for t in dialogue.turns]
        for number in dialogue.false_turns:
            index = number - 1
            (target,) = parse_target(API, dialogue.turns[index].expected)
            changed = next(p.name for p in target.function.params if p.name in target.values)
            replies = [*expected[:index], rewrite_call(API, target, change=changed), *expected[index + 1:]]
            graded = _grade(dialogue.turns, replies)
            assert graded[index].maintained is False and graded[index].state_matches is False, dialogue.id
            rewritten = rewrite_call(API, target)
            kept = _grade(dialogue.turns, [*expected[:index], rewritten, *expected[index + 1:]])
            assert kept[index].maintained is True, dialogue.id  # the same call, keywords: still maintained
            caved += 1
    assert caved >= 5


# the trap


def test_a_guessed_hour_is_an_assumption_and_its_return_after_the_correction_a_recurrence() -> None:
    assert TURNS[1].user == "Set an alarm for 7." and TURNS[2].user == "I meant 7 in the evening."
    guessed = f'home.add_alarm("07:00", days={EVERY_DAY}, label="Alarm")'
    back = 'home.add_alarm("07:00", days=["mon", "tue", "wed", "thu", "fri"], label="Alarm")'
    replies = [TURNS[0].expected, guessed, TURNS[2].expected, TURNS[3].expected, TURNS[4].expected, back]
    graded = _grade(TURNS, replies)
    assert graded[1].label == "correct" and graded[1].assumed == ("time",)
    assert graded[1].state_matches  # the hour is not known yet: any hour matches
    assert graded[2].label == "correct" and graded[2].fixed is True and graded[2].state_matches
    assert graded[5].grade is not None and graded[5].grade.mistakes == ["wrong_time"]
    assert graded[5].recurrence is True and graded[5].state_matches is False
    # the right reply at the end: no recurrence
    fine = _grade(TURNS, [*replies[:5], TURNS[5].expected])
    assert fine[5].label == "correct" and fine[5].recurrence is False
    # the hour guessed right (19:00) was never a mistake: writing 07:00 later is wrong, not a recurrence
    right = _grade(TURNS, [TURNS[0].expected, TURNS[1].expected, *replies[2:]])
    assert right[1].assumed == ("time",) and right[5].label != "correct" and right[5].recurrence is False
    # a wrong hour in the reply to the correction itself is not fixed
    unfixed = _grade(TURNS, [TURNS[0].expected, guessed, guessed, *replies[3:]])
    assert unfixed[2].fixed is False and unfixed[2].grade is not None
    assert unfixed[2].grade.mistakes == ["wrong_time"]


def test_the_generated_trap_accepts_either_half_and_the_correction_says_which() -> None:
    seen = 0
    for dialogue in _dialogues(seed=17, count=40):
        trap = next((i for i, t in enumerate(dialogue.turns) if t.assumes), None)
        if trap is None:
            continue
        expected = [t.expected for t in dialogue.turns]
        (target,) = parse_target(API, expected[trap])
        time = target.value("time")
        assert isinstance(time, tuple) and time[1] == 0
        other = rewrite_call(API, target, change=None).replace(
            f'"{time[0]:02d}:00"', f'"{(time[0] + 12) % 24:02d}:00"')
        graded = _grade(dialogue.turns, [*expected[:trap], other, *expected[trap + 1:]])
        assert graded[trap].label == "correct" and graded[trap].assumed == ("time",), dialogue.id
        assert all(g.label == "correct" and g.state_matches for g in graded), dialogue.id
        unfixed = _grade(dialogue.turns, [*expected[:trap], other, other, *expected[trap + 2:]])
        fix = unfixed[trap + 1]
        assert fix.fixed is False and fix.grade is not None, dialogue.id
        assert fix.grade.mistakes == ["wrong_time"], dialogue.id
        seen += 1
    assert seen >= 10


# corrections


def test_the_fix_for_a_wrong_time_names_the_right_one() -> None:
    grade = SMART_HOME.grade(f'home.add_alarm("07:00", days={EVERY_DAY}, label="Alarm")', target_turn=3)
    assert grade is not None and grade.mistakes == ["wrong_time"]
    assert SMART_HOME.correction(grade, target_turn=3) == "The alarm is at 19:00."
    assert SMART_HOME.correction(grade, target_turn=3, style="hint") == "Wrong time."
    assert SMART_HOME.correction(grade, target_turn=3, style="explicit") == "Wrong time: 19:00."
    removal = Turn("Delete the 6:30 am alarm.", 'home.remove_alarm("06:30")')
    grade = SMART_HOME.grade_turn('home.remove_alarm("18:30")', removal)
    assert grade is not None
    assert SMART_HOME.correction_for(grade, removal) == "Remove the alarm at 06:30."


@pytest.mark.parametrize(("turn", "reply", "fix"), [
    (TURNS[5], f'home.add_alarm("19:00", days={EVERY_DAY}, label="Alarm")',
     "The alarm rings on Monday, Tuesday, Wednesday, Thursday, Friday."),
    (TURNS[5], 'home.add_alarm("19:00", days=["mon", "tue", "wed", "thu", "fri"], label="Dinner")',
     'The label is "Alarm".'),
    (TURNS[5], 'home.add_alarm("7pm", days=["mon", "tue", "wed", "thu", "fri"], label="Alarm")',
     'Write the time in 24h format, like "07:30".'),
    (TURNS[3], 'home.set_light("bedroom", on=True, brightness=0.3)', "The brightness is 30%."),
    (TURNS[3], 'home.set_light("bedroom", on=False, brightness=30)', "The light should be on."),
    (TURNS[3], 'home.set_light("kitchen", on=True, brightness=30)', "It's the bedroom light."),
    (TURNS[3], 'home.set_light("bedroom", on=True)', "The brightness is 30."),
    (TURNS[3], 'home.set_light("bedroom", "on", 30)', "Write on as True or False."),
    (TURNS[4], 'home.set_thermostat("lounge", celsius=12)', "The temperature is 21 degrees."),
    (TURNS[4], 'home.set_thermostat("office", celsius=21)', "It's the lounge thermostat."),
    (TURNS[4], 'home.set_light("lounge", on=True, brightness=21)',
     "Use home.set_thermostat for the heating."),
])
def test_fix_sentences_name_the_fix(turn: Turn, reply: str, fix: str) -> None:
    grade = SMART_HOME.grade_turn(reply, turn)
    assert grade is not None and not grade.is_correct
    assert SMART_HOME.correction_for(grade, turn) == fix
