"""The Cypher agent's training data: gold turns (:mod:`.data`), the grounding expert
(:mod:`.grounding_gold`), recovery turns (:mod:`.recovery`), and their commands
(:mod:`.commands`). See ``docs/guides/cypher.md``."""
