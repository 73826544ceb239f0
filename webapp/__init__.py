"""Fixit Arena web app (Streamlit)."""
