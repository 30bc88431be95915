"""Compile: one profile and one round's input in, the compiled prompt and its manifest out.

The stage in order: :mod:`.round` turns a round's hook contributions and structured
sections into runtime sections, :mod:`.profile` finds and validates a profile (:mod:`._extends` and
:mod:`.derived` resolve a derived one), :mod:`.templates` and :mod:`.sandbox` render its
sections, :mod:`._loaded` holds a loaded profile, :mod:`._plan` records what each section
reads, :mod:`.bootstrap` reads the identity files of the runtime home, :mod:`._pools`
budgets the contributions, :mod:`.render` renders each section, :mod:`._assemble` joins
the stable part and makes :mod:`.manifest`'s payload (``hook_sources`` included),
joined at the :mod:`.boundary`, and :mod:`.compiler` runs these stages in order.
"""
