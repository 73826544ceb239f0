"""The layering's checks that import-linter cannot express (the contracts live in pyproject.toml).

- No import cycle inside a package, counting imports inside function bodies (grimp reads them) and the
  modules loaded by ``importlib.import_module`` (added here from the source: a literal name, a
  ``f"{__name__}.…"`` child of the package, or any module name the loading module spells out).
- db's protected-modules contract names every db module but its front doors, so a new db module
  is private until someone decides otherwise.
- The checks themselves can fail: a cycle or a new db module in a scratch package is found.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("db", "ranking", "inference", "scenarios", "webapp")
DB_FRONT_DOORS = ("db", "db.actions", "db.boards", "db.export", "db.seed")

Graph = Mapping[str, set[str]]


def module_file(root: Path, module: str) -> Path:
    path = root.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def dynamic_imports(root: Path, module: str, known: set[str]) -> set[str]:
    """The project modules ``module`` may load through ``importlib.import_module``."""
    tree = ast.parse(module_file(root, module).read_text())
    package = module if module_file(root, module).name == "__init__.py" else module.rpartition(".")[0]
    loads: set[str] = set()
    spelled = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "import_module" and node.args):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            loads.add(arg.value)
        elif isinstance(arg, ast.JoinedStr):
            loads |= {m for m in known if m.startswith(f"{package}.") and "." not in m[len(package) + 1:]}
        else:
            loads |= spelled & known
    return loads & known


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, set[str]]:
    """Module -> the project modules it imports, anywhere in its body, plus its importlib loads."""
    sys.path.insert(0, str(root))
    try:
        graph = grimp.build_graph(*packages, cache_dir=None)
    finally:
        sys.path.remove(str(root))
    known = set(graph.modules)
    return {m: set(graph.find_modules_directly_imported_by(m)) | dynamic_imports(root, m, known)
            for m in known}


def find_cycle(graph: Graph, package: str) -> list[str] | None:
    """One import cycle among ``package``'s modules, or None."""
    inside = {m for m in graph if m == package or m.startswith(f"{package}.")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for nxt in sorted(graph[module] & inside):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[module] = 2
        return None

    for start in sorted(inside):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


@pytest.fixture(scope="module")
def project_graph() -> dict[str, set[str]]:
    return import_graph(ROOT, PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_inside_a_package(project_graph: Graph, package: str) -> None:
    assert find_cycle(project_graph, package) is None


def test_the_graph_holds_function_body_and_importlib_imports(project_graph: Graph) -> None:
    # families/__init__.py finds its families with importlib; the CLIs import their work inside functions.
    assert "inference.families.llama" in project_graph["inference.families"]
    assert any(m.startswith("db.") for m in project_graph["db"])


def _contract(contract_id: str) -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["id"] == contract_id)


def test_db_contract_protects_every_module_but_the_front_doors(project_graph: Graph) -> None:
    protected = [str(p) for p in _contract("db-front-doors")["protected_modules"]]  # type: ignore[attr-defined]

    def is_protected(module: str) -> bool:
        return any(module == p or (p.endswith(".*") and module.startswith(p[:-1])) for p in protected)

    db_modules = {m for m in project_graph if m.startswith("db.")}
    unprotected = sorted(m for m in db_modules - set(DB_FRONT_DOORS) if not is_protected(m))
    assert unprotected == []
    assert not [door for door in DB_FRONT_DOORS if is_protected(door)]


def test_a_cycle_through_importlib_is_found(tmp_path: Path) -> None:
    package = tmp_path / "scratchpkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import importlib\n\ndef load(name):\n    return importlib.import_module(f'{__name__}.{name}')\n")
    (package / "child.py").write_text("def f():\n    from scratchpkg import load\n    return load\n")
    (package / "quiet.py").write_text("X = 1\n")
    graph = import_graph(tmp_path, ["scratchpkg"])
    cycle = find_cycle(graph, "scratchpkg")
    assert cycle is not None and set(cycle) == {"scratchpkg", "scratchpkg.child"}
    (package / "child.py").write_text("X = 2\n")
    assert find_cycle(import_graph(tmp_path, ["scratchpkg"]), "scratchpkg") is None


def _lint_copy(tmp_path: Path, breach: tuple[str, str] | None) -> tuple[int, str]:
    """Run ``lint-imports`` (pyproject.toml's contracts) on a copy of the project, ``breach`` appended."""
    import shutil
    import subprocess

    for name in (*PACKAGES, *EXTRA_ROOTS):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("pyproject.toml", "settings.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    if breach:
        target, line = breach
        with (tmp_path / target).open("a") as handle:
            handle.write(f"\n{line}\n")
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache", "--no-logo"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


EXTRA_ROOTS = ("wiring", "commands", "bench")


def test_the_contracts_hold_on_the_project(tmp_path: Path) -> None:
    rc, out = _lint_copy(tmp_path, None)
    assert rc == 0, out


@pytest.mark.parametrize(("breach", "broken", "named"), [
    (("ranking/elo.py", "from db import models as _breach"),
     "over scenarios over inference, db and ranking", "ranking.elo -> db.models"),
    (("ranking/elo.py", "import settings as _breach"), "ranking, db and inference read no settings",
     "ranking.elo -> settings"),
    (("webapp/pages/leaderboard.py", "from db.boards import aggregates as _breach"), "pages hold no queries",
     "webapp.pages.leaderboard -> db.boards"),
    (("webapp/pages/about.py", "import sqlalchemy as _breach"), "pages hold no queries",
     "webapp.pages.about -> sqlalchemy"),
    (("scenarios/runner.py", "from inference import pool as _breach"),
     "scenarios reach inference only through inference.protocol", "scenarios.runner -> inference.pool"),
    (("webapp/flows/vote.py", "from db import models as _breach"), "outside db, code imports only",
     "webapp.flows.vote -> db.models"),
    (("inference/families/base.py", "def _breach():\n    from inference import sharding"),
     "no cycles between the modules", ".families -> .sharding"),
])
def test_a_breach_fails_the_lint(tmp_path: Path, breach: tuple[str, str], broken: str, named: str) -> None:
    rc, out = _lint_copy(tmp_path, breach)
    assert rc != 0
    section = " ".join(out[out.index("Broken contracts"):].split())  # names wrap at 80 columns
    assert broken in section and named in section
