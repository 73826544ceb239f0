"""Which battle a visitor's page shows after a reload: the open one, or the one just voted on until the
visitor presses *New battle* (the reveal stays across reloads); pressing it is written here."""

from __future__ import annotations

from sqlalchemy import Engine, and_, or_, select

from db.actions.battles import lock_battle
from db.actions.reading import battle_view
from db.checks import require_choice, require_int, retry_read
from db.engine import read_session, write_session
from db.errors import InvalidInput
from db.models import MODES, Battle, utcnow
from db.views import BattleView

__all__ = ["dismiss_battle", "resume_battle"]


@retry_read
def resume_battle(engine: Engine, *, visitor_id: int, mode: str) -> BattleView | None:
    """The visitor's most recently active battle of ``mode`` that its page still shows: an open one, or
    a voted one whose reveal was not dismissed (*New battle*); None when there is none."""
    require_choice(mode, MODES, what="mode")
    require_int(visitor_id, what="visitor id")
    shown = or_(Battle.status == "open", and_(Battle.status == "voted", Battle.dismissed_at.is_(None)))
    with read_session(engine) as session:
        query = select(Battle).where(Battle.visitor_id == visitor_id, Battle.mode == mode, shown)
        battle = session.scalar(query.order_by(Battle.updated_at.desc(), Battle.created_at.desc()).limit(1))
        return battle_view(session, battle) if battle is not None else None


def dismiss_battle(engine: Engine, *, battle_id: str, visitor_id: int) -> None:
    """*New battle* after a vote: the visitor's page stops showing this closed battle, also after a
    reload (an open battle is left as it is: it is skipped or voted, never dismissed)."""
    require_int(visitor_id, what="visitor id")
    with write_session(engine) as session:
        battle = lock_battle(session, battle_id)
        if battle.visitor_id != visitor_id:
            raise InvalidInput("this battle belongs to another visitor")
        if battle.status != "open" and battle.dismissed_at is None:
            battle.dismissed_at = utcnow()
