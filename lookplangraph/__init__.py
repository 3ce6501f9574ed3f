"""LookPlanGraph: an LM plans over a memory graph that the Scene Graph Simulator checks.

The package reads as layers, each importing only those below it:

* :mod:`lookplangraph.lm` — the LM layer: backends with one ``complete()`` (llama.cpp in
  process, OpenAI-compatible servers, scripted replies), structured replies, the reply cache, the
  endpoint pool and the embedded models. It knows nothing of scenes or actions.
* :mod:`lookplangraph.agent` — the parts of the LookPlanGraph method: memory graph, its view for
  the LM, the decision and its decoding, perception; and the prompt templates of every LM user in
  the package (:mod:`lookplangraph.agent.prompts`).
* :mod:`lookplangraph.planners` — every planner under one protocol, the episode contract
  (:mod:`lookplangraph.planners.episode`) and planner settings; LookPlanGraph's loop (paper
  Algorithm 1, :mod:`lookplangraph.planners.lookplangraph`), the paper's five baselines and SG-RwR.
* :mod:`lookplangraph.evaluation` — episodes and batch runs on GraSIF, run settings, error
  injection, ``reproduce`` and the scripted LM server for harness benchmarks.
* :mod:`lookplangraph.apps` — the human-in-the-loop trial and its console, and the viewer.
* :mod:`lookplangraph.cli` — the ``lookplangraph`` command.
* :mod:`lookplangraph.sandbox` and :mod:`lookplangraph.cypher` — running LM-written code, and an
  LM querying the scene graph in a graph database.
* :mod:`lookplangraph.distill` — distillation, above evaluation and the Cypher agent and below the
  command line: the privileged teacher, planning and Cypher data, mixing, training, merging,
  export. Nothing that runs an episode imports it.
"""
