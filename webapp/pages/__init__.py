"""The pages Streamlit runs (``webapp/app.py`` names each): short scripts over the views, holding no queries.

A package so that the layering check (import-linter, ``make lint``) sees them.
"""
