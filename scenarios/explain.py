"""A grade in words: what each badge means, and each mistake of a graded reply as a visitor reads it.

The badges are the study's (``✓ 🍄 🔥 🔥🔥 🥦``); :data:`BADGE_MEANINGS` is their one legend, shown in the
Arena beside the first badge, on About and in ``scenarios report``. :func:`explain` turns a reply's grade
(with its place in the dialogue) into short sentences, "missing duration: the default is 30 minutes",
one per finding, in the order a person would correct them. The web app stores them with the reply
(``messages.grader_notes``) and the export publishes them, so the words a visitor read are the data.
"""

from __future__ import annotations

from collections.abc import Callable

from scenarios.api import Api, Param
from scenarios.dialogue import ReplyGrade
from scenarios.grader import Grade
from scenarios.mistakes import Finding, Mistake
from scenarios.values import spoken

# badge -> what it means; the order the legend reads
BADGE_MEANINGS: dict[str, str] = {
    "✓": "the expected call",
    "🍄": "a call with one or two mistakes",
    "🔥": "no recognisable call",
    "🔥🔥": "a call with three or more mistakes",
    "🥦": "fixed after a correction",
}
LEGEND = " · ".join(f"{badge} {meaning}" for badge, meaning in BADGE_MEANINGS.items())
MAX_NOTES = 6  # a reply with more findings says how many more, not each one
_WIDTH = 40  # characters of a value quoted from the reply


def explain(reply: ReplyGrade, api: Api) -> tuple[str, ...]:
    """The mistakes of one graded reply in words (empty for a right reply or an ungraded one); a value
    the dialogue had not given yet, taken as an assumption, is said as such (it is not a mistake)."""
    grade = reply.grade
    if grade is None:
        return ()
    notes = [_assumption(f) for f in grade.assumptions]
    if grade.label == "garbage" and not grade.findings:
        notes.append("no recognisable API call")
    notes += [finding_text(f, api) for f in grade.findings]
    if reply.recurrence:
        notes.append("a mistake it had already fixed came back")
    if len(notes) > MAX_NOTES:
        notes = [*notes[:MAX_NOTES], f"and {len(notes) - MAX_NOTES} more"]
    return tuple(notes)


def explain_grade(grade: Grade, api: Api) -> tuple[str, ...]:
    """:func:`explain` for a reply graded alone (no dialogue around it)."""
    return explain(ReplyGrade(index=0, turn=None, grade=grade), api)


def finding_text(finding: Finding, api: Api) -> str:
    """One finding in words."""
    writer = _WRITERS.get(finding.kind)
    if writer is not None:
        return writer(finding, api)
    return _wrong_value(finding, api)


def _quote(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= _WIDTH else text[: _WIDTH - 1] + "…"


def _param(api: Api, name: str | None) -> Param | None:
    for function in api.functions:
        for param in function.params:
            if param.name == name:
                return param
    return None


def _missing(finding: Finding, api: Api) -> str:
    param = _param(api, finding.param)
    text = f"missing {finding.param or 'argument'}"
    if param is not None and param.default is not None:
        text += f": the default is {spoken(param, param.default)}"
    return text


def _wrong_value(finding: Finding, api: Api) -> str:
    what = finding.kind.removeprefix("wrong_").replace("_", " ")
    text = f"wrong {what}"
    if finding.got:
        text += f": {_quote(finding.got)}"
    if finding.expected:
        text += f", expected {_quote(finding.expected)}"
    return text


def _bad_format(finding: Finding, api: Api) -> str:
    if finding.detail == "params":
        return f"the arguments do not fit the function: {_quote(finding.got)}"
    text = f"{finding.param or 'a value'} written as {_quote(finding.got)}"
    return text + (f", expected a form like {_quote(finding.expected)}" if finding.expected else "")


def _wrong_function(finding: Finding, api: Api) -> str:
    text = f"wrong function: {_quote(finding.got)}" if finding.got else "wrong function"
    return text + (f", expected {finding.expected}" if finding.expected else "")


def _syntax(finding: Finding, api: Api) -> str:
    detail = (finding.detail or "").replace("_", " ")
    return f"not a valid call ({detail})" if detail else "not a valid call"


def _fixed(text: str) -> Callable[[Finding, Api], str]:
    return lambda finding, api: text


def _assumption(finding: Finding) -> str:
    what = finding.kind.removeprefix("wrong_").replace("_", " ")
    return f"took {_quote(finding.got)} as the {what}: not said yet, an assumption, not a mistake"


_WRITERS: dict[str, Callable[[Finding, Api], str]] = {
    Mistake.WRONG_FUNCTION: _wrong_function,
    Mistake.SYNTAX: _syntax,
    Mistake.MULTIPLE_CALLS: lambda f, api: f"{f.got or 'several'} calls where one was asked",
    Mistake.MISSING_CALL: lambda f, api: f"a call is missing ({f.expected})" if f.expected
    else "a call is missing",
    Mistake.CHATTY: _fixed("prose around the call (just the API call was asked)"),
    Mistake.MISSING_ARGUMENT: _missing,
    Mistake.BAD_FORMAT: _bad_format,
    Mistake.REGRESSION: lambda f, api: f"an earlier right entry was broken or removed ({_quote(f.expected)})"
    if f.expected else "an earlier right entry was broken or removed",
    Mistake.DOUBLE_BOOKING: _fixed("two entries now overlap in time"),
}
