"""Altair charts for the leaderboard. Input: plain pandas frames built by ``leaderboard_view``."""

from __future__ import annotations

import altair as alt
import pandas as pd


def ratings_chart(table: pd.DataFrame) -> alt.LayerChart:
    """Ratings as points with their 95% interval bars, best model on top.

    ``table`` columns: ``model``, ``rating``, ``lower``, ``upper``.
    """
    order = table.sort_values("rating", ascending=False)["model"].tolist()
    base = alt.Chart(table).encode(y=alt.Y("model:N", sort=order, title=None))
    bars = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("lower:Q", title="Bradley-Terry rating (95% interval)", scale=alt.Scale(zero=False)),
        x2="upper:Q",
    )
    points = base.mark_point(filled=True, size=60).encode(
        x="rating:Q", tooltip=["model", alt.Tooltip("rating:Q", format=".0f"), "lower:Q", "upper:Q"]
    )
    return alt.layer(bars, points).properties(height=max(120, 22 * len(table)))


def matrix_heatmap(matrix: pd.DataFrame, *, title: str, value_format: str) -> alt.LayerChart:
    """A square model-by-model heatmap (rows: model A, columns: model B) with the value in each cell."""
    long = matrix.rename_axis(index="model_a", columns="model_b").stack(future_stack=True).reset_index()
    long.columns = ["model_a", "model_b", "value"]
    order = list(matrix.index)
    base = alt.Chart(long).encode(
        x=alt.X("model_b:N", sort=order, title="opponent"),
        y=alt.Y("model_a:N", sort=order, title="model"),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("value:Q", title=title, scale=alt.Scale(scheme="blues")),
        tooltip=["model_a", "model_b", alt.Tooltip("value:Q", format=value_format)],
    )
    text = base.mark_text(fontSize=10).encode(text=alt.Text("value:Q", format=value_format))
    side = max(160, 28 * len(order))
    return alt.layer(cells, text).properties(title=title, width=side, height=side)
