"""etcd as a system under test (`--db etcd`): suite.py ties its parts together; options.py holds
its option groups (read without loading the rest)."""
