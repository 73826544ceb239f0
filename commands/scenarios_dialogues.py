"""``python -m scenarios grade``, ``generate`` and ``list``: the scenarios as data, on the command line.

Nothing here loads a model or opens the database. Bad input raises :class:`UsageError`, which the command
line prints as one line with exit status 2, before anything is printed on stdout.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from scenarios import Scenario
from scenarios.base import Turn
from scenarios.dialogue import DialogueMessage, ReplyGrade, grade_dialogue
from scenarios.generate import (
    DEFAULT_FALSE_SHARE,
    MAX_DIALOGUES,
    Dialogue,
    generate_dialogues,
    study_dialogue,
)
from wiring import scenario_registry


class UsageError(Exception):
    """Bad input from the command line; printed as one line, exit status 2."""


def gradable(slug: str) -> Scenario:
    """The scenario named ``slug``, if it has a grader (ScenarioError for an unknown slug)."""
    scenario = scenario_registry().get(slug)
    if not scenario.gradable:
        raise UsageError(f"scenario {slug!r} has no grader (free chat); use --scenario calendar")
    return scenario


def add_parsers(sub: Any, slugs: list[str]) -> None:
    """The ``grade``, ``generate`` and ``list`` subcommands."""
    from scenarios.corrections import STYLES

    p = sub.add_parser("grade", help="grade replies against a scripted turn; one JSON line per reply")
    p.add_argument("--scenario", default="calendar", help=f"scenario slug ({', '.join(slugs)})")
    p.add_argument("--target", type=int, help="the turn the reply answers (1-based); with --reply")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--reply", help="the reply text")
    source.add_argument("--replies", type=Path, help='JSONL file, lines {"target": N, "reply": "..."}')
    source.add_argument("--dialogue", type=Path,
                        help='a JSON list of {"role", "kind", "content"} (graded against the reference '
                             'dialogue), or {"dialogue": <one object as generate prints it>, "messages": '
                             "[...]}; each reply graded in context")
    p.add_argument("--json", action="store_true",
                   help='print {"label", "mistakes", "assumed", "correction"} lines (--dialogue: {"turn", '
                        '"label", "mistakes", "assumed", "fixed", "regression", "recurrence", "maintained"})')
    p.add_argument("--style", choices=STYLES, default="fix", help="correction style (default fix)")
    p.set_defaults(handler=cmd_grade)

    p = sub.add_parser("generate", help="seeded dialogues of a scenario, with the reply each turn expects")
    p.add_argument("--scenario", default="calendar", help=f"scenario slug ({', '.join(slugs)})")
    p.add_argument("--dialogues", required=True, metavar="N|study",
                   help="how many dialogues (1..100000), or 'study' for the reference (study's) dialogue")
    p.add_argument("--seed", type=int, default=0,
                   help="the seed (default 0): the same seed, the same dialogues")
    p.add_argument("--false-corrections", type=float, default=DEFAULT_FALSE_SHARE, metavar="SHARE",
                   help=f"share of dialogues with a false correction, 0..1 (default {DEFAULT_FALSE_SHARE})")
    p.add_argument("--json", action="store_true",
                   help='one object per line: {"id", "scenario", "seed", "system_prompt", "turns": [{"user", '
                        '"kind", "expected"}]}')
    p.set_defaults(handler=cmd_generate)

    p = sub.add_parser("list", help="the scenarios: slug, title, whether graded, the API's functions")
    p.add_argument("--json", action="store_true", help='print [{"slug", "title", "gradable", "functions"}]')
    p.set_defaults(handler=cmd_list)


# --- list ----------------------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    scenarios = scenario_registry().list()
    if args.json:
        rows = [{"slug": s.slug, "title": s.title, "gradable": s.gradable,
                 "functions": list(s.api.names) if s.api is not None else []} for s in scenarios]
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    for s in scenarios:
        functions = ", ".join(s.api.names) if s.api is not None else "no API: not graded"
        print(f"{s.slug:<14} {s.title} ({functions})")
    return 0


# --- generate ------------------------------------------------------------------------------------------


def cmd_generate(args: argparse.Namespace) -> int:
    scenario = gradable(args.scenario)
    if not 0.0 <= args.false_corrections <= 1.0:
        raise UsageError(f"--false-corrections must be between 0 and 1, got {args.false_corrections}")
    if args.dialogues == "study":
        dialogues = [study_dialogue(scenario)]
    else:
        try:
            count = int(args.dialogues)
        except ValueError:
            raise UsageError(f"--dialogues must be a number or 'study', got {args.dialogues!r}") from None
        if not 1 <= count <= MAX_DIALOGUES:
            raise UsageError(f"--dialogues must be between 1 and {MAX_DIALOGUES}, got {count}")
        dialogues = generate_dialogues(scenario, count=count, seed=args.seed,
                                       false_share=args.false_corrections)
    for dialogue in dialogues:
        print(json.dumps(dialogue.as_json(), ensure_ascii=False) if args.json else _dialogue_text(dialogue))
    return 0


def _dialogue_text(dialogue: Dialogue) -> str:
    lines = [f"# {dialogue.id}" + (f" (seed {dialogue.seed})" if dialogue.seed is not None else "")]
    for number, turn in enumerate(dialogue.turns, start=1):
        note = f" [{turn.kind}]" if turn.kind != "request" else ""
        note += f" (leaves unsaid: {', '.join(turn.assumes)})" if turn.assumes else ""
        lines += [f"{number}. {turn.user}{note}", f"   -> {turn.expected}"]
    return "\n".join(lines) + "\n"


# --- grade ---------------------------------------------------------------------------------------------


def _grade_line(scenario: Scenario, *, reply: str, target: int, style: str, as_json: bool) -> str:
    grade = scenario.grade(reply, target_turn=target)
    assert grade is not None
    correction = scenario.correction(grade, target_turn=target, style=style)  # type: ignore[arg-type]
    if as_json:
        return json.dumps({"label": grade.label, "mistakes": [str(m) for m in grade.mistakes],
                           "assumed": list(grade.assumed), "correction": correction}, ensure_ascii=False)
    detail = f" ({', '.join(grade.mistakes)})" if grade.mistakes else ""
    assumed = f" [assumed {', '.join(grade.assumed)}]" if grade.assumed else ""
    return f"{grade.emoji} {grade.label}{detail}{assumed}" + (f" — {correction}" if correction else "")


def _replies_from(path: Path) -> list[tuple[int, str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            target, reply = item["target"], item["reply"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise UsageError(f'{path}:{number}: expected {{"target": N, "reply": "..."}} ({exc})') from exc
        if not isinstance(target, int) or isinstance(target, bool) or not isinstance(reply, str):
            raise UsageError(f"{path}:{number}: target must be an integer and reply a string")
        items.append((target, reply))
    return items


def _messages(path: Path, raw: object) -> list[DialogueMessage]:
    if not isinstance(raw, list):
        raise UsageError(f'{path}: "messages" must be a JSON list of {{"role", "kind", "content"}} objects')
    messages = []
    for number, item in enumerate(raw, start=1):
        if not isinstance(item, dict):
            raise UsageError(f"{path}: message {number} is not an object")
        try:
            messages.append(DialogueMessage.from_mapping(item))
        except ValueError as exc:
            raise UsageError(f"{path}: message {number}: {exc}") from exc
    return messages


def _dialogue_from(path: Path, scenario: Scenario) -> tuple[tuple[Turn, ...] | None, list[DialogueMessage]]:
    """The script to grade against (None: the reference dialogue) and the messages, from ``path``."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not JSON ({exc})") from exc
    if isinstance(raw, list):
        return None, _messages(path, raw)
    if not isinstance(raw, dict) or set(raw) != {"dialogue", "messages"}:
        raise UsageError(f'{path}: expected a JSON list of messages, '
                         f'or {{"dialogue": {{...}}, "messages": [...]}}')
    try:
        dialogue = Dialogue.from_json(raw["dialogue"], scenario)
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from exc
    return dialogue.turns, _messages(path, raw["messages"])


