"""Fixit Arena scenarios: what a battle is about, its grader and correction writer, the automatic arena."""
