"""``python -m inference serve``: catalogue models over an OpenAI-compatible HTTP API (``inference.serve``
on uvicorn), so app servers hold no model: their catalogues point at it with ``family = "remote"``.

The pool loads every named model in the background; ``/v1/models`` lists them with ``ready``, and a
request to one still loading is answered 503 with ``Retry-After``. Each model's line is bounded by
``ARENA_MODEL_QUEUE_LIMIT`` (one more: 429) and ``ARENA_MODEL_QUEUE_DEADLINE_S``; ``ARENA_SERVE_TOKEN``,
when set, is the bearer token clients must send. With ``ARENA_METRICS_PORT`` the process also serves
``/metrics`` (the pool's per-model series) and ``/ready`` (every named model loaded) on that port;
``ARENA_LOG_FORMAT=json`` makes its log lines, uvicorn's included, JSON.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import TYPE_CHECKING, Any

from commands.inference_models import UsageError

if TYPE_CHECKING:
    from wiring import Readiness


def add_serve_parser(sub: Any) -> None:
    from inference.serve import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_TOKENS

    p = sub.add_parser("serve", help="serve catalogue models over an OpenAI-compatible HTTP API")
    p.add_argument("--models", required=True, help="comma-separated catalogue slugs, or 'all' (enabled)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES,
                   help=f"largest request body (default {DEFAULT_MAX_BODY_BYTES}); larger: 413")
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                   help=f"largest max_tokens a request may ask (default {DEFAULT_MAX_TOKENS}); larger: 400")
    p.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Load the models and serve until interrupted."""
    import uvicorn

    from commands.run_models import RunInputError, select_entries
    from inference.catalogue import CatalogueError, load_catalogue
    from inference.serve import create_app
    from settings import get_settings_without_secrets
    from wiring import configure_logging, enable_compilation_cache, model_pool, start_metrics_server

    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be between 1 and 65535, got {args.port}")
    if args.max_body_bytes < 1 or args.max_tokens < 1:
        raise UsageError("--max-body-bytes and --max-tokens must be >= 1")
    settings = get_settings_without_secrets()
    slugs = [s.strip() for s in args.models.split(",") if s.strip()]
    try:
        entries = select_entries(load_catalogue(settings.catalogue_path), slugs or ["?"])
    except (CatalogueError, RunInputError) as exc:
        raise UsageError(str(exc)) from exc
    configure_logging(settings)
    enable_compilation_cache(settings)
    pool = model_pool(settings, entries, visitor_queue=True)
    start_metrics_server(settings, functools.partial(readiness, pool))
    ready_models = serving(pool)
    token = settings.serve_token.get_secret_value() if settings.serve_token is not None else None
    app = create_app(ready_models, token=token, max_body_bytes=args.max_body_bytes,
                     max_tokens=args.max_tokens)
    print(f"serving {', '.join(e.slug for e in entries)} on http://{args.host}:{args.port}/v1 "
          f"(models load in the background)", file=sys.stderr)
    try:
        # JSON logs: uvicorn's loggers hand their lines to the root logger's JSON handler
        log_config = None if settings.log_format == "json" else uvicorn.config.LOGGING_CONFIG
        uvicorn.run(app, host=args.host, port=args.port, log_level="info", log_config=log_config)
    finally:
        pool.close()
    return 0


def readiness(pool: Any) -> Readiness:
    """The model server's ``/ready``: ready once every model it serves is loaded."""
    from wiring import Readiness

    ready, named = len(pool.ready_slugs()), len(pool.slugs())
    return Readiness(ready == named, {"models_ready": ready, "models": named})


def serving(pool: Any) -> Any:
    """``models()`` for :func:`inference.serve.create_app`: each slug's pooled model once ready, else None."""

    def models() -> dict[str, Any]:
        ready = set(pool.ready_slugs())
        return {slug: pool.get(slug) if slug in ready else None for slug in pool.slugs()}

    return models
