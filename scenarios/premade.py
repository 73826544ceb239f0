"""The pre-made faulty replies of the study's third table, shipped as data in ``data/``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

PREMADE_PATH = Path(__file__).resolve().parent / "data" / "premade_faulty_replies.json"


@dataclass(frozen=True, slots=True)
class PremadeCase:
    """A faulty reply to scripted turn ``turn`` and the one correction the model then receives."""

    kind: str
    label: str
    turn: int
    faulty: str
    correction: str


def load_premade(path: Path = PREMADE_PATH) -> list[PremadeCase]:
    """The cases in file order; ValueError naming the field when the file is malformed."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    cases = []
    for index, item in enumerate(raw.get("cases", [])):
        try:
            case = PremadeCase(
                kind=str(item["kind"]), label=str(item["label"]), turn=int(item["turn"]),
                faulty=str(item["faulty"]), correction=str(item["correction"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: case {index} is malformed ({exc!r})") from exc
        cases.append(case)
    if not cases:
        raise ValueError(f"{path}: no cases")
    return cases
