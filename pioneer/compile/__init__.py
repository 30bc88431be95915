"""Compile: one profile and one turn's input in, the compiled prompt and its manifest out.

The stage in order: :mod:`.profile` finds and validates a profile (:mod:`.extends` and
:mod:`.derived` resolve a derived one), :mod:`.templates` and :mod:`.sandbox` render its
sections, :mod:`.loaded` holds a loaded profile, :mod:`.plan` records what each section
reads, :mod:`.bootstrap` reads the identity files of the runtime home, :mod:`.pools`
budgets the contributions, :mod:`.render` renders (or reuses) each section,
:mod:`.stable` keeps the stable part, :mod:`.assemble` makes :mod:`.manifest`'s payload,
joined at the :mod:`.boundary`, and :mod:`.compiler` runs these stages in order.
"""
