"""A stand-in system under test, added the way a user adds theirs: this folder and one line of
suites/__init__.py's SYSTEMS (tests/suites/test_standin_system.py adds the line for its run).

It is a key-value store of small ints over HTTP, one server per node (server.py), with no
replication at all: on one node it is linearizable, on several a client of one node never
sees another's writes, which the harness must report as nonlinearizable."""
