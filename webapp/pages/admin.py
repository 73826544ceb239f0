"""Admin: contestants on/off, flag battles (flagged votes leave the leaderboard; nothing is deleted),
live figures. Password from settings; closed in production while the development default is set."""

import streamlit as st

from webapp import admin_view

st.title("🔐 Admin")
admin_view.show()
