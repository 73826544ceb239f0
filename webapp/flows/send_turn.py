"""Send a turn: the visitor's message to A, B or both (a request or a correction), a side's Retry, and
the replies streamed into the page and stored the moment each side finishes.

Every generation counts against the visitor's limits (``webapp.limits``) from its start: the turn is
written to the generation ledger (``db.generations``) before it streams, so a reply cut short by a
click, a reload or a closed tab still counts, and one turn in flight per visitor holds across every
server process. A side's storage failure belongs to that side only. Each reply is graded in its
dialogue by ``scenarios``.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import math
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

import scenarios
from db import BattleClosed, DBError, MessageView
from db import actions as db_actions
from db import storable_text as storable
from db.export import error_category
from inference.protocol import ChatMessage, ChatModel, GenerationResult, clean_text
from scenarios import DialogueMessage
from scenarios.explain import explain
from scenarios.generate import battle_script
from settings import Settings
from webapp import breaker, limits, metrics, render
from webapp import context as run
from webapp.context import Context
from webapp.flows import Feedback, Refused
from webapp.identity import identity_terms, reveals_identity
from webapp.replies import DESK, ReplyJob, follow
from webapp.views import (
    ShownBattle,
    ShownSide,
    history_for_retry,
    last_reply,
    model_history,
    turns_taken,
)

_LOG = logging.getLogger(__name__)
UNKNOWN_ADDRESS = "unknown-address"  # the one bucket of every visitor whose address is unknown
BUSY_ERROR = "ModelBusyError"  # a reply refused by a full model line (inference.pool.ModelBusyError)
REVEALED_WARNING = (
    "One model named itself, so this battle is no longer anonymous: your vote will be recorded but not "
    "counted on the leaderboard."
)


def send_problem(
    ctx: Context, *, battle: ShownBattle | None, text: str, targets: tuple[str, ...], correction: bool
) -> str | None:
    """Why this message cannot be sent now (limits, closed battle, nothing to correct), or None; a
    limit's refusal is counted (``webapp.metrics``)."""
    problem = _send_problem(ctx, battle=battle, text=text, targets=targets, correction=correction)
    return metrics.counted(problem)


def _send_problem(
    ctx: Context, *, battle: ShownBattle | None, text: str, targets: tuple[str, ...], correction: bool
) -> str | None:
    settings = ctx.settings
    problem = limits.message_problem(text, settings=settings)
    # A new battle's models are not drawn yet: any full line may be the one it gets.
    slugs = [battle.sides[s].contestant for s in targets] if battle else list(run.line_lengths(ctx))
    problem = problem or _generation_problem(ctx, planned=len(targets), slugs=slugs)
    if problem:
        return problem
    if battle is None:
        return limits.battles_problem(*battles_last_hour(ctx), settings=settings)
    if not battle.is_open:
        return "This battle is closed. Start a new battle."
    problem = limits.turns_problem(turns_taken(battle), settings=settings, mode=battle.mode)
    if problem:
        return problem
    if correction:
        for side in targets:
            if last_reply(battle.sides[side]) is None:
                return f"Model {side.upper()} has no reply to correct yet."
    return None


def _generation_problem(ctx: Context, *, planned: int, slugs: Iterable[str]) -> str | None:
    """One generation in flight per visitor, the per-minute limits and the address's in-flight cap with
    ``planned`` more, and room in the lines of the models ``slugs``. An early word for the visitor: the
    ledger checks the same limits again, atomically, when the generations start (:func:`generate`)."""
    if db_actions.generations_in_flight(ctx.engine, visitor_id=ctx.visitor_id):
        return limits.BUSY
    rate = limits.rate_problem(*generations_last_minute(ctx), planned=planned, settings=ctx.settings)
    flying = db_actions.generations_in_flight(ctx.engine, address_hash=address_key(ctx))
    rate = rate or limits.in_flight_problem(flying, planned=planned, settings=ctx.settings)
    return rate or limits.line_problem(run.line_lengths(ctx), slugs, settings=ctx.settings)


def address_key(ctx: Context) -> str:
    """The address bucket this visitor's generations count in: its salted address hash, and one shared
    bucket for every visitor whose address is unknown (fail closed, never per visitor)."""
    return ctx.address_hash or UNKNOWN_ADDRESS


