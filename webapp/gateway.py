"""The web app's one door to the layers below: shared resources and the battle operations pages need.

Pages never import ``db``, ``inference`` or ``scenarios`` directly; they call these small functions,
which call those layers' public functions (no queries, no model internals here either). Every write is
committed by ``db`` before the function returns, so the UI only confirms what is already stored.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

import streamlit as st
from sqlalchemy.exc import SQLAlchemyError

import scenarios
from db import errors as db_errors
from db import repository as db_repo
from db.checks import storable_text as storable
from inference.protocol import ChatModel, GenerationParams, GenerationResult
from settings import Settings
from webapp import resources
from webapp.inflight import InFlight
from webapp.views import ShownBattle, shown_battle
from webapp.visitor import current_address, current_visitor_id

_LOG = logging.getLogger(__name__)
DEFAULT_SCENARIO = "calendar"
FREE_CHAT = "free-chat"
_BATTLE_KEY = "battle_id:{mode}"
POOL_POLL_S = 2.0
CHOICE_LABELS = {"a": "Model A", "b": "Model B", "tie": "Tie", "both_bad": "Both bad"}


@dataclass(frozen=True)
class Context:
    """Everything one script run needs: settings, the shared engine, this visitor, the pool on demand."""

    settings: Settings
    engine: Any
    visitor_id: int = 0
    anon_id: str = ""
    address_hash: str | None = None  # salted hash of the visitor's address (None when unknown)

    @property
    def pool(self) -> Any:
        """The shared model pool (created, and loading started, on first use in the process)."""
        s = self.settings
        return resources.pool(str(s.catalogue_path), s.memory_budget_mb, str(s.data_dir), s.mesh)


@dataclass(frozen=True)
class BattleSetup:
    scenario: str
    system_prompt: str
    contestants: tuple[str, ...] = ()  # chosen by name (named/direct); empty: the pair sampler picks
    names: tuple[str, ...] = ()  # their display names, shown before the battle starts


def reader() -> Context:
    """A context for pages that only read (leaderboard, dataset, admin): no visitor row is written."""
    settings = resources.settings()
    return Context(settings=settings, engine=resources.engine(settings.resolved_database_url))


def context() -> Context:
    """The context of a visitor's page: the visitor's row is created on their first action page view."""
    settings = resources.settings()
    engine = resources.engine(settings.resolved_database_url)
    anon = current_visitor_id(salt=settings.hash_salt.get_secret_value())
    digest = address_digest(settings)
    visitor = _visitor(engine, anon, digest)
    resources.stale_sweeper(settings.resolved_database_url, settings.stale_battle_minutes)
    return Context(settings=settings, engine=engine, visitor_id=visitor, anon_id=anon, address_hash=digest)


def address_digest(settings: Settings) -> str | None:
    """The salted hash of this request's address (None where there is none, e.g. AppTest)."""
    address = current_address(trusted_proxies=settings.trusted_proxies)
    return db_repo.hash_address(address, salt=settings.hash_salt.get_secret_value()) if address else None


def _visitor(engine: Any, anon: str, digest: str | None) -> int:
    """The visitor's row id, written once per session (not on every rerun)."""
    cached = st.session_state.get("visitor_row")
    if cached and cached[0] == anon:
        return int(cached[1])
    view = db_repo.get_or_create_visitor(engine, anon_id=anon, address_hash=digest)
    st.session_state["visitor_row"] = (anon, view.id)
    return view.id


# --- scenarios ----------------------------------------------------------------------------------------


def scenario_choices() -> dict[str, str]:
    return {s.slug: s.title for s in scenarios.list_scenarios()}


def system_prompt(slug: str) -> str:
    return scenarios.get_scenario(slug).system_prompt


def scripted_turns(slug: str) -> list[str]:
    return [t.user for t in scenarios.get_scenario(slug).turns]


def choice_label(choice: str) -> str:
    return CHOICE_LABELS.get(choice, choice)


# --- battles ------------------------------------------------------------------------------------------


def load_battle(ctx: Context, *, battle_id: str) -> ShownBattle:
    return shown_battle(db_repo.get_battle(ctx.engine, battle_id=battle_id))


def current_battle(ctx: Context, *, mode: str) -> ShownBattle | None:
    """The battle this tab shows: the one in session state, else the visitor's open one (a reload)."""
    key = _BATTLE_KEY.format(mode=mode)
    battle_id = st.session_state.get(key)
    if battle_id:
        try:
            return load_battle(ctx, battle_id=battle_id)
        except db_errors.NotFound:
            st.session_state.pop(key, None)
    resumed = db_repo.resume_open_battle(ctx.engine, visitor_id=ctx.visitor_id, mode=mode)
    if resumed is None:
        return None
    st.session_state[key] = resumed.id
    return shown_battle(resumed)


