"""The model pool: load the enabled catalogue once per process, one owning worker thread per model.

Why threads that own models: keras distribution state is thread-local and JAX work issued from many
Streamlit script threads at once would race for the same compiled functions and KV buffers. So each model
is built, compiled and run on its own worker thread; callers on any thread talk to it through a request
queue and read events back from a per-request queue. A failing request ends with an ``"error"`` result and
the worker carries on; a model that fails to load is marked ``failed`` and the others still serve.

Models load one after another in the order given (two CPU cores do not load two models faster; the web app
passes :func:`inference.catalogue.play_order`'s, so the models the Arena pairs come first), each one first
checked against the memory budget; the pool is useful as soon as two models are ready.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from inference import metrics
from inference.catalogue import CatalogueEntry
from inference.protocol import (
    BatchingChatModel,
    CancelToken,
    ChatMessage,
    ChatModel,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    error_result,
    error_text,
)

State = Literal["queued", "loading", "compiling", "ready", "failed", "refused"]


@dataclass(frozen=True)
class ModelStatus:
    """Where one model stands; ``message`` explains ``failed``/``refused`` in one line."""

    slug: str
    name: str
    state: State
    message: str = ""
    memory_mb: int | None = None
    load_seconds: float | None = None
    queued_requests: int = 0
    outstanding: int = 0  # requests submitted and not finished (generating or waiting): the line's length
    loading_since: float | None = None  # wall-clock time (``time.time()``) its load began; kept once ready


ProgressCallback = Callable[[ModelStatus], None]


def stage_text(stage: str, fraction: float) -> str:
    """One loading stage as people read it: ``assemble 40%``, ``read``, ``convert``, ``compile``."""
    return f"{stage} {fraction:.0%}" if 0.0 < fraction < 1.0 else stage
Builder = Callable[[CatalogueEntry], ChatModel]
Estimator = Callable[[CatalogueEntry], Any]  # MB as an int, or a builder.MemoryEstimate (peak, resident)


class ModelBusyError(RuntimeError):
    """The model's line is full (``max_outstanding``): the request was not queued at all."""


class ModelNotReadyError(LookupError):
    """``get`` on a model that is still loading, failed or was refused; the message says which."""


@dataclass(frozen=True)
class _Serving:
    """How a pool serves its models (see :class:`ModelPool`), shared with its workers and their handles."""

    warm_up_prompts: tuple[int, ...]
    batching: bool
    batch_window_s: float
    max_outstanding: int | None
    queue_deadline_s: float | None
    error_kind: metrics.ErrorKind


@dataclass
class _Request:
    messages: Sequence[ChatMessage]
    params: GenerationParams
    cancel: CancelToken
    events: queue.Queue[StreamEvent]
    submitted_at: float


