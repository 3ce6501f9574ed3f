"""Planning data: the expert's trajectories (:mod:`.trajectories`) and DAgger rounds on a
student's own states (:mod:`.dagger`). See ``docs/guides/distillation.md``."""
