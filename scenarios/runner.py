"""The automatic arena: replay a scenario against models, grade every reply, correct like a person.

Three protocols reproduce the study's tables:

* ``reliability`` — the first question, ``repeats`` fresh attempts (seed varied per attempt);
* ``dialogue`` — the whole scripted dialogue; after a wrong reply the correction writer's sentence is
  sent, up to ``max_fix_attempts`` times, then the next turn follows whatever the model said;
* ``fixing`` — each pre-made faulty reply, after the scripted history, followed by its correction;
  ``fixing_attempts`` fresh attempts per case.

The runner talks to models only through ``inference.protocol`` and stores nothing itself: each finished
run goes to a ``sink`` callback (the CLI wires it to the database), progress to a ``progress`` callback.
A generation that raises is recorded as an errored reply (graded garbage) and the run goes on.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from inference.protocol import (
    ChatMessage,
    ChatModel,
    GenerationParams,
    GenerationResult,
    complete,
    error_result,
    error_text,
)
from scenarios.base import Scenario
from scenarios.corrections import STYLES, Style
from scenarios.dialogue import DialogueGrader
from scenarios.generate import Dialogue
from scenarios.grader import Grade
from scenarios.premade import PremadeCase
from scenarios.records import PROTOCOLS, ProtocolName, RunCorrection, RunMessage, RunRecord, forgiven

RunSink = Callable[[RunRecord], None]


@dataclass(frozen=True, slots=True)
class Progress:
    done: int
    total: int
    model: str
    protocol: str


ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True, slots=True)
class RunnerConfig:
    """How many attempts, how many corrections, which sampling. ``params.seed`` is the base seed."""

    repeats: int = 5
    max_fix_attempts: int = 2
    fixing_attempts: int = 3
    params: GenerationParams = dataclasses.field(
        default_factory=lambda: GenerationParams(max_new_tokens=96, temperature=0.7, top_p=0.9, seed=0)
    )
    correction_styles: tuple[Style, ...] = ("fix",)  # the dialogue protocol runs once per style

    def __post_init__(self) -> None:
        if not self.correction_styles or any(s not in STYLES for s in self.correction_styles):
            raise ValueError(f"correction_styles must be a non-empty subset of {', '.join(STYLES)}")
        for name in ("repeats", "fixing_attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.max_fix_attempts < 0:
            raise ValueError("max_fix_attempts must be >= 0")


def planned_runs(*, protocols: Sequence[ProtocolName], config: RunnerConfig, n_cases: int) -> int:
    """How many runs one model gets (for the progress bar)."""
    sizes = {"reliability": config.repeats, "dialogue": len(config.correction_styles),
             "fixing": n_cases * config.fixing_attempts}
    return sum(sizes[p] for p in protocols)


def run_arena(
    *,
    scenario: Scenario,
    models: Sequence[ChatModel],
    protocols: Sequence[ProtocolName] = PROTOCOLS,
    config: RunnerConfig | None = None,
    cases: Sequence[PremadeCase] = (),
    sink: RunSink | None = None,
    progress: ProgressCallback | None = None,
) -> list[RunRecord]:
    """Run every protocol for every model, in that order; return the records (also sent to ``sink``)."""
    config = config or RunnerConfig()
    if not scenario.gradable:
        raise ValueError(f"scenario {scenario.slug!r} has no scripted dialogue to run")
    unknown = [p for p in protocols if p not in PROTOCOLS]
    if unknown:
        raise ValueError(f"unknown protocol(s) {unknown}; expected {', '.join(PROTOCOLS)}")
    if "fixing" in protocols and not cases:
        raise ValueError("the fixing protocol needs pre-made cases")
    per_model = planned_runs(protocols=protocols, config=config, n_cases=len(cases))
    total, done = per_model * len(models), 0
    records: list[RunRecord] = []
    for model in models:
        for protocol in protocols:
            runs = _protocol_runs(protocol, scenario=scenario, model=model, config=config, cases=cases)
            for record in runs:
                records.append(record)
                if sink is not None:
                    sink(record)
                done += 1
                if progress is not None:
                    progress(Progress(done=done, total=total, model=model.slug, protocol=protocol))
    return records


def _protocol_runs(
    protocol: ProtocolName,
    *,
    scenario: Scenario,
    model: ChatModel,
    config: RunnerConfig,
    cases: Sequence[PremadeCase],
) -> Iterator[RunRecord]:
    """The runs of one protocol for one model, each yielded as soon as it ends (so it is stored then)."""
    if protocol == "reliability":
        for attempt in range(config.repeats):
            yield _reliability(scenario, model, config, attempt)
    elif protocol == "dialogue":
        for style in config.correction_styles:
            yield _dialogue(scenario, model, config, style)
    else:
        for case in cases:
            for attempt in range(config.fixing_attempts):
                yield _fixing(scenario, model, config, case, attempt)


class Conversation:
    """A run in progress: the chat the model sees and the record being written."""

    def __init__(self, record: RunRecord, model: ChatModel, params: GenerationParams,
                 scenario: Scenario) -> None:
        self.record = record
        self.model = model
        self.params = params
        self.scenario = scenario
        self.chat = [ChatMessage(role="system", content=record.system_prompt)]
        self.script = record.dialogue.turns if record.dialogue is not None else scenario.turns
        self.grader = DialogueGrader(scenario, self.script)  # grades each reply knowing the dialogue so far

    def judged(self, grade: Grade, turn: int) -> Grade:
        """The grade as the run judges it (the study's tables forgive turn 1's year; a suite's grades
        already count an unsaid value as an assumption)."""
        if self.record.dialogue is not None:
            return grade
        return forgiven(grade, scenario=self.scenario, turn=turn)

    def say(self, kind: Literal["request", "correction"], content: str) -> int:
        message = RunMessage(kind=kind, content=content)
        self.chat.append(ChatMessage(role="user", content=content))
        self.grader.add(message)
        self.record.messages.append(message)
        return len(self.record.messages) - 1

    def _reply(self, content: str, *, turn: int, graded: bool, result: GenerationResult | None) -> int:
        message = RunMessage(kind="reply", content=content, target_turn=turn, result=result,
                             scripted=result is None)
        self.chat.append(ChatMessage(role="assistant", content=content))
        context = self.grader.add(message)
        if graded and context is not None:
            message = dataclasses.replace(message, grade=context.grade, context=context)
        self.record.messages.append(message)
        return len(self.record.messages) - 1

    def scripted_reply(self, content: str, *, turn: int, graded: bool) -> int:
        return self._reply(content, turn=turn, graded=graded, result=None)

    def ask(self, *, turn: int) -> int:
        result = _generate(self.model, self.chat, self.params)
        return self._reply(result.text, turn=turn, graded=True, result=result)

    def correct_until_fixed(self, reply: int, *, scenario: Scenario, turn: int, config: RunnerConfig) -> None:
        """Send the correction writer's sentence until the reply is right or attempts run out."""
        for _ in range(config.max_fix_attempts):
            grade = self.record.messages[reply].grade
            assert grade is not None
            judged = self.judged(grade, turn)
            if judged.is_correct:
                return
            scripted = self.script[turn - 1]
            text = scenario.correction_for(judged, scripted, style=self.record.style or "fix")  # type: ignore[arg-type]
            assert text is not None
            reply = self.correct(reply, text, scenario=scenario, turn=turn)

    def correct(self, faulty: int, text: str, *, scenario: Scenario, turn: int) -> int:
        feedback = self.say("correction", text)
        followup = self.ask(turn=turn)
        grade = self.record.messages[followup].grade
        assert grade is not None
        fixed = self.judged(grade, turn).is_correct
        self.record.corrections.append(
            RunCorrection(faulty=faulty, feedback=feedback, followup=followup,
                          outcome="fixed" if fixed else "not_fixed")
        )
        return followup