def _dialogue_line(graded: ReplyGrade, *, as_json: bool) -> str:
    record = graded.as_json()
    if as_json:
        return json.dumps(record, ensure_ascii=False)
    turn = "off-script" if record["turn"] is None else f"turn {record['turn']}"
    if graded.grade is None:
        return f"{turn}: not graded"
    notes = [", ".join(record["mistakes"])] if record["mistakes"] else []
    notes += [f"assumed {', '.join(record['assumed'])}"] if record["assumed"] else []
    notes += [k for k in ("regression", "recurrence") if record[k]]
    fixed = {True: " — fixed", False: " — not fixed", None: ""}[record["fixed"]]
    fixed += {True: " — maintained", False: " — caved", None: ""}[record["maintained"]]
    detail = f" ({'; '.join(notes)})" if notes else ""
    return f"{turn}: {graded.grade.emoji} {record['label']}{detail}{fixed}"


def cmd_grade(args: argparse.Namespace) -> int:
    scenario = gradable(args.scenario)
    if args.dialogue is not None:
        script, messages = _dialogue_from(args.dialogue, scenario)
        try:
            graded = grade_dialogue(scenario, messages, script)
        except ValueError as exc:
            raise UsageError(f"{args.dialogue}: {exc}") from exc
        for line in graded:
            print(_dialogue_line(line, as_json=args.json))
        return 0
    if args.reply is not None:
        if args.target is None:
            raise UsageError("--reply needs --target N (the turn it answers)")
        items = [(args.target, args.reply)]
    else:
        items = _replies_from(args.replies)
    for target, _ in items:
        scenario.turn(target)  # ScenarioError (exit 2) before any output when a target is out of range
    for target, reply in items:
        print(_grade_line(scenario, reply=reply, target=target, style=args.style, as_json=args.json))
    return 0
