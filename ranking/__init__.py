"""Fixit Arena ranking: pure functions over vote counts (Bradley-Terry, Elo, fix rates, pair sampling)."""