class _Worker:
    """One model's thread: wait for its turn, have the pool load the model, then serve requests in
    arrival order. ``load`` (the pool's) builds the model and sets :attr:`model` (False: refused or
    failed); ``report`` hears every status change."""

    def __init__(
        self,
        entry: CatalogueEntry,
        *,
        turn: threading.Event,
        serving: _Serving,
        load: Callable[[_Worker], bool],
        report: ProgressCallback,
    ) -> None:
        self.entry = entry
        self.turn = turn  # set when this worker may start loading (the previous one finished)
        self.serving = serving
        self._load = load
        self._report = report
        self.done_loading = threading.Event()
        self.requests: queue.Queue[_Request | None] = queue.Queue()
        self.model: ChatModel | None = None
        self.outstanding = 0  # guarded by ``line_lock``
        self.line_lock = threading.Lock()
        self.status = ModelStatus(slug=entry.slug, name=entry.name, state="queued")
        self.thread = threading.Thread(target=self._run, name=f"model-{entry.slug}", daemon=True)

    def set_status(self, **changes: Any) -> None:
        self.status = replace(self.status, **changes)
        self._report(self.status)

    def stage(self, stage: str, fraction: float) -> None:
        """A loading stage as the status message ("assemble 40%", "read", "convert")."""
        self.set_status(message=stage_text(stage, fraction))

    def _run(self) -> None:
        self.turn.wait()
        try:
            if not self._load(self):
                return
        finally:
            self.done_loading.set()
        self._serve()

    def _serve(self) -> None:
        model = self.model
        assert model is not None
        if self.serving.batching and isinstance(model, BatchingChatModel) and model.supports_batching:
            self._serve_batched(model)
            return
        while True:
            request = self.requests.get()
            if request is None:
                return
            self._answer(model, request)

    def _serve_batched(self, model: BatchingChatModel) -> None:
        """Dynamic batching: between decode steps, every request that arrived joins the batcher.

        When idle, the first arrival waits ``batch_window_s`` for company so that requests sent
        together (both sides of battles that start at once) share their prefill and every step.
        """
        batcher = model.batcher
        window = self.serving.batch_window_s
        while True:
            arrived: list[_Request | None] = []
            if not batcher.busy:
                arrived.append(self.requests.get())
                if window > 0:
                    time.sleep(window)
            while True:
                try:
                    arrived.append(self.requests.get_nowait())
                except queue.Empty:
                    break
            for request in arrived:
                if request is None:
                    batcher.cancel_all()
                    return
                try:
                    model.submit(request.messages, request.params, emit=request.events.put,
                                 cancel=request.cancel, submitted_at=request.submitted_at)
                except Exception as exc:  # isolate the failure to this request
                    request.events.put(_error_result(request, exc))
            batcher.run_until(lambda: not self.requests.empty())  # a newcomer joins at the next step

    def _answer(self, model: ChatModel, request: _Request) -> None:
        finished = False
        try:
            if isinstance(model, BatchingChatModel):  # it counts the request's time in line in ttft/total
                events = model.stream(request.messages, request.params, cancel=request.cancel,
                                      submitted_at=request.submitted_at)
            else:
                events = model.stream(request.messages, request.params, cancel=request.cancel)
            for event in events:
                request.events.put(event)
                if isinstance(event, GenerationResult):
                    finished = True
                    break
        except Exception as exc:  # isolate the failure to this request
            request.events.put(_error_result(request, exc))
            finished = True
        if not finished:
            request.events.put(_error_result(request, RuntimeError("stream ended without a result")))


def _any_error(error: str) -> str:
    """The error kind when the pool's owner names none: every failure is one kind."""
    return "error"


def _error_result(request: _Request, exc: BaseException) -> GenerationResult:
    return error_result(exc, started=request.submitted_at)


class PooledChatModel:
    """The caller-side face of a pooled model: ``stream`` enqueues and relays the worker's events.

    Closing the stream early (a visitor who left) cancels the request, which frees the worker.
    """

    def __init__(self, worker: _Worker) -> None:
        self._worker = worker

    @property
    def slug(self) -> str:
        return self._worker.entry.slug

    @property
    def entry(self) -> CatalogueEntry:
        return self._worker.entry

    def __repr__(self) -> str:
        return f"PooledChatModel(slug={self.slug!r})"

    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: GenerationParams,
        *,
        cancel: CancelToken | None = None,
    ) -> Iterator[StreamEvent]:
        cancel = cancel or CancelToken()
        worker = self._worker
        limit = worker.serving.max_outstanding
        with worker.line_lock:
            in_line = worker.outstanding
            busy = limit is not None and in_line >= limit
            if not busy:
                worker.outstanding += 1
        if busy:
            refusal = ModelBusyError(f"model {self.slug!r} has {in_line} requests in line")
            metrics.record_refused(self.slug, error_text(refusal), error_kind=worker.serving.error_kind)
            raise refusal
        meter = metrics.RequestMeter(self.slug, error_kind=worker.serving.error_kind)
        request = _Request(list(messages), params, cancel, queue.Queue(), time.perf_counter())
        worker.requests.put(request)
        done = False
        started = False  # a first event arrived: the request left the line
        deadline = worker.serving.queue_deadline_s
        try:
            while True:
                poll = 1.0
                if not started and deadline is not None:
                    poll = min(poll, max(0.01, deadline - (time.perf_counter() - request.submitted_at)))
                try:
                    event = request.events.get(timeout=poll)
                except queue.Empty:
                    waited = time.perf_counter() - request.submitted_at
                    if not started and deadline is not None and waited >= deadline:
                        cancel.cancel()  # the worker drops it when its turn comes
                        event = _error_result(request, TimeoutError(f"waited {waited:.0f} s in line"))
                    elif worker.thread.is_alive():
                        continue
                    else:  # the worker is gone (pool closed): answer instead of waiting forever
                        event = _error_result(request, RuntimeError(f"model {self.slug!r} was shut down"))
                started = True
                meter.event(event)
                if isinstance(event, GenerationResult):
                    done = True
                yield event
                if done:
                    return
        finally:
            meter.close()
            with worker.line_lock:
                worker.outstanding -= 1
            if not done:
                cancel.cancel()


