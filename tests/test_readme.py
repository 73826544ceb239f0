"""The README stays a newcomer's page, and the documentation's links and examples hold.

- README.md stays under 160 lines (the rest lives in ``docs/``).
- Every relative link in README.md and ``docs/*.md`` names a file that exists, and a ``#fragment`` names
  a heading of that file (GitHub's anchors).
- Every ``make`` target and ``python -m <layer> <command> --flag`` the README shows is real, and every
  catalogue entry it shows (the ```toml blocks) passes the catalogue's own validation.
"""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

from inference.catalogue import parse_catalogue

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAX_README_LINES = 160

_FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", flags=re.M)
_COMMAND = re.compile(r"python -m (db|inference|ranking|scenarios|webapp) ([a-z][a-z-]*)([^`\n]*)")
_MAKE = re.compile(r"`make ((?:[A-Z_]+=\S+ )*)([a-z][a-z-]*)")


def _prose(text: str) -> str:
    """``text`` without fenced blocks and code spans, where a bracket is code, not a link."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[*_`]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    """Every heading anchor of ``path``, with GitHub's ``-1``, ``-2`` … for repeated headings."""
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        anchors.add(slug if count == 0 else f"{slug}-{count}")
        seen[slug] = count + 1
    return anchors


def _broken_links(path: Path) -> list[str]:
    broken = []
    for target in _LINK.findall(_prose(path.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: …: not a file of the repository
            continue
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
            broken.append(f"{target} (no heading #{fragment} in {linked.name})")
    return broken


def _subcommands(layer: str) -> dict[str, argparse.ArgumentParser]:
    module = importlib.import_module(f"commands.{layer}")
    parser: argparse.ArgumentParser = module.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def test_the_readme_stays_short() -> None:
    lines = len(_readme().splitlines())
    assert lines < MAX_README_LINES, f"README.md has {lines} lines (limit {MAX_README_LINES})"


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_points_to_an_existing_file(path: Path) -> None:
    assert not _broken_links(path), f"{path.relative_to(ROOT)}: broken links {_broken_links(path)}"


def test_a_broken_link_and_a_missing_heading_are_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Behind a reverse proxy\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md) [ok](other.md#behind-a-reverse-proxy) [web](https://example.org/x.md) [self](#top)\n"
        "[gone](missing.md) [bad anchor](other.md#settings) `[code](nowhere.md)`\n\n"
        "```\n[fenced](nowhere.md)\n```\n\n# Top\n",
        encoding="utf-8",
    )
    assert _broken_links(page) == [
        "missing.md (no such file)", "other.md#settings (no heading #settings in other.md)"]


def test_every_command_the_readme_shows_is_real() -> None:
    text = _readme()
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, flags=re.M))
    shown_targets = {target for _, target in _MAKE.findall(text)}
    assert {"run", "test"} <= shown_targets
    assert shown_targets <= targets, f"README shows make targets that do not exist: {shown_targets - targets}"
    commands = _COMMAND.findall(text)
    assert commands, "README shows no python -m command"
    for layer, name, rest in commands:
        subcommands = _subcommands(layer)
        assert name in subcommands, f"README shows `python -m {layer} {name}`, which does not exist"
        options = {o for action in subcommands[name]._actions for o in action.option_strings}
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest):
            assert flag in options, f"README shows `python -m {layer} {name} {flag}`, which it does not take"


def test_every_catalogue_entry_the_readme_shows_is_valid() -> None:
    text = _readme()
    blocks = re.findall(r"^```toml\n(.*?)^```", text, flags=re.S | re.M)
    entries = [entry for block in blocks for entry in parse_catalogue(block, origin="README.md")]
    assert len(entries) == len(blocks), "each example is one [[model]] entry"
    assert {entry.source_kind for entry in entries} == {"gguf", "preset", "remote"}
    chat_models = re.findall(r"python -m inference chat --model (\S+?)`", text)
    assert chat_models and set(chat_models) <= {entry.slug for entry in entries}
