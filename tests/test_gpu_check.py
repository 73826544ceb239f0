"""``tools/gpu_check.sh``'s arguments (its steps run on an accelerator host; ``--dry-run`` runs them on
the CPU by hand: docs/OPERATIONS.md, "Accelerators")."""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "gpu_check.sh"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_help_names_every_mode() -> None:
    done = _run("--help")
    assert done.returncode == 0
    for mode in ("--prepare", "--wheels", "--dry-run"):
        assert mode in done.stdout


def test_bad_arguments_exit_2_with_the_reason() -> None:
    done = _run("--bogus")
    assert done.returncode == 2 and done.stderr.startswith("error: unknown argument --bogus")
    done = _run("--wheels")
    assert done.returncode == 2 and done.stderr.startswith("error: --wheels needs a folder")


def test_the_check_without_its_wheels_says_how_to_get_them(tmp_path: Path) -> None:
    done = _run("--wheels", str(tmp_path / "absent"))
    assert done.returncode == 2
    assert f"--prepare {tmp_path / 'absent'}" in done.stderr, done.stderr