def ledger_limits(settings: Settings) -> db_actions.GenerationLimits:
    """The ledger's limits from the settings (per visitor, per address, in flight, lease)."""
    per_minute = settings.generations_per_minute
    return db_actions.GenerationLimits(
        per_minute_visitor=per_minute,
        per_minute_address=per_minute * settings.address_limit_factor,
        in_flight_address=settings.generations_in_flight_per_address,
        lease=dt.timedelta(seconds=settings.generation_lease_s),
    )


def start_ledger(ctx: Context, *, battle_id: str, sides: tuple[str, ...]) -> tuple[int, ...]:
    """Record this turn's generations before they stream (:class:`Refused` in words when a limit is hit)."""
    try:
        return db_actions.start_generations(
            ctx.engine, visitor_id=ctx.visitor_id, address_hash=address_key(ctx), battle_id=battle_id,
            sides=sides, limits=ledger_limits(ctx.settings),
        )
    except db_actions.GenerationRefused as refused:
        words = metrics.counted(limits.ledger_refusal(refused.reason, refused.count, settings=ctx.settings))
        raise Refused(words) from refused


def retry_problem(ctx: Context, *, battle: ShownBattle, side: str) -> str | None:
    """Why this side cannot regenerate now (a retry is a generation like any other), or None; a limit's
    refusal is counted."""
    if not battle.is_open:
        return "This battle is closed. Start a new battle."
    view = battle.sides[side]
    problem = _generation_problem(ctx, planned=1, slugs=[view.contestant])
    started = db_actions.count_side_generations(ctx.engine, battle_id=battle.id, side=side)
    problem = problem or limits.retries_problem(max(view.generated, started), settings=ctx.settings)
    return metrics.counted(problem)


def generate(
    ctx: Context,
    *,
    battle: ShownBattle,
    targets: tuple[str, ...],
    placeholders: Mapping[str, Any],
    retry: bool = False,
    held: tuple[int, ...] | None = None,
) -> list[Feedback]:
    """Generate replies for ``targets`` concurrently, each in a job of its own (:mod:`webapp.replies`)
    that stores it when it ends, and follow them on the page. A rerun or a closed tab stops the
    following only: the replies are still generated, stored, and shown when the visitor comes back.
    ``held``: the turn's ledger rows when :func:`add_turn` already took them (one per target)."""
    lengths = run.line_lengths(ctx)
    requests: dict[str, tuple[ChatModel, list[ChatMessage]]] = {}
    for side in targets:
        ahead = lengths.get(battle.sides[side].contestant, 0)
        if ahead:  # the first streamed text replaces this
            placeholders[side].info(limits.line_notice(ahead))
        view = battle.sides[side]
        history = history_for_retry(view) if retry else model_history(view)
        requests[side] = (run.model_for(ctx, view.contestant), history)
    if held is None:
        try:
            held = start_ledger(ctx, battle_id=battle.id, sides=tuple(requests))
        except Refused as refused:
            return [Feedback("error", str(refused))]
    breaker.claim_trials(ctx.settings, ctx.engine, [battle.sides[side].contestant for side in requests])
    jobs = {
        side: DESK.start(battle_id=battle.id, side=side, model=model, messages=history,
                         params=run.params_for(ctx, battle.sides[side].contestant),
                         finish=functools.partial(_finish, ctx, battle, retry, ledger_id))
        for (side, (model, history)), ledger_id in zip(requests.items(), held, strict=True)
    }
    return follow_replies(jobs, placeholders)


def follow_replies(jobs: Mapping[str, ReplyJob], placeholders: Mapping[str, Any]) -> list[Feedback]:
    """Draw running replies into their sides' ``placeholders`` until every one is stored; what the
    visitor should be told (a reply not stored, a model that named itself)."""
    feedback: list[Feedback] = []

    def on_text(side: str, text: str) -> None:
        render.reply(placeholders[side], text, cursor=True)

    def on_done(job: ReplyJob) -> None:
        slot, result = placeholders[job.side], job.result
        if any(kind == "busy" for kind, _ in job.notes):
            slot.warning(limits.ARENA_BUSY)  # the line filled up after the check: no fault
        elif result is not None and result.finish_reason == "error":
            render.show_error(slot, result.error or "")
        else:
            render.reply(slot, result.text if result is not None else job.text)
        feedback.extend(Feedback(kind, text) for kind, text in job.notes if kind != "busy")

    follow(jobs, on_text=on_text, on_done=on_done)
    return feedback


