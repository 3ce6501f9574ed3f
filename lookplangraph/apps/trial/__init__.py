"""Human-in-the-loop trials: the planner in a real building, a person as its hands and eyes
(paper section VII-E).

A trial runs :func:`lookplangraph.planners.lookplangraph.run_episode` in a :class:`sim_adapters.human.HumanEnvironment`
and keeps everything on disk, in ``runs/<trial>/``::

    trial.json          what runs: the LM, the VLM, the parser, the augmentation mode, the planner settings
    task.json           the task (instruction, building graph, goal; a task file's format)
    operator.jsonl      every operator answer, appended as given: request id, step, LM action, done/failed
                        and the reason, photo, typed description, asked/answered time, operator seconds
    photos/NNN_node.ext every photo, NNN the request id
    lm_cache.jsonl      every planner LM reply (and the parser's, when the planner's LM parses)
    vlm_cache.jsonl     the describer's replies; parser_cache.jsonl a separate parser's
    trace.jsonl         one planner step per line (as ``lookplangraph run`` writes it)
    augmentations.jsonl per discover_objects: the photo, the VLM description or the typed one, the
                        parser's reply, the objects merged into memory, dropped entries, tokens, seconds
    events.jsonl        sessions started, pauses, the end of planning, the checklist
    episode.json        the planner's result when it stopped (before the checklist)
    checklist.json      the goal checklist with the operator's marks
    result.json         the trial's result: success and precision from the checklist (below)

**Resume.** Nothing lives only in memory: a trial is resumed (``lookplangraph trial --resume
DIR``, or after a crash) by running the planner again from the start; its LM replies come from
the caches and the operator's answers from ``operator.jsonl`` (each must match the request it
answered: the same request id and step), so the run reaches exactly the state it had, then goes
on live. Should a recorded answer no longer match (a different model), the rest of the log is
moved to ``operator.superseded.jsonl`` and the trial continues live from there.

**The checklist.** There is no ground truth in a building: when the planner stops, the operator
checks the task's goal by looking, one line per goal unit (:func:`checklist`): a node goal
("cup-1 is inside backpack-1", "coffee_machine-1 is on"), a count goal (weight: its count; met or
not met as a whole), each top-level conjunct of a formula goal (in BDDL, as written); a task
without a goal (``--graph`` with ``--instruction``) gets one line, the instruction itself. A goal
that keeps everything else unchanged adds a line "nothing else was changed" (weight 0). As in the
benchmark: **success** = every line met, **precision** = the met weight over the goal units'
weight, **success_changed_only** = the goal units met whatever else changed. The planner's own
verdict on the graph the operator reported (``HumanEnvironment.true_graph``) is kept beside it
as ``reported_success``/``reported_precision``/``reported_goal_not_met``, and each checklist
line shows it as a hint.

**Modules.** One per concept; this package re-exports their public names:

* :mod:`lookplangraph.apps.trial.photos`: what a photo must be (type, size) and
  :class:`PhotoError`;
* :mod:`lookplangraph.apps.trial.scoring`: the checklist, its score, the checklist in a terminal;
* :mod:`lookplangraph.apps.trial.record`: the trial directory (:class:`Trial`, :class:`TrialError`),
  new trials' tasks and directories, finding trials and the report table;
* :mod:`lookplangraph.apps.trial.session`: a session (:class:`TrialSession`: replay, then live) and
  its backends behind the trial's caches (:func:`backends_for`).
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