def forget_battle(*, mode: str) -> None:
    """ "New battle": this tab stops showing the closed battle (nothing is deleted)."""
    st.session_state.pop(_BATTLE_KEY.format(mode=mode), None)


def abandon(ctx: Context, *, mode: str, battle_id: str) -> str | None:
    """Close this visitor's open battle without a vote ("Skip this battle", "New chat") and stop showing
    it; None on success, else why not."""
    try:
        db_repo.abandon_battle(ctx.engine, battle_id=battle_id, visitor_id=ctx.visitor_id)
    except db_errors.BattleClosed:
        pass  # closed meanwhile (another tab voted or skipped): nothing left to skip
    except db_errors.DBError as exc:
        return f"Could not skip the battle: {exc}"
    forget_battle(mode=mode)
    return None


class Refused(Exception):
    """An action the database (or the pool) refused; the message is for the visitor."""


def start_battle(
    ctx: Context, *, mode: str, setup: BattleSetup, first_request: str, targets: tuple[str, ...]
) -> ShownBattle:
    """Open a battle with the chosen contestants (or a pair from the sampler) and its first request,
    in one transaction: a refused message leaves no empty battle."""
    try:
        picks = list(setup.contestants) if setup.contestants else resources.sample_pair(ctx)
        battle = _open(ctx, mode=mode, setup=setup, picks=picks, first_request=first_request, targets=targets)
    except db_errors.InvalidInput as exc:
        raise Refused(f"Your message was not recorded: {exc}") from exc
    except (db_errors.DBError, resources.NotEnoughModels) as exc:
        raise Refused(f"Could not start the battle: {exc}") from exc
    st.session_state[_BATTLE_KEY.format(mode=mode)] = battle.id
    return shown_battle(battle)


def _open(
    ctx: Context,
    *,
    mode: str,
    setup: BattleSetup,
    picks: list[str],
    first_request: str,
    targets: tuple[str, ...],
) -> Any:
    params = {slug: resources.sampling(ctx, slug) for slug in picks}
    return db_repo.open_battle(
        ctx.engine,
        mode=mode,
        scenario=setup.scenario,
        contestant_a=picks[0],
        contestant_b=picks[1] if len(picks) > 1 else None,
        visitor_id=ctx.visitor_id,
        system_prompt=setup.system_prompt,
        params_a=params[picks[0]],
        params_b=params[picks[1]] if len(picks) > 1 else None,
        first_request=first_request,
        first_request_sides=targets,
        max_chars=ctx.settings.max_message_chars,
    )


def params_for(ctx: Context, slug: str) -> GenerationParams:
    return resources.entry_for(ctx, slug).sampling


def add_visitor_message(
    ctx: Context, *, battle: ShownBattle, targets: tuple[str, ...], text: str, kind: str
) -> None:
    """The visitor's turn to every target side, in one transaction."""
    try:
        db_repo.append_turn(
            ctx.engine,
            battle_id=battle.id,
            sides=targets,
            kind=kind,
            content=text,
            max_chars=ctx.settings.max_message_chars,
        )
    except db_errors.BattleClosed as exc:
        raise Refused("This battle is closed (voted in another tab?). Start a new battle.") from exc
    except db_errors.DBError as exc:
        raise Refused(f"Your message was not recorded: {exc}") from exc


def _grade(battle: ShownBattle, side: str, text: str, *, retry: bool) -> tuple[str | None, list[str] | None]:
    """The grader's label for a reply, graded in its dialogue (``scenarios.grade_dialogue``): the year a
    visitor has not given yet is an assumption, a correction is graded against the turn it corrects,
    regressions and recurrences count. None for a free-chat scenario or an off-script request."""
    scenario = scenarios.get_scenario(battle.scenario)
    if not scenario.gradable:
        return None, None
    history: list[Any] = list(battle.sides[side].messages)
    if retry and history and history[-1].kind == "reply":
        history.pop()  # the reply this one replaces
    reply = {"role": "assistant", "kind": "reply", "content": text}
    grades = scenarios.grade_dialogue(scenario, [*history, reply])
    if not grades or grades[-1].grade is None:
        return None, None
    record = grades[-1].as_json()
    return record["label"], [str(m) for m in record["mistakes"]]


def add_reply(
    ctx: Context, *, battle: ShownBattle, side: str, result: GenerationResult, retry: bool
) -> str | None:
    """Write one finished (or failed) reply, graded when the scenario allows, committed at once.

    Returns None when stored, else why not (in words). A storage failure belongs to its side only: it
    is logged with its traceback for the operator, and the other side's reply is still written.
    """
    try:
        _store_reply(ctx, battle=battle, side=side, result=result, retry=retry)
    except (db_errors.DBError, SQLAlchemyError) as exc:
        _LOG.exception("reply of side %s in battle %s was not stored", side, battle.id)
        return f"This reply could not be stored ({type(exc).__name__}); please retry this side."
    return None


