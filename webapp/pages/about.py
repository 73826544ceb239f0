"""About: the question, the study, how votes become ratings."""

import streamlit as st

from webapp import context as run
from webapp import render

st.title("About Fixit Arena")
st.markdown(
    """
**The question.** Which language model fixes its own mistakes best when a person points them out in a
short English sentence?

**The study.** Fixit Arena grew out of Martin Görner's *Can LLMs fix their mistakes? A chatbot arena
experiment with Keras and TPUs* (Hugging Face blog, December 2024). Models translated calendar requests
("Add a meeting with Fred on Nov 11 at 5PM") into one line of Python API code; when they slipped, the
author typed short corrections ("The current year is 2024", "Just the API call please") and watched who
fixed what. That calendar dialogue is our first scenario; free chat is the second.

**How you take part.** In the *Arena* two anonymous models answer the same message side by side. Send a
correction to the side that got it wrong, mark whether its next reply fixed the mistake, and vote which
model fixed its mistakes better. Only then are the names revealed.

**How votes become ratings.** Votes between every pair of models are counted (ties count half to each
side; "both bad" counts as a tie). A Bradley-Terry model turns those counts into one rating per model:
the probability that model *i* beats model *j* is `1 / (1 + 10^((R_j - R_i)/400))`. The 95% intervals
come from the curvature of the likelihood (or a bootstrap), so two models whose intervals overlap are not
clearly ordered. Fix rate is the share of corrections followed by a fixed reply; first-try accuracy is
the share of first replies the grader labelled correct. Votes from named side-by-side and single-model
chats, flagged battles and battles whose models revealed their identity are kept in the dataset but left
out of the default leaderboard.

**Your data.** Conversations, corrections and votes are published as an open dataset, once a battle
has closed (never while it is open). A cookie keeps you the same anonymous visitor across reloads: it
holds a random id and its signature, nothing else. Your network address is never stored; a salted hash
of it is kept to limit how many battles and replies one network can ask for, and it is never exported.
Do not type personal information.
"""
)
st.markdown(
    "**The badges.** In a scenario with an API, a grader reads each reply's call and marks it, after your "
    "vote (at once when the models are named). Under a marked reply it says in words what was wrong, "
    "for example *missing duration: the default is 30 minutes*; a value the dialogue had not given yet "
    "(the year, before anyone said it) is an assumption, not a mistake."
)
st.text(render.LEGEND)
st.caption(f"Models are served on {run.serving_devices()} (ARENA_MESH).")
