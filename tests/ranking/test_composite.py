"""The composite fit: human votes and automatic pairwise outcomes, each source weighted, checked against
an independent maximum-likelihood fit written here (scipy's optimiser on the weighted log-likelihood)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize

from commands.ranking import main as ranking_main
from ranking.bt import ELO_SCALE
from ranking.composite import DEFAULT_WEIGHTS, Source, composite_board
from ranking.counts import CountsError

MODELS = ("m0", "m1", "m2", "m3", "m4")


def _simulate(strength: np.ndarray, battles: int, tie_rate: float, rng: np.random.Generator) -> Source:
    """Random pairs; a tie with probability ``tie_rate``, else i wins with σ(θ_i − θ_j)."""
    n = strength.size
    wins, ties = np.zeros((n, n), dtype=np.int64), np.zeros((n, n), dtype=np.int64)
    for _ in range(battles):
        i, j = rng.choice(n, size=2, replace=False)
        if rng.random() < tie_rate:
            ties[i, j] += 1
            ties[j, i] += 1
        elif rng.random() < 1 / (1 + math.exp(strength[j] - strength[i])):
            wins[i, j] += 1
        else:
            wins[j, i] += 1
    return Source("?", wins, ties)


def _independent_fit(sources: list[Source], weights: dict[str, float]) -> np.ndarray:
    """Weighted Bradley-Terry by direct minimisation of the negative log-likelihood (ties half a win
    each), centred on 1000 Elo: no code shared with ranking."""
    n = sources[0].wins.shape[0]

    def nll(theta: np.ndarray) -> float:
        total = 0.0
        for s in sources:
            w = weights[s.name]
            diff = theta[:, None] - theta[None, :]
            log_p = -np.logaddexp(0.0, -diff)  # log σ(θ_i − θ_j)
            total -= w * (np.sum(s.wins * log_p) + 0.5 * np.sum(s.ties * log_p))
        return total

    result = minimize(nll, np.zeros(n), method="BFGS", options={"gtol": 1e-10, "maxiter": 10_000})
    theta = result.x - result.x.mean()
    return 1000.0 + ELO_SCALE * theta


def _sources(rng: np.random.Generator) -> list[Source]:
    human = _simulate(np.array([0.0, 0.4, 0.8, -0.3, 1.1]), 3000, 0.1, rng)
    replay = _simulate(np.array([0.1, 0.2, 1.0, -0.5, 0.9]), 2000, 0.4, rng)
    suite = _simulate(np.array([0.0, 0.5, 0.7, -0.2, 1.3]), 800, 0.3, rng)
    return [Source("human", human.wins, human.ties), Source("replay", replay.wins, replay.ties),
            Source("suite", suite.wins, suite.ties)]


def test_each_column_agrees_with_an_independent_fit_within_a_tenth_of_an_elo_point() -> None:
    sources = _sources(np.random.default_rng(1))
    weights = {"human": 1.0, "replay": 0.3, "suite": 0.7}
    board = composite_board(MODELS, sources, weights=weights, bootstrap=50, seed=2)
    expected = {
        "human": _independent_fit(sources[:1], {"human": 1.0}),
        "automatic": _independent_fit(sources[1:], weights),
        "composite": _independent_fit(sources, weights),
    }
    for name, ratings in expected.items():
        np.testing.assert_allclose(board.columns[name].ratings, ratings, atol=0.1, err_msg=name)
    # the composite sits between the two single-signal columns, and the weights shift it
    heavy = {"human": 1.0, "replay": 3.0, "suite": 7.0}
    heavier = composite_board(MODELS, sources, weights=heavy, bootstrap=0)
    gap = np.abs(board.columns["composite"].ratings - board.columns["automatic"].ratings)
    closer = np.abs(heavier.columns["composite"].ratings - board.columns["automatic"].ratings)
    assert np.all(closer < gap + 1e-9)
    col = board.columns["composite"]
    assert np.all(col.ci_low <= col.ratings) and np.all(col.ratings <= col.ci_high)
    assert np.all(col.ci_high - col.ci_low > 0)


def test_intervals_follow_each_sources_size_and_kendall_tau_reads_agreement() -> None:
    rng = np.random.default_rng(3)
    same = np.array([0.0, 0.5, 1.0, 1.5, 2.0])
    agree = [Source("human", *_counts(_simulate(same, 4000, 0.0, rng))),
             Source("replay", *_counts(_simulate(same, 4000, 0.2, rng)))]
    board = composite_board(MODELS, agree, bootstrap=100, seed=0)
    assert board.kendall_tau == pytest.approx(1.0) and board.tau_low > 0.5
    assert board.weights == {"human": DEFAULT_WEIGHTS["human"], "replay": DEFAULT_WEIGHTS["replay"]}
    reverse = [agree[0], Source("replay", *_counts(_simulate(-same, 4000, 0.2, rng)))]
    against = composite_board(MODELS, reverse, bootstrap=100, seed=0)
    assert against.kendall_tau == pytest.approx(-1.0) and against.tau_high < -0.5
    # a tenth of the human battles: wider human intervals, whatever the weights
    few = [Source("human", *_counts(_simulate(same, 400, 0.0, rng))), agree[1]]
    sparse = composite_board(MODELS, few, bootstrap=100, seed=0)
    width = lambda b: np.mean(b.columns["human"].ci_high - b.columns["human"].ci_low)  # noqa: E731
    assert width(sparse) > 2 * width(board)


def _counts(source: Source) -> tuple[np.ndarray, np.ndarray]:
    return source.wins, source.ties


def test_a_model_without_automatic_outcomes_is_rated_by_people_only() -> None:
    rng = np.random.default_rng(4)
    human = _simulate(np.array([0.0, 0.5, 1.0, 1.5, 2.0]), 1000, 0.1, rng)
    replay = _simulate(np.array([0.0, 0.5, 1.0, 1.5, 2.0]), 1000, 0.1, rng)
    replay_wins, replay_ties = replay.wins.copy(), replay.ties.copy()
    replay_wins[4, :] = replay_wins[:, 4] = 0
    replay_ties[4, :] = replay_ties[:, 4] = 0
    board = composite_board(MODELS, [Source("human", human.wins, human.ties),
                                     Source("replay", replay_wins, replay_ties)], bootstrap=20)
    records = {r["model"]: r for r in board.as_records()}
    assert records["m4"]["automatic"] is None and records["m4"]["human"] is not None
    assert records["m4"]["composite"] is not None and not math.isnan(board.kendall_tau)


def test_a_light_source_alone_still_rates_its_models() -> None:
    """Weighted counts are fractions: a pair seen once in a source of weight 0.5 is still a battle."""
    wins = np.zeros((3, 3), dtype=np.int64)
    wins[1, 2] = 1
    human = np.zeros((3, 3), dtype=np.int64)
    human[0, 1] = 1
    zeros = np.zeros((3, 3), dtype=np.int64)
    board = composite_board(("a", "b", "c"), [Source("human", human, zeros), Source("replay", wins, zeros)],
                            bootstrap=5)
    automatic = board.columns["automatic"]
    assert np.isnan(automatic.ratings[0]) and automatic.ratings[1] > 1000 > automatic.ratings[2]
    assert automatic.battles[1] == 0.5 and board.columns["composite"].battles[1] == 1.5


def test_bad_weights_and_shapes_are_refused() -> None:
    source = Source("human", np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(CountsError, match="weight"):
        composite_board(("a", "b"), [source], weights={"replay": -1.0})
    with pytest.raises(CountsError, match="3×3"):
        composite_board(("a", "b", "c"), [source])


def _rows(source: Source, name: str | None) -> list[str]:
    """A source's counts as battles-file rows (``source`` column when ``name`` is given)."""
    rows = []
    n = source.wins.shape[0]
    for i in range(n):
        for j in range(n):
            tail = f",{name}" if name else ""
            rows += [f"{MODELS[i]},{MODELS[j]},a{tail}"] * int(source.wins[i, j])
            if i < j:
                rows += [f"{MODELS[i]},{MODELS[j]},tie{tail}"] * int(source.ties[i, j])
    return rows


