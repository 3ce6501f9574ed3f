"""PDDL support for the LLM+P baseline: the appendix-D domain and problems of it
(:mod:`.problem`), and Fast Downward run as a separate program (:mod:`.fast_downward`)."""
