"""Leaderboard: Votes (Bradley-Terry, style control), Fixing (fix rates and metrics), Automatic arena."""

import streamlit as st

from webapp import leaderboard_view

st.title("🏆 Leaderboard")
leaderboard_view.show()
