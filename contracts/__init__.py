"""The ground floor: the shared contracts every other package builds on.

It imports no other project package: errors and exit codes (`contracts.errors`), the
history format and reader/writer (`contracts.history`, `contracts.formats`), the one
invoke/completion pairing (`contracts.pairing`), generator combinators
(`contracts.generator`) and the results store layout (`contracts.store`).
"""