def _store_reply(
    ctx: Context, *, battle: ShownBattle, side: str, result: GenerationResult, retry: bool
) -> None:
    failed = result.finish_reason == "error"
    text = storable(result.text)
    label, mistakes = (None, None) if failed else _grade(battle, side, text, retry=retry)
    replaces = None
    if retry:
        last = battle.sides[side].messages[-1] if battle.sides[side].messages else None
        replaces = last.id if last is not None and last.kind == "reply" else None
    db_repo.append_message(
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
        grader_label=label,
        grader_mistakes=mistakes,
        replaces_message_id=replaces,
    )


def mark_revealed(ctx: Context, *, battle_id: str) -> bool:
    """Record that a model named itself; True if this changed the battle (so the visitor is told once)."""
    before = db_repo.get_battle(ctx.engine, battle_id=battle_id)
    if before.revealed_before_vote:
        return False
    db_repo.mark_revealed(ctx.engine, battle_id=battle_id)
    return True


def record_vote(ctx: Context, *, battle_id: str, choice: str) -> str | None:
    """Store the vote; returns None on success or the refusal reason in words."""
    try:
        db_repo.record_vote(
            ctx.engine, battle_id=battle_id, choice=choice, visitor_id=ctx.visitor_id, accept_revealed=True
        )
    except db_errors.VoteRefused as refused:
        return {
            "already_voted": "This battle already has a vote.",
            "not_ready": "Both models must reply before you vote.",
            "closed": "This battle is closed.",
            "not_owner": "This battle belongs to another visitor.",
        }.get(refused.reason, str(refused))
    return None


def set_outcome(ctx: Context, *, correction_id: int, outcome: str) -> None:
    db_repo.set_correction_outcome(
        ctx.engine, correction_id=correction_id, outcome=outcome, judged_by="person"
    )


# --- limits -------------------------------------------------------------------------------------------


def battles_last_hour(ctx: Context) -> tuple[int, int]:
    """Battles this visitor, and everyone from this address, started in the last hour."""
    since = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    mine = db_repo.count_battles_since(ctx.engine, visitor_id=ctx.visitor_id, since=since)
    if ctx.address_hash is None:
        return mine, mine
    return mine, db_repo.count_battles_since(ctx.engine, address_hash=ctx.address_hash, since=since)


def generations_last_minute(ctx: Context) -> tuple[int, int]:
    """Replies generated in the last minute for this visitor, and for everyone from this address."""
    since = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
    mine = db_repo.count_generations_since(ctx.engine, visitor_id=ctx.visitor_id, since=since)
    if ctx.address_hash is None:
        return mine, mine
    return mine, db_repo.count_generations_since(ctx.engine, address_hash=ctx.address_hash, since=since)


def line_lengths(ctx: Context) -> dict[str, int]:
    return resources.line_lengths(ctx)


def in_flight() -> InFlight:
    return resources.in_flight()


# --- models -------------------------------------------------------------------------------------------


def model_for(ctx: Context, slug: str) -> ChatModel:
    return resources.model(ctx, slug)


def serving_devices() -> str:
    """Where the models are served (``ARENA_MESH``), in words."""
    return resources.serving_devices(resources.settings().mesh)


def ready_contestants(ctx: Context) -> list[Any]:
    return resources.ready_contestants(ctx)


def show_pool_progress(ctx: Context, *, needed: int) -> bool:
    """True once ``needed`` models are usable; until then the page shows each model's loading state.

    The progress is a fragment that the browser reruns every ``POOL_POLL_S`` seconds (``run_every``);
    once enough models are ready it reruns the whole page, which then gets True here. No script run
    sleeps or chains ``st.rerun()``: a chain ends for good as soon as one run decides not to go on.
    """
    if len(resources.pool_snapshot(ctx).usable) >= needed:
        return True
    _pool_progress(ctx, needed=needed)
    return False


@st.fragment(run_every=POOL_POLL_S)
def _pool_progress(ctx: Context, *, needed: int) -> None:
    snapshot = resources.pool_snapshot(ctx)  # one read: the counts and the states below agree
    if len(snapshot.usable) >= needed:
        st.rerun(scope="app")  # the page now opens (also when a model finished since the check above)
    st.info(f"Models are loading and compiling; the page opens as soon as {needed} are ready.")
    st.caption(f"Serving on {resources.serving_devices(ctx.settings.mesh)}.")
    total = len(snapshot.rows)
    st.progress(snapshot.ready / max(1, total), text=f"{snapshot.ready} of {total} models ready")
    for name, state, message in snapshot.rows:
        st.text(f"{name}: {state}{' - ' + message if message else ''}")
    if snapshot.settled:
        # Still polled: an admin may enable a contestant whose model is ready.
        st.error("Not enough models could be loaded; see the messages above.")
