"""Human-in-the-loop trials: the planner in a real building, a person as its hands and eyes
(paper section VII-E).

A trial runs :func:`lookplangraph.planners.lookplangraph.run_episode` in a
:class:`sim_adapters.human.HumanEnvironment` and keeps everything on disk in ``runs/<trial>/``
(settings, task, every operator answer, photos, LM caches, trace, augmentations, events, the
planner's result, the checklist and the trial's result). Invariant: nothing lives only in
memory, so a trial is resumed by running the planner again from the start, its LM replies from
the caches and the operator's answers from ``operator.jsonl``; a recorded answer that no longer
matches its request moves the rest of the log to ``operator.superseded.jsonl``.

The result comes from the goal checklist the operator marks (:func:`checklist`): success =
every line met, precision = met weight over the goal units' weight; the planner's own verdict on
the reported graph is kept beside it (``reported_*``).

Modules, one per concept, their public names re-exported here: :mod:`.photos` (what a photo
must be, :class:`PhotoError`), :mod:`.scoring` (the checklist and its score), :mod:`.record`
(the trial directory, :class:`Trial`, :class:`TrialError`, the report table), :mod:`.session`
(:class:`TrialSession`: replay, then live; :func:`backends_for`).
Docs: ``docs/guides/trials.md`` (the record's files, resume, the checklist).
"""

from lookplangraph.apps.trial.scoring import ChecklistItem, ask_checklist, checklist, score
from lookplangraph.apps.trial.photos import (DEFAULT_MAX_PHOTO_BYTES, PhotoError, check_photo_size, megabytes,
                                             photo_file_check, photo_type)
from lookplangraph.apps.trial.record import (Trial, TrialError, new_trial_dir, report_table, task_from_graph,
                                             trial_dirs)
from lookplangraph.apps.trial.session import TrialSession, backends_for

__all__ = [
    "DEFAULT_MAX_PHOTO_BYTES", "PhotoError", "check_photo_size", "megabytes", "photo_file_check", "photo_type",
    "ChecklistItem", "ask_checklist", "checklist", "score",
    "Trial", "TrialError", "new_trial_dir", "report_table", "task_from_graph", "trial_dirs",
    "TrialSession", "backends_for",
]
