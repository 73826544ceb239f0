"""Dataset: counts, filters, downloads (JSONL, Parquet, CSV, preference pairs, correction triples), schema."""

import streamlit as st

from webapp import dataset_view

st.title("📦 Dataset")
dataset_view.show()