def test_the_cli_reads_each_files_sources_and_prints_the_three_columns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sources = _sources(np.random.default_rng(5))
    votes = tmp_path / "battles.csv"
    votes.write_text("model_a,model_b,winner,mode\n"
                     + "\n".join(r + ",anonymous" for r in _rows(sources[0], None)))
    automatic = tmp_path / "pairs.csv"
    automatic.write_text("model_a,model_b,winner,source\n"
                         + "\n".join(_rows(sources[1], "replay") + _rows(sources[2], "suite")))
    argv = ["fit", "--battles", str(votes), "--battles", str(automatic), "--composite", "--bootstrap", "20",
            "--weight", "replay=0.3", "--weight", "suite=0.7", "--json"]
    assert ranking_main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    direct = composite_board(MODELS, sources, weights={"replay": 0.3, "suite": 0.7}, bootstrap=20, seed=0)
    assert printed["models"] == direct.as_records()
    assert printed["weights"] == {"human": 1.0, "replay": 0.3, "suite": 0.7}
    assert printed["battles"] == {"human": 3000, "replay": 2000, "suite": 800}
    assert printed["kendall_tau"]["value"] == pytest.approx(direct.kendall_tau, abs=1e-4)
    assert ranking_main(argv[:-1]) == 0
    table = capsys.readouterr().out
    assert "Kendall's tau, human against automatic" in table and "composite" in table


@pytest.mark.parametrize("extra", [["--weight", "replay=-1"], ["--weight", "replay"]])
def test_the_cli_refuses_bad_weights(tmp_path: Path, extra: list[str],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "b.csv"
    path.write_text("model_a,model_b,winner\nx,y,a\n")
    with pytest.raises(SystemExit) as exit_info:
        ranking_main(["fit", "--battles", str(path), "--composite", *extra])
    assert exit_info.value.code == 2 and capsys.readouterr().err.startswith("error: ")


def test_several_files_need_composite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "b.csv"
    path.write_text("model_a,model_b,winner\nx,y,a\n")
    assert ranking_main(["fit", "--battles", str(path), "--battles", str(path)]) == 2
    assert "need --composite" in capsys.readouterr().err


def test_sandwich_intervals_match_the_plain_fit_and_the_bootstrap() -> None:
    from ranking.leaderboard import leaderboard

    sources = _sources(np.random.default_rng(6))
    weights = {"human": 1.0, "replay": 0.3, "suite": 0.7}
    fast = composite_board(MODELS, sources, weights=weights, interval="sandwich", bootstrap=100)
    human = sources[0]
    plain = leaderboard(MODELS, human.wins, human.ties, np.zeros_like(human.wins), interval="sandwich")
    by_model = {r.model: r for r in plain.rows}
    np.testing.assert_allclose(fast.columns["human"].ci_low, [by_model[m].ci_low for m in MODELS], atol=1e-6)
    slow = composite_board(MODELS, sources, weights=weights, bootstrap=300, seed=1)
    for name in ("automatic", "composite"):
        np.testing.assert_allclose(fast.columns[name].ratings, slow.columns[name].ratings, atol=1e-6)
        widths = [b.columns[name].ci_high - b.columns[name].ci_low for b in (fast, slow)]
        np.testing.assert_allclose(widths[0], widths[1], rtol=0.15, err_msg=name)
    assert fast.tau_low <= fast.kendall_tau <= fast.tau_high
