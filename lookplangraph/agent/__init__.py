"""The LookPlanGraph method: the memory graph (:mod:`.memory`), what the LM sees of it
(:mod:`.view`), what one decode may produce (:mod:`.decoding`), how a reply is read
(:mod:`.replies`), how observations become memory (:mod:`.perception`) and the loop
(:mod:`.loop`, paper Algorithm 1)."""
