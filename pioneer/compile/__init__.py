"""Compile: one profile and one turn's input in, the compiled prompt and its manifest out.

The stage in order: :mod:`.profile` finds and validates a profile (:mod:`.extends` and
:mod:`.derived` resolve a derived one), :mod:`.templates` and :mod:`.sandbox` render its
sections, :mod:`.bootstrap` reads the identity files of the runtime home, :mod:`.pools`
budgets the contributions, :mod:`.memo` keeps what a warm turn can reuse, and
:mod:`.compiler` walks the sections into :mod:`.manifest`'s payload, joined at the
:mod:`.boundary`.
"""
