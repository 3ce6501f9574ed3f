"""Distillation: the embedded model taught by a privileged teacher, on a floor of its own.

* :mod:`.teacher` — the privileged expert: its searches (:mod:`.teacher.search`), its policy
  (:mod:`.teacher.policy`), the policy in each planner's reply format (:mod:`.teacher.expert`),
  and the harness proof (:mod:`.teacher.proof`);
* :mod:`.planning` — planning data: the expert's trajectories (:mod:`.planning.trajectories`)
  and DAgger rounds on a student's own states (:mod:`.planning.dagger`);
* :mod:`.cypher` — the Cypher agent's data: gold turns (:mod:`.cypher.data`), the grounding
  expert (:mod:`.cypher.grounding_gold`), recovery turns (:mod:`.cypher.recovery`), and their
  commands (:mod:`.cypher.commands`);
* :mod:`.training` — mixing, LoRA training, merging, GGUF export, chunks for a GPU machine.

It sits above evaluation and the Cypher agent and below the command line: nothing that runs an
episode or answers a question imports it (``tests/test_layers.py``). ``docs/guides/expert.md``
and ``docs/guides/distillation.md`` describe it.
"""
