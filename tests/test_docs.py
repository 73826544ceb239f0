"""Every command and flag of every ``python -m <layer>`` CLI is documented in docs/CLI.md, the CLI reference.

The CLIs are contracts others script against; a flag that exists but is not documented fails here
(the idea of sqlite-utils' ``tests/test_docs.py``). Flags are read from the real argparse parsers.
"""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

CLI_DOC = (Path(__file__).resolve().parents[1] / "docs" / "CLI.md").read_text(encoding="utf-8")
LAYERS = ("db", "inference", "ranking", "scenarios", "webapp")


def _section(layer: str) -> str:
    match = re.search(rf"^### python -m {layer}\n(.*?)(?=^##)", CLI_DOC, flags=re.S | re.M)
    assert match, f"docs/CLI.md has no '### python -m {layer}' section"
    return match.group(1)


def _parser(layer: str) -> argparse.ArgumentParser:
    module = importlib.import_module(f"commands.{layer}")
    parser: argparse.ArgumentParser = module.build_parser()
    return parser


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    )


@pytest.mark.parametrize("layer", LAYERS)
def test_every_command_and_flag_is_documented(layer: str) -> None:
    section = _section(layer)
    commands = _commands(_parser(layer))
    assert commands, f"python -m {layer} has no subcommands"
    missing = [name for name in commands if not re.search(rf"`(python -m {layer} )?{name}\b", section)]
    missing += [
        f"{name} {flag}"
        for name, sub in commands.items()
        for flag in _flags(sub)
        if not re.search(rf"{re.escape(flag)}\b", section)
    ]
    assert not missing, f"undocumented in docs/CLI.md '### python -m {layer}': {missing}"
