"""Tests of the ranking layer."""
