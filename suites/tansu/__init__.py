"""Tansu 0.6.0 on PostgreSQL as a system under test (`--db tansu`, docs/tansu.md): suite.py ties
its parts together; options.py holds its option groups (read without loading the rest)."""
