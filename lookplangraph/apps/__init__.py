"""Applications on top of the planners: human-in-the-loop trials (:mod:`.trial`) with their
operator console (:mod:`.console`), and the episode viewer (:mod:`.viewer`)."""