def _finish(ctx: Context, battle: ShownBattle, retry: bool, ledger_id: int, job: ReplyJob,
            result: GenerationResult) -> None:
    """Store a reply that ended (in its job's thread, whether or not a page still follows it): made
    public, graded and written; the model's circuit breaker counts it (``webapp.breaker``); a model that
    named itself marks the battle; the ledger row is freed."""
    try:
        raw_error = (result.error or "unknown error") if result.finish_reason == "error" else ""
        view = battle.sides[job.side]
        result = public_result(result, where=f"battle {battle.id} side {job.side} ({view.contestant})")
        job.result = result
        unstored = add_reply(ctx, battle=battle, side=job.side, result=result, retry=retry)
        if unstored is not None:
            job.notes.append(("error", f"Model {job.side.upper()}: {unstored}"))
        busy = raw_error.startswith(BUSY_ERROR)
        if busy:
            job.notes.append(("busy", ""))
        breaker.record(ctx.settings, ctx.engine, slug=view.contestant, result=result, busy=busy)
        named = _names_itself(view, result.text) or _names_itself(view, raw_error)
        if named and battle.mode == "anonymous" and mark_revealed(ctx, battle_id=battle.id):
            job.notes.append(("warning", REVEALED_WARNING))
    finally:
        db_actions.finish_generations(ctx.engine, ids=(ledger_id,))


def public_result(result: GenerationResult, *, where: str) -> GenerationResult:
    """The result as the visitor sees it and the database stores it: text cleaned of what cannot be
    encoded, absurd usage figures dropped and, for a failure, the engine's own words (which may name
    the model, its endpoint or an account) replaced by :func:`public_error`; those words go to the
    server log under the same error id, for the operator."""
    cleaned = replace(
        result,
        text=clean_text(result.text),
        prompt_tokens=_plausible_count(result.prompt_tokens) or 0,
        new_tokens=_plausible_count(result.new_tokens) or 0,
        ttft_ms=_plausible_ms(result.ttft_ms),
        total_ms=_plausible_ms(result.total_ms) or 0.0,
    )
    if result.finish_reason != "error":
        return replace(cleaned, error=None)
    error_id = secrets.token_hex(4)
    detail = result.error or "unknown error"
    _LOG.warning("reply failed, error %s, %s: %s", error_id, where, detail)
    return replace(cleaned, error=public_error(detail, error_id))


def public_error(detail: str, error_id: str) -> str:
    """What a visitor reads, and the database keeps, of a failed reply: a category from a closed set
    (``db.export.error_category``: timeout, busy, refused, engine_error …) and a short id to quote."""
    return f"{error_category(detail) or 'error'} (error {error_id})"


_MAX_TOKENS = 10_000_000
_MAX_MS = 24 * 3600 * 1000.0


def _plausible_count(value: int | None) -> int | None:
    """A token count the database can hold and a reply can have, else None (an engine said 2**40)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_TOKENS:
        return None
    return value


def _plausible_ms(value: float | None) -> float | None:
    if value is None or not math.isfinite(value) or not 0 <= value <= _MAX_MS:
        return None
    return float(value)


def _names_itself(view: ShownSide, text: str) -> bool:
    terms = identity_terms(slug=view.contestant, display_name=view.display_name, family=view.family)
    return reveals_identity(text, terms)


def add_turn(
    ctx: Context, *, battle: ShownBattle, targets: tuple[str, ...], text: str, kind: str
) -> tuple[int, ...]:
    """The visitor's next turn in an open battle: its generations enter the ledger first, then the
    message is written; the ledger rows (for :func:`generate`). A turn the ledger refuses
    (:class:`Refused`) writes nothing, so the same turn sent from two servers at once is stored once:
    the early check (:func:`send_problem`) cannot see a turn that another process is starting."""
    held = start_ledger(ctx, battle_id=battle.id, sides=targets)
    try:
        add_visitor_message(ctx, battle=battle, targets=targets, text=text, kind=kind)
    except BaseException:
        db_actions.finish_generations(ctx.engine, ids=held)
        raise
    return held


def add_visitor_message(
    ctx: Context, *, battle: ShownBattle, targets: tuple[str, ...], text: str, kind: str
) -> None:
    """The visitor's turn to every target side, in one transaction."""
    try:
        db_actions.append_turn(
            ctx.engine,
            battle_id=battle.id,
            sides=targets,
            kind=kind,
            content=text,
            max_chars=ctx.settings.max_message_chars,
        )
    except BattleClosed as exc:
        raise Refused("This battle is closed (voted in another tab?). Start a new battle.") from exc
    except DBError as exc:
        raise Refused(f"Your message was not recorded: {exc}") from exc
    if kind == "correction":
        metrics.CORRECTIONS.labels(battle.mode).inc()


