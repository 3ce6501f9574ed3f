"""VLM graph augmentation (paper IV-D): describer and parser (:mod:`vlm.gam`), binding of their
output to the memory's names (:mod:`vlm.binding`), the Table III metric (:mod:`vlm.metrics`), and a
deterministic description writer (:mod:`vlm.descriptions`). Its evaluation on GraSIF is
:mod:`lookplangraph.evaluation.gam_eval`."""

from vlm.binding import DEFAULT_STATES, to_observation
from vlm.gam import MODES, Augmentation, Describer, GraphAugmentation, Parser, parser_schema
from vlm.metrics import Score, score, summarize

__all__ = ["DEFAULT_STATES", "MODES", "Augmentation", "Describer", "GraphAugmentation", "Parser", "Score",
           "parser_schema", "score", "summarize", "to_observation"]
