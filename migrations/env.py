"""Alembic environment: ``db``'s metadata, and the URL from the caller or from the settings object.

``db.migrate`` passes an open connection (``config.attributes["connection"]``) or a URL
(``config.attributes["url"]``); the plain ``alembic`` command line falls back to ``settings.py``.
SQLite needs ``render_as_batch``: it cannot ALTER most things, so Alembic copies the table instead.

Several app servers started at once on one fresh PostgreSQL database each upgrade it on their first page:
on PostgreSQL the upgrade first takes a transaction-level advisory lock, so they migrate one after the
other and the later ones find the schema at head (unlocked, the losers failed creating
``alembic_version``: a duplicate key in the catalogue).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, text

from db.engine import make_engine
from db.models import Base

config = context.config
target_metadata = Base.metadata
MIGRATION_LOCK = 0x66697869_74000001  # the advisory-lock key every process upgrading a database waits on


def _url() -> str:
    url = config.attributes.get("url")
    if url:
        return str(url)
    from settings import get_settings_without_secrets as get_settings

    return get_settings().resolved_database_url


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":  # one upgrade at a time (see the module docstring)
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
