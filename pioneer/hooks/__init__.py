"""Hooks: the turn phases, what a hook receives and hands back (:mod:`.models`), and the
registry that runs them under their await and failure policies (:mod:`.registry`)."""
