"""Fixit Arena inference layer: catalogue, loaders, templates, generation, pool, remote engines."""
