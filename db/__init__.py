"""Fixit Arena persistence: models, engine set-up, repository functions (the only queries), export."""
