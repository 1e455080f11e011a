"""Data shipped with perfmodel: published measured runs (validation and hold-out sets)."""
