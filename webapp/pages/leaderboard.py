"""Leaderboard: Bradley-Terry ratings with 95% intervals, fix rates, first-try accuracy, charts, filters."""

import streamlit as st

from webapp import leaderboard_view

st.title("🏆 Leaderboard")
leaderboard_view.show()
