"""One turn: run the hook phases, place the built-in sections, compile (:mod:`.run`)."""
