"""Side by side: two models you choose by name. Votes are stored but kept out of the default leaderboard."""

import streamlit as st

from webapp import battle_view

st.title("👥 Side by side")
st.caption("Pick two models by name. Votes here are stored but do not count on the default leaderboard.")
battle_view.show("named")
