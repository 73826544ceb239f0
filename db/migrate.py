"""Schema migrations from code: the app and the CLI call :func:`upgrade_to_head` on start.

The Alembic environment lives in ``migrations/`` (it imports ``db.models``, never the reverse at import
time: this module loads Alembic lazily so that importing ``db`` stays light).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.config import Config

REPO_ROOT = Path(__file__).resolve().parent.parent
ALEMBIC_INI = REPO_ROOT / "alembic.ini"
SCRIPT_LOCATION = REPO_ROOT / "migrations"


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at our scripts and at ``url`` (no configparser interpolation of the URL)."""
    from alembic.config import Config

    config = Config(str(ALEMBIC_INI))
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    config.attributes["url"] = url
    return config


def upgrade_to_head(url: str) -> None:
    """Bring the database at ``url`` to the newest schema (idempotent; a no-op when already there)."""
    from alembic import command

    command.upgrade(alembic_config(url), "head")


def downgrade_to_base(url: str) -> None:
    """Undo every migration (tests and disaster drills only: the application never deletes data)."""
    from alembic import command

    command.downgrade(alembic_config(url), "base")


def current_revision(url: str) -> str | None:
    """The revision the database is at, or None for an empty database."""
    from alembic.runtime.migration import MigrationContext

    from db.engine import make_engine

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def head_revision() -> str | None:
    """The newest revision in ``migrations/versions``."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
