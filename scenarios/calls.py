"""Find a scenario's API calls in a model's reply, safely: ``re`` to locate, ``ast`` to parse, nothing runs.

Model output is hostile text. This module never evaluates it: a call's arguments are read from the
syntax tree as literals (strings, numbers, constant arithmetic such as ``60*3``); anything else is kept
as its source text. Sizes are guarded before ``ast.parse`` (a whole reply, one call, nesting depth), and
the parser's own ``RecursionError``/``MemoryError`` are caught, so a megabyte of text or a deeply nested
expression costs milliseconds and yields "no call".
"""

from __future__ import annotations

import ast
import re
import threading
from dataclasses import dataclass
from typing import Literal, Protocol

MAX_REPLY_CHARS = 16_000  # longer replies are not graded (the web app caps messages at 12,000 chars)
MAX_CALL_CHARS = 1_000  # one call's text, from its name to its closing parenthesis
MAX_DEPTH = 16  # bracket nesting inside one call; an honest call needs 1 or 2
MAX_ARITH_NODES = 32  # constant arithmetic like 60*3; more is not "a duration"

# A dotted name followed by "(": a candidate call. Recognised below only if it names the scenario's API.
_CALLEE = re.compile(r"(?<![\w.])((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\s*\(")
_FENCE_LINE = re.compile(r"^[ \t]*```[\w+-]*[ \t]*$", re.MULTILINE)
_TRAILER = re.compile(r"[ \t]*;?[ \t]*(?:#[^\n]*)?")
_EXTRA_PARENS = re.compile(r"[ \t]*\)+")
_KEYWORD = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)(.*)$", re.DOTALL)

ValueKind = Literal["str", "number", "other"]
SyntaxProblem = Literal["extra_parenthesis", "unbalanced", "invalid"]


@dataclass(frozen=True, slots=True)
class ArgValue:
    """One argument as written. ``value`` is set for string literals and constant arithmetic only."""

    kind: ValueKind
    value: str | float | None
    source: str


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """A recognisable call: its dotted name, arguments as written, and any syntax problem found."""

    callee: str
    args: tuple[ArgValue, ...]
    kwargs: tuple[tuple[str, ArgValue], ...]
    syntax: SyntaxProblem | None
    span: tuple[int, int]  # [start, end) in the reply, including a trailing ";" or "# comment"

    @property
    def function(self) -> str:
        """The last name component: ``add_calendar_entry`` for ``action.add_calendar_entry``."""
        return self.callee.rsplit(".", 1)[-1]