def _generate(model: ChatModel, chat: list[ChatMessage], params: GenerationParams) -> GenerationResult:
    started = time.perf_counter()
    try:
        return complete(model, list(chat), params)
    except Exception as exc:  # a broken model must not end the whole arena: record and go on
        return error_result(error_text(exc)[:500], started=started)


def seeded(params: GenerationParams, offset: int) -> GenerationParams:
    return dataclasses.replace(params, seed=(params.seed or 0) + offset)


def new_conversation(protocol: ProtocolName, scenario: Scenario, model: ChatModel, params: GenerationParams,
                     attempt: int, case: str = "", dialogue: Dialogue | None = None) -> Conversation:
    """A fresh run: the reference dialogue's, or a generated ``dialogue``'s (its system prompt too)."""
    prompt = dialogue.system_prompt if dialogue is not None else scenario.system_prompt
    record = RunRecord(protocol=protocol, model=model.slug, scenario=scenario.slug, attempt=attempt,
                       system_prompt=prompt, params=params, case=case, dialogue=dialogue)
    return Conversation(record, model, params, scenario)


def _reliability(scenario: Scenario, model: ChatModel, config: RunnerConfig, attempt: int) -> RunRecord:
    conv = new_conversation("reliability", scenario, model, seeded(config.params, attempt), attempt)
    conv.say("request", scenario.turn(1).user)
    conv.ask(turn=1)
    return conv.record


def _dialogue(scenario: Scenario, model: ChatModel, config: RunnerConfig, style: Style) -> RunRecord:
    conv = new_conversation("dialogue", scenario, model, config.params, 0)
    conv.record.style = style
    last_reply: int | None = None
    for number, turn in enumerate(scenario.turns, start=1):
        if turn.is_correction and last_reply is not None:
            reply = conv.correct(last_reply, turn.user, scenario=scenario, turn=number)
        else:
            conv.say("request", turn.user)
            reply = conv.ask(turn=number)
        conv.correct_until_fixed(reply, scenario=scenario, turn=number, config=config)
        last_reply = len(conv.record.messages) - 1
    return conv.record


def _fixing(scenario: Scenario, model: ChatModel, config: RunnerConfig, case: PremadeCase,
            attempt: int) -> RunRecord:
    conv = new_conversation("fixing", scenario, model, seeded(config.params, attempt), attempt,
                            case=case.kind)
    for number in range(1, case.turn):
        conv.say("request", scenario.turn(number).user)
        conv.scripted_reply(scenario.turn(number).expected, turn=number, graded=False)
    conv.say("request", scenario.turn(case.turn).user)
    faulty = conv.scripted_reply(case.faulty, turn=case.turn, graded=True)
    conv.correct(faulty, case.correction, scenario=scenario, turn=case.turn)
    return conv.record
