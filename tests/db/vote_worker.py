"""A separate voter process for the concurrency tests (run as a script, not collected by pytest).

Usage: vote_worker.py URL IDS_FILE CHOICE. Connects, prints ``ready``, waits for ``go`` on stdin, then
votes on every battle id in IDS_FILE (one per line, in order) and prints ``ok ID`` once a vote is
committed or ``refused ID REASON``, flushing each line: the parent trusts ``ok`` lines as confirmations.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from db import actions  # noqa: E402
from db.engine import make_engine  # noqa: E402
from db.errors import VoteRefused  # noqa: E402


def main(url: str, ids_file: str, choice: str) -> int:
    battle_ids = Path(ids_file).read_text().split()
    engine = make_engine(url)
    with engine.connect():
        pass
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    for battle_id in battle_ids:
        try:
            actions.record_vote(engine, battle_id=battle_id, choice=choice)
        except VoteRefused as refused:
            print(f"refused {battle_id} {refused.reason}", flush=True)
        else:
            print(f"ok {battle_id}", flush=True)
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
