"""Module-level data that compiled programs read as ``prog_config.NAME`` (tests change it between calls)."""
SCALE = 3
TABLE = [1, 2]
