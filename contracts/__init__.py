"""The ground floor: the shared contracts every other package builds on.

It imports no other project package. Today it holds the errors and exit codes
(`contracts.errors`) and the one invoke/completion pairing of history events
(`contracts.pairing`); DESIGN.md's other shared contracts (history reader/writer,
generator combinators, store layout) belong here too.
"""
