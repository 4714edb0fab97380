"""The stand-in's option groups: none of its own (the general options suffice)."""

GROUPS: tuple[type, ...] = ()
