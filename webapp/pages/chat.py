"""Chat with a single chosen model (corrections and fixes are recorded; no vote)."""

import streamlit as st

from webapp import battle_view

st.title("💬 Chat with one model")
st.caption("Corrections and fixes here are recorded in the dataset; they stay off the default leaderboard.")
battle_view.show("direct")