class ModelPool:
    """All enabled catalogue models, loading in the background.

    ``builder`` turns an entry into a ChatModel on the model's own thread (default:
    :func:`inference.builder.build_chat_model` without warm-up; the pool warms up and reports
    ``compiling``). ``estimator`` gives an entry's memory need in MB, or a
    :class:`inference.builder.MemoryEstimate` (default: :func:`inference.builder.estimate_memory`): a
    model starts loading when its load peak fits what is left of the budget, and then holds its
    resident share. ``on_progress`` is called (on worker threads) with
    every status change. ``distributions`` maps a slug to a factory of the keras distribution to build
    that model under (e.g. ``ModelParallel`` with the family's layout map); with ``mesh`` (a keras
    ``DeviceMesh``, see :func:`inference.sharding.make_mesh`) every other local model is sharded on it
    with :func:`inference.sharding.family_distribution`. Several models share one mesh.
    ``warm_up_prompts``: prompt lengths (tokens) whose buckets are compiled while loading, with the
    entry's ``max_new_tokens``; the default covers the calendar scenario's first turns. Later buckets
    compile on first use (a persistent compilation cache makes that cheap after a restart).
    ``batching`` (default on): local models on the fast engine serve through their continuous batcher
    (:class:`inference.engine.batcher.SlotScheduler`): concurrent requests share each decode step and
    a new one joins at the next step boundary instead of queueing behind a whole reply; requests
    arriving within ``batch_window_s`` of an idle model start together. Off: one request at a time.
    ``keep_keras_weights`` (default off): keep keras-hub's float32 variables beside the fast engine's
    copy (tests compare the two; production frees them).
    ``max_outstanding`` bounds each model's line (requests submitted and not finished): one more and
    ``stream`` raises :class:`ModelBusyError` without queueing. ``queue_deadline_s``: a request that
    has produced no event after that long is cancelled and answered with an ``error`` result.
    Every request is recorded in :mod:`inference.metrics` (queue, in flight, time to first token, reply
    time, tokens per second, errors by the kind ``error_kind`` names from a failure's text; default
    ``error``).
    """

    def __init__(
        self,
        entries: Sequence[CatalogueEntry],
        *,
        memory_budget_mb: int,
        cache_dir: Path,
        api_keys: Mapping[str, str] | None = None,
        on_progress: ProgressCallback | None = None,
        builder: Builder | None = None,
        estimator: Estimator | None = None,
        distributions: Mapping[str, Callable[[], Any]] | None = None,
        mesh: Any | None = None,
        warm_up_prompts: Sequence[int] = (200,),
        batching: bool = True,
        batch_window_s: float = 0.005,
        keep_keras_weights: bool = False,
        max_outstanding: int | None = None,
        queue_deadline_s: float | None = None,
        remote_timeouts: tuple[float, float] | None = None,
        error_kind: metrics.ErrorKind | None = None,
        start: bool = True,
    ) -> None:
        if memory_budget_mb < 1:
            raise ValueError("memory_budget_mb must be >= 1")
        self.memory_budget_mb = memory_budget_mb
        self._cache_dir = cache_dir
        self._api_keys = dict(api_keys or {})
        self._remote_timeouts = remote_timeouts
        self._on_progress = on_progress
        self._builder = builder
        self._estimator = estimator
        self._distributions = dict(distributions or {})
        self._mesh = mesh
        self._keep_keras_weights = keep_keras_weights
        if max_outstanding is not None and max_outstanding < 1:
            raise ValueError("max_outstanding must be >= 1")
        if queue_deadline_s is not None and queue_deadline_s <= 0:
            raise ValueError("queue_deadline_s must be > 0")
        self._serving = _Serving(warm_up_prompts=tuple(warm_up_prompts), batching=batching,
                                 batch_window_s=batch_window_s, max_outstanding=max_outstanding,
                                 queue_deadline_s=queue_deadline_s,
                                 error_kind=error_kind or _any_error)
        self._lock = threading.Lock()
        self._reserved: dict[str, int] = {}
        self._changed = threading.Condition()
        self._workers: dict[str, _Worker] = {}
        previous = threading.Event()
        previous.set()
        for entry in entries:
            if not entry.enabled:
                continue
            if entry.slug in self._workers:
                raise ValueError(f"model {entry.slug!r} appears twice")
            worker = _Worker(entry, turn=previous, serving=self._serving, load=self._load,
                             report=self._report)
            self._workers[entry.slug] = worker
            previous = worker.done_loading
        self._started = False
        self._closed = False
        if start:
            self.start()

    # ---- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start loading in the background (idempotent)."""
        with self._lock:
            if self._started:
                return
            self._started = True
        for worker in self._workers.values():
            worker.thread.start()

    def close(self, *, timeout: float = 10.0) -> None:
        """Stop the workers after their current request (loading models finish loading first)."""
        self._closed = True
        for worker in self._workers.values():
            worker.requests.put(None)
        deadline = time.monotonic() + timeout
        for worker in self._workers.values():
            if worker.thread.is_alive():
                worker.thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> ModelPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- queries --------------------------------------------------------------------------------

    def slugs(self) -> list[str]:
        """Every enabled model, in loading order (the order the pool was given)."""
        return list(self._workers)

    def ready_slugs(self) -> list[str]:
        """Models that can answer now, in loading order."""
        return [s for s, w in self._workers.items() if w.status.state == "ready"]

    @property
    def mesh(self) -> Any | None:
        """The device mesh local models are sharded on (None: each on one device)."""
        return self._mesh

    def status(self) -> dict[str, ModelStatus]:
        """A snapshot of every model's state (with its current queue length)."""
        return {
            s: replace(w.status, queued_requests=w.requests.qsize(), outstanding=w.outstanding)
            for s, w in self._workers.items()
        }

    def get(self, slug: str) -> PooledChatModel:
        """The ready model ``slug``; KeyError if unknown, ModelNotReadyError if not ready (yet)."""
        worker = self._workers.get(slug)
        if worker is None:
            raise KeyError(f"unknown model {slug!r}; enabled: {', '.join(self._workers) or 'none'}")
        if self._closed:
            raise ModelNotReadyError(f"model {slug!r} is unavailable: the pool is closed")
        status = worker.status
        if status.state != "ready":
            detail = f": {status.message}" if status.message else ""
            raise ModelNotReadyError(f"model {slug!r} is {status.state}{detail}")
        return PooledChatModel(worker)

    def wait_ready(self, *, count: int | None = None, timeout: float) -> list[str]:
        """Block until ``count`` models are ready (default: all that can be) or ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                ready = self.ready_slugs()
                settled = all(w.done_loading.is_set() for w in self._workers.values())
                if (count is not None and len(ready) >= count) or settled:
                    return ready
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return ready
                self._changed.wait(remaining)

    # ---- loading (on each worker's thread) ------------------------------------------------------

    def _load(self, worker: _Worker) -> bool:
        """Book ``worker``'s model's memory, build it and compile it; False if it was refused or failed
        (its status says why), True once :attr:`_Worker.model` is set and the status is ``ready``."""
        entry = worker.entry
        started = time.perf_counter()
        try:
            estimate = self._estimate(entry)
            peak, needed = (estimate, estimate) if isinstance(estimate, int) else (
                estimate.peak_mb, estimate.resident_mb)
            refusal = self._reserve(entry.slug, needed, peak_mb=peak)
            if refusal:
                worker.set_status(state="refused", message=refusal, memory_mb=peak)
                return False
            worker.set_status(state="loading", memory_mb=needed, loading_since=time.time())
            model = self._build(entry, worker.stage)
            if isinstance(model, BatchingChatModel):
                worker.set_status(state="compiling", message="")
                self._warm_up(model, new_tokens=entry.sampling.max_new_tokens)
        except BaseException as exc:  # isolate: one bad model must not stop the others; a library's
            # SystemExit included (on this worker thread it would only end the thread, "loading" forever)
            self._release(entry.slug)
            worker.set_status(state="failed", message=f"{type(exc).__name__}: {exc}")
            return False
        worker.model = model
        worker.set_status(state="ready", message="", load_seconds=round(time.perf_counter() - started, 2))
        return True

    def _warm_up(self, model: BatchingChatModel, *, new_tokens: int) -> None:
        """Compile the buckets of the first requests (``warm_up_prompts``) now, batched ones too where
        the model serves them, then hand the compiler's temporaries back (the models stay resident)."""
        prompts = self._serving.warm_up_prompts
        model.warm_up(requests=[(1, 1), *((n, new_tokens) for n in prompts)])
        if self._serving.batching and model.supports_batching:
            for n in prompts:
                model.warm_up_batches(prompt_tokens=n, new_tokens=new_tokens)
        from inference.local import return_freed_memory

        return_freed_memory()

    # ---- worker callbacks -----------------------------------------------------------------------

    def _report(self, status: ModelStatus) -> None:
        metrics.set_ready(status.slug, status.state == "ready")
        with self._changed:
            self._changed.notify_all()
        if self._on_progress is not None:
            with contextlib.suppress(Exception):  # a broken progress display must not break loading
                self._on_progress(status)

    def _estimate(self, entry: CatalogueEntry) -> Any:
        if self._estimator is not None:
            return self._estimator(entry)
        from inference.builder import estimate_memory

        return estimate_memory(entry, cache_dir=self._cache_dir)

    def _reserve(self, slug: str, needed_mb: int, *, peak_mb: int | None = None) -> str | None:
        """Book ``needed_mb`` (what the model holds once loaded) if its load peak fits what is left; or
        the one-line reason it does not. Models load one at a time, so only one peak is ever live."""
        peak = needed_mb if peak_mb is None else max(peak_mb, needed_mb)
        with self._lock:
            used = sum(self._reserved.values())
            if used + peak > self.memory_budget_mb:
                return (
                    f"needs ~{peak} MB but only {self.memory_budget_mb - used} MB of the "
                    f"{self.memory_budget_mb} MB budget is left; raise ARENA_MEMORY_BUDGET_MB or "
                    "disable a model in the catalogue"
                )
            self._reserved[slug] = needed_mb
            return None

    def _release(self, slug: str) -> None:
        with self._lock:
            self._reserved.pop(slug, None)

    def _build(self, entry: CatalogueEntry, progress: Callable[[str, float], None]) -> ChatModel:
        if self._builder is not None:
            return self._builder(entry)
        from inference.builder import build_chat_model

        return build_chat_model(
            entry,
            progress=progress,
            cache_dir=self._cache_dir,
            api_key=self._api_keys.get(entry.slug),
            remote_timeouts=self._remote_timeouts,
            distribution=self._distribution_for(entry),
            warm_up=False,
            keep_keras_weights=self._keep_keras_weights,
        )

    def _distribution_for(self, entry: CatalogueEntry) -> Any | None:
        factory = self._distributions.get(entry.slug)
        if factory is not None:
            return factory()
        if self._mesh is None or entry.source_kind == "remote":
            return None
        from inference.sharding import family_distribution

        return family_distribution(entry.family, self._mesh)


def enable_compilation_cache(directory: Path) -> None:
    """Keep compiled prefill/step functions on disk, so a restarted app recompiles in a fraction.

    A process-wide JAX setting: entry points (CLI, web app) call it, library code never does.
    """
    import jax

    directory.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
