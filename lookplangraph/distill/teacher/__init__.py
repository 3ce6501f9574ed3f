"""The privileged teacher: its searches (:mod:`.search`), its policy (:mod:`.policy`), the policy
behind ``complete()`` in each planner's reply format (:mod:`.expert`), and the harness proof
(:mod:`.proof`). See ``docs/guides/expert.md``."""
