"""A separate server-like process for the generation-ledger tests (run as a script, not collected).

Usage: generation_worker.py URL VISITOR_ID ADDRESS BATTLE_ID SIDES IN_FLIGHT_CAP. Connects, prints
``ready``, waits for ``go`` on stdin, then starts one turn's generations (SIDES is e.g. ``ab``) and prints
``ok ID...`` or ``refused REASON``, and exits WITHOUT finishing them, as a crashed process would.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from db import actions  # noqa: E402
from db.engine import make_engine  # noqa: E402


def main(url: str, visitor: str, address: str, battle_id: str, sides: str, cap: str) -> int:
    engine = make_engine(url)
    with engine.connect():
        pass
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    limits = actions.GenerationLimits(per_minute_visitor=100, per_minute_address=100,
                                      in_flight_address=int(cap), lease=dt.timedelta(minutes=5))
    try:
        ids = actions.start_generations(engine, visitor_id=int(visitor), address_hash=address,
                                        battle_id=battle_id, sides=tuple(sides), limits=limits)
    except actions.GenerationRefused as refused:
        print(f"refused {refused.reason}", flush=True)
    else:
        print("ok " + " ".join(map(str, ids)), flush=True)
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))
