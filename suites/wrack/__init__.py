"""The project's broker as a system under test (`--db wrack`, the default): suite.py ties its
parts together; options.py holds its option groups (read without loading the rest)."""
