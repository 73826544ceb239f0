"""Arena: two anonymous models, one battle at a time; names are revealed after the vote."""

import streamlit as st

from webapp import battle_view

st.title("⚔️ Fixit Arena")
st.caption(
    "Chat with two anonymous models. When one slips, tick *This message corrects the last reply* and tell "
    "it what is wrong in a short sentence; then mark whether it fixed it, and vote."
)
battle_view.show("anonymous")
