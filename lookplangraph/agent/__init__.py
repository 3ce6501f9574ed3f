"""The parts of the LookPlanGraph method: the memory graph (:mod:`.memory`), what the LM sees of
it (:mod:`.view`), the decision (:mod:`.decide`) with what one decode may produce
(:mod:`.decoding`) and how a reply is read (:mod:`.replies`), and how observations become memory
(:mod:`.perception`). The loop that puts them together is the LookPlanGraph planner,
:mod:`lookplangraph.planners.lookplangraph`; the baselines use the same parts."""
