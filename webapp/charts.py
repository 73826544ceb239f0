"""Altair charts for the leaderboard. Input: plain pandas frames built by ``leaderboard_data``.

Streamlit lays charts out by the pixel height it is given (not the spec's own), so each chart comes with
the height it needs: ``ratings_height`` / ``heatmap_height``.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

LABEL_LIMIT = 240  # px of model name before an axis label is cut


def ratings_height(models: int) -> int:
    return 90 + 26 * models


def heatmap_height(models: int) -> int:
    return 200 + 30 * models


STEEP_LABELS = 8  # past this many models the heatmap's x labels stand upright: they never touch


def heatmap_axis(models: int, *, x: bool) -> alt.Axis:
    """An axis that prints every model's name: Vega-Lite drops labels it thinks overlap (angled labels'
    bounding boxes always do), so overlap culling is off; x labels are angled, upright past
    ``STEEP_LABELS`` models, so a label needs a band only as wide as the font is high."""
    angle = (-45 if models <= STEEP_LABELS else -90) if x else 0
    return alt.Axis(labelOverlap=False, labelLimit=LABEL_LIMIT, labelAngle=angle, labelPadding=4)


def ratings_chart(
    table: pd.DataFrame, *, x_title: str = "Bradley-Terry rating (95% interval)"
) -> alt.LayerChart | alt.FacetChart:
    """Ratings (or rates) as points with their 95% interval bars, best model on top.

    ``table`` columns: ``model``, ``rating``, ``lower``, ``upper``.
    """
    order = table.sort_values("rating", ascending=False)["model"].tolist()
    base = alt.Chart(table).encode(
        y=alt.Y("model:N", sort=order, title=None, axis=alt.Axis(labelLimit=LABEL_LIMIT, labelOverlap=False))
    )
    bars = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("lower:Q", title=x_title, scale=alt.Scale(zero=False)),
        x2="upper:Q",
    )
    points = base.mark_point(filled=True, size=60).encode(
        x="rating:Q", tooltip=["model", alt.Tooltip("rating:Q", format=".0f"), "lower:Q", "upper:Q"]
    )
    return alt.layer(bars, points)


def matrix_heatmap(matrix: pd.DataFrame, *, title: str, value_format: str) -> alt.LayerChart | alt.FacetChart:
    """A square model-by-model heatmap (rows: model, columns: opponent) with the value in each cell.

    Both axes name every model of ``matrix`` (its index, in order) at any chart width. Pairs that never
    met (NaN) stay blank.
    """
    long = matrix.rename_axis(index="model_a", columns="model_b").stack(future_stack=True).reset_index()
    long.columns = ["model_a", "model_b", "value"]
    order = [str(model) for model in matrix.index]
    scale = alt.Scale(domain=order)  # every model a band, in board order, whatever the cells hold
    base = alt.Chart(long).encode(
        x=alt.X("model_b:N", scale=scale, title="opponent", axis=heatmap_axis(len(order), x=True)),
        y=alt.Y("model_a:N", scale=scale, title="model", axis=heatmap_axis(len(order), x=False)),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("value:Q", title=title, scale=alt.Scale(scheme="blues")),
        tooltip=["model_a", "model_b", alt.Tooltip("value:Q", format=value_format)],
    )
    text = (
        base.transform_filter("isValid(datum.value)")
        .mark_text(fontSize=10)
        .encode(text=alt.Text("value:Q", format=value_format))
    )
    return alt.layer(cells, text)


TURN_ORDER = ["1", "2", "3+", "never"]
TURN_COLOURS = ["#2e7d32", "#9ccc65", "#ffb300", "#c62828"]  # fixed at once ... never fixed


def turns_height(models: int) -> int:
    return 110 + 26 * models


def turns_to_fix_chart(turns: pd.DataFrame) -> alt.Chart:
    """Per model, how many corrections each mistake took (stacked: 1, 2, 3+, never).

    ``turns`` columns: ``model``, ``turns`` (one of ``TURN_ORDER``), ``corrections``.
    """
    order = {bucket: i for i, bucket in enumerate(TURN_ORDER)}
    data = turns.assign(order=turns["turns"].map(order))
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y("model:N", title=None, axis=alt.Axis(labelLimit=LABEL_LIMIT, labelOverlap=False)),
            x=alt.X("corrections:Q", stack="normalize", title="share of mistakes, by corrections needed"),
            color=alt.Color("turns:N", sort=TURN_ORDER, title="corrections",
                            scale=alt.Scale(domain=TURN_ORDER, range=TURN_COLOURS)),
            order=alt.Order("order:Q"),
            tooltip=["model", "turns", "corrections"],
        )
    )