class CallVocabulary(Protocol):
    """Which dotted names are calls of a scenario's API (``scenarios.api.Api`` is one)."""

    def recognisable(self, callee: str) -> bool: ...

    def markers(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class Extraction:
    """Everything found in one reply: the calls (in order) and whether text other than code remains."""

    calls: tuple[ParsedCall, ...]
    leftover: str  # text outside the calls, fences and backticks, whitespace-collapsed
    too_big: bool = False


def extract_calls(reply: str, api: CallVocabulary) -> Extraction:
    """Locate and parse every call of ``api`` in ``reply``; hostile input yields no calls, fast."""
    if len(reply) > MAX_REPLY_CHARS or "\x00" in reply:
        return Extraction(calls=(), leftover=reply[:200], too_big=True)
    calls: list[ParsedCall] = []
    if not any(marker in reply for marker in api.markers()):  # fast path: nothing to recognise
        return Extraction(calls=(), leftover=_leftover(reply, calls))
    pos = 0
    for match in _CALLEE.finditer(reply):
        if match.start() < pos or not api.recognisable(match.group(1)):
            continue
        call = _parse_call_at(reply, start=match.start(), open_paren=match.end() - 1, callee=match.group(1))
        if call is None:  # nesting or length past any honest call: hostile, grade nothing
            return Extraction(calls=(), leftover=reply[:200], too_big=True)
        calls.append(call)
        pos = call.span[1]
    return Extraction(calls=tuple(calls), leftover=_leftover(reply, calls))


def _leftover(reply: str, calls: list[ParsedCall]) -> str:
    pieces: list[str] = []
    pos = 0
    for call in calls:
        pieces.append(reply[pos : call.span[0]])
        pos = call.span[1]
    pieces.append(reply[pos:])
    text = _FENCE_LINE.sub(" ", "".join(pieces)).replace("`", " ")
    return " ".join(text.split())


def _find_close(text: str, open_paren: int) -> tuple[int | None, bool]:
    """Index of the parenthesis closing ``open_paren`` (quotes respected; None if unclosed), and whether
    the depth or length limit was hit (an unclosed call at the end of a short reply is not a hit)."""
    depth = 0
    quote: str | None = None
    limit = min(len(text), open_paren + MAX_CALL_CHARS)
    i = open_paren
    while i < limit:
        ch = text[i]
        if quote is not None:
            if ch == "\\":
                i += 1
            elif ch == quote or ch == "\n":
                quote = None
        elif ch in "\"'":
            quote = ch
        elif (ch == "\n" and text.startswith("\n\n", i)) or (ch == "`" and text.startswith("```", i)):
            return None, False  # a blank line or a fence ends an unclosed call
        elif ch in "([{":
            depth += 1
            if depth > MAX_DEPTH:
                return None, True
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i, False
        i += 1
    return None, limit < len(text)


def _parse_call_at(reply: str, *, start: int, open_paren: int, callee: str) -> ParsedCall | None:
    close, over_limit = _find_close(reply, open_paren)
    if over_limit:
        return None
    syntax: SyntaxProblem | None = None
    if close is None:
        # Unclosed: take the rest of the line, as a person reading it would, and close it for the parser.
        line_end = reply.find("\n", open_paren)
        end = len(reply) if line_end < 0 else line_end
        source = reply[start:end]
        syntax = "unbalanced"
        args, kwargs, ok = _parse_arguments(source + ")", open_paren - start)
    else:
        end = close + 1
        source = reply[start:end]
        args, kwargs, ok = _parse_arguments(source, open_paren - start)
        if not ok:
            syntax = "invalid"
        extra = _EXTRA_PARENS.match(reply, end)
        if extra and extra.end() > end:
            syntax = syntax or "extra_parenthesis"
            end = extra.end()
    trailer = _TRAILER.match(reply, end)
    if trailer:
        end = trailer.end()
    return ParsedCall(callee=callee, args=args, kwargs=kwargs, syntax=syntax, span=(start, end))


def _parse_arguments(
    source: str, open_offset: int
) -> tuple[tuple[ArgValue, ...], tuple[tuple[str, ArgValue], ...], bool]:
    """Arguments of ``name(...)`` via ``ast``; if the call does not parse, argument by argument."""
    tree = safe_parse(source)
    if tree is not None and isinstance(tree.body, ast.Call) and not _has_starred(tree.body):
        args = tuple(_arg_value(a, source) for a in tree.body.args)
        kwargs = tuple(
            (kw.arg, _arg_value(kw.value, source)) for kw in tree.body.keywords if kw.arg is not None
        )
        return args, kwargs, True
    inner = source[open_offset + 1 : -1]
    pos_args: list[ArgValue] = []
    kw_args: list[tuple[str, ArgValue]] = []
    for piece in split_top_level(inner):
        if not piece.strip():
            continue
        keyword = _KEYWORD.match(piece)
        if keyword:
            kw_args.append((keyword.group(1), _loose_value(keyword.group(2))))
        else:
            pos_args.append(_loose_value(piece))
    return tuple(pos_args), tuple(kw_args), False


# CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state: two threads parsing
# at once (a suite's dialogues, two visitors' pages) can corrupt it and raise "SystemError: AST
# constructor recursion depth mismatch" (python/cpython#106905). Parses are short (one call, guarded
# sizes), so they take turns.
_PARSE_LOCK = threading.Lock()


def safe_parse(source: str) -> ast.Expression | None:
    """``ast.parse`` in eval mode, or None: size-guarded, every parser failure caught, one thread at a
    time."""
    if len(source) > MAX_CALL_CHARS + 64 or "\x00" in source:
        return None
    try:
        with _PARSE_LOCK:
            return ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


def _has_starred(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)


def _loose_value(text: str) -> ArgValue:
    tree = safe_parse(text.strip())
    if tree is None:
        return ArgValue(kind="other", value=None, source=text.strip())
    return _arg_value(tree.body, text.strip())


def _segment(source: str, node: ast.expr) -> str:
    """``ast.get_source_segment`` without its per-call line splitting (the grader's hot spot): ASCII
    sources are sliced through line offsets directly (AST columns are UTF-8 byte offsets)."""
    if not source.isascii() or node.end_lineno is None or node.end_col_offset is None:
        return ast.get_source_segment(source, node) or ""
    starts = [0]
    if "\n" in source:
        starts += [i + 1 for i, ch in enumerate(source) if ch == "\n"]
    begin = starts[node.lineno - 1] + node.col_offset
    return source[begin : starts[node.end_lineno - 1] + node.end_col_offset]


def _arg_value(node: ast.expr, source: str) -> ArgValue:
    text = _segment(source, node)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return ArgValue(kind="str", value=node.value, source=text)
    number = constant_arithmetic(node)
    if number is not None:
        return ArgValue(kind="number", value=number, source=text)
    return ArgValue(kind="other", value=None, source=text)


def constant_arithmetic(node: ast.expr) -> float | None:
    """The value of ``+ - * / //`` over numeric literals (``60*3``), else None. No ``**``: no blow-ups."""
    if sum(1 for _ in ast.walk(node)) > MAX_ARITH_NODES:
        return None
    return _arith(node)


def _arith(node: ast.expr) -> float | None:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value) if abs(value) < 1e12 else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _arith(node.operand)
        if inner is None:
            return None
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp):
        left, right = _arith(node.left), _arith(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.Div | ast.FloorDiv) and right != 0:
            return left / right if isinstance(node.op, ast.Div) else float(left // right)
    return None


def split_top_level(text: str) -> list[str]:
    """Split on commas outside quotes and brackets (for argument lists that ``ast`` rejects)."""
    pieces: list[str] = []
    depth = 0
    quote: str | None = None
    current: list[str] = []
    escaped = False
    for ch in text:
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            pieces.append("".join(current))
            current = []
            continue
        current.append(ch)
    pieces.append("".join(current))
    return pieces