@dataclass(frozen=True, slots=True)
class ReplyVerdict:
    """What the grader said of a reply: its label, the mistakes' kinds and the same in words."""

    label: str | None = None
    mistakes: list[str] | None = None
    notes: list[str] | None = None


def _grade(battle: ShownBattle, side: str, text: str, *, retry: bool) -> ReplyVerdict:
    """The grader's verdict on a reply, graded in the battle's dialogue (``scenarios.grade_dialogue``,
    the generated dialogue the battle plays, or the reference one): a value the dialogue has not given
    yet is an assumption, a correction is graded against the turn it corrects, regressions and
    recurrences count. Empty for a free-chat scenario or an off-script request."""
    scenario = scenarios.get_scenario(battle.scenario)
    if not scenario.gradable or scenario.api is None:
        return ReplyVerdict()
    history: list[MessageView | DialogueMessage] = list(battle.sides[side].messages)
    if retry and history and history[-1].kind == "reply":
        history.pop()  # the reply this one replaces
    history.append(DialogueMessage(role="assistant", kind="reply", content=text))
    grades = scenarios.grade_dialogue(scenario, history, battle_script(scenario, battle.dialogue))
    if not grades or grades[-1].grade is None:
        return ReplyVerdict()
    record = grades[-1].as_json()
    return ReplyVerdict(record["label"], [str(m) for m in record["mistakes"]],
                        list(explain(grades[-1], scenario.api)))


def add_reply(
    ctx: Context, *, battle: ShownBattle, side: str, result: GenerationResult, retry: bool
) -> str | None:
    """Write one finished (or failed) reply, graded when the scenario allows, committed at once.

    Returns None when stored, else why not (in words). A storage failure belongs to its side only: it
    is logged with its traceback for the operator, and the other side's reply is still written.
    """
    try:
        _store_reply(ctx, battle=battle, side=side, result=result, retry=retry)
    except (DBError, SQLAlchemyError) as exc:
        _LOG.exception("reply of side %s in battle %s was not stored", side, battle.id)
        return f"This reply could not be stored ({type(exc).__name__}); please retry this side."
    return None


def _store_reply(
    ctx: Context, *, battle: ShownBattle, side: str, result: GenerationResult, retry: bool
) -> None:
    failed = result.finish_reason == "error"
    text = storable(result.text)  # (already public: see public_result)
    verdict = ReplyVerdict() if failed else _grade(battle, side, text, retry=retry)
    replaces = None
    if retry:
        last = battle.sides[side].messages[-1] if battle.sides[side].messages else None
        replaces = last.id if last is not None and last.kind == "reply" else None
    db_actions.append_message(
        ctx.engine,
        battle_id=battle.id,
        side=side,
        kind="reply",
        content=text,
        max_chars=max(ctx.settings.max_message_chars, len(text), 1),
        ttft_ms=result.ttft_ms,
        total_ms=result.total_ms,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.new_tokens,
        finish_reason=result.finish_reason,
        error=storable(result.error or "generation failed", max_chars=10_000) if failed else None,
        grader_label=verdict.label,
        grader_mistakes=verdict.mistakes,
        grader_notes=verdict.notes,
        replaces_message_id=replaces,
    )


def mark_revealed(ctx: Context, *, battle_id: str) -> bool:
    """Record that a model named itself; True if this changed the battle (so the visitor is told once)."""
    before = db_actions.get_battle(ctx.engine, battle_id=battle_id)
    if before.revealed_before_vote:
        return False
    db_actions.mark_revealed(ctx.engine, battle_id=battle_id)
    return True


def battles_last_hour(ctx: Context) -> tuple[int, int]:
    """Battles this visitor, and everyone from this address, started in the last hour."""
    return _mine_and_address(ctx, db_actions.count_battles_since, dt.timedelta(hours=1))


def generations_last_minute(ctx: Context) -> tuple[int, int]:
    """Generations started in the last minute (the ledger: interrupted ones too) for this visitor, and
    for everyone from this address."""
    return _mine_and_address(ctx, db_actions.count_generations_since, dt.timedelta(minutes=1))


def _mine_and_address(ctx: Context, count: Callable[..., int], window: dt.timedelta) -> tuple[int, int]:
    """``count`` over ``window`` for this visitor and for this address bucket (:func:`address_key`)."""
    since = dt.datetime.now(dt.UTC) - window
    mine = count(ctx.engine, visitor_id=ctx.visitor_id, since=since)
    return mine, count(ctx.engine, address_hash=address_key(ctx), since=since)
