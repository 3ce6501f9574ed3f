"""The episode viewer: ``lookplangraph view RUN_DIR...`` writes one self-contained HTML page (no
server, no network) with every episode of the run directories: the list with verdicts, and per
episode the step-by-step timeline, the memory graph after each step and the goal units.

Modules: :mod:`.load` reads run directories (evaluations, single episodes, trials),
:mod:`.replay` rebuilds the planner's belief graph step by step, :mod:`.goals` the goal units,
:mod:`.page` the page itself, :mod:`.reasons` the asking of missing reasons (``--explain``),
:mod:`.command` the command line.
"""

from lookplangraph.apps.viewer.command import add_parser, cmd_view, write_view
from lookplangraph.apps.viewer.load import ViewerError

__all__ = ["add_parser", "cmd_view", "write_view", "ViewerError"]
