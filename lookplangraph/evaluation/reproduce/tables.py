"""What each of the paper's tables is made of: its rows (a config in ``configs/`` plus settings on
top), its columns (GraSIF splits) and the paper's own figures, to print beside ours.

A row whose ``config`` is None is the paper's only (a model we do not run, e.g. GPT-4o in Table
V): it is listed with the paper's figures and a dash for ours. Table III rows are graph
augmentation evaluations (:mod:`lookplangraph.evaluation.gam_eval`), not planner runs.

The paper's figures are copied from ``lookplangraph.txt`` (Tables II–V) and keyed
``split`` or ``split/model`` (Table II reports two models per environment; Table III two models).
OmniGibson's column is our ``behavior`` split (BEHAVIOR-1K tasks, the environment OmniGibson).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: metric key → column header
METRIC_HEADERS = {"sr": "SR↑", "app": "APP↑", "tpa": "TPA↓", "node_f1": "F1_N↑", "edge_f1": "F1_E↑",
                  "success": "Success↑"}


@dataclass(frozen=True)
class Row:
    """One line of a table. ``config`` names a file in the configs folder (None: the paper's only);
    ``overrides`` are settings applied on top (:mod:`lookplangraph.evaluation.settings` keys); ``paper`` maps
    ``split`` or ``split/model`` to the paper's metric → figure."""

    key: str
    label: str
    config: str | None
    overrides: dict = field(default_factory=dict)
    paper: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Table:
    """``splits`` are the GraSIF splits run (the table's column groups, headed ``columns[split]``);
    ``paper_models`` the models the paper reports per column ("" for one unnamed model)."""

    name: str
    title: str
    splits: tuple[str, ...]
    columns: dict[str, str]
    metrics: tuple[str, ...]
    rows: tuple[Row, ...]
    paper_models: tuple[str, ...] = ("",)
    notes: tuple[str, ...] = ()


def _p(**cols: tuple[float, ...]) -> dict[str, dict[str, float]]:
    """Paper figures per split: ``office=(sr, app, tpa)``."""
    return {split: dict(zip(("sr", "app", "tpa"), v)) for split, v in cols.items()}


def _t2(vh_llama, vh_gpt, og_llama, og_gpt) -> dict[str, dict[str, float]]:
    """Table II's figures: (SR, APP) for VirtualHome and OmniGibson, Llama3.2 then GPT-4o."""
    cells = {"virtualhome/Llama3.2": vh_llama, "virtualhome/GPT-4o": vh_gpt,
             "behavior/Llama3.2": og_llama, "behavior/GPT-4o": og_gpt}
    return {k: dict(zip(("sr", "app"), v)) for k, v in cells.items()}


# Table IV: all planners, static environment, three domains (the paper does not name the model).
TABLE4 = Table(
    name="table4", title="Table IV: planners compared on GraSIF (static environment)",
    splits=("office", "behavior", "virtualhome"),
    columns={"office": "SayPlan Office", "behavior": "BEHAVIOR-1K", "virtualhome": "RobotHow"},
    metrics=("sr", "app", "tpa"),
    rows=(
        Row("llm_as_p", "LLM-as-P", "table4_llm_as_p.toml",
            paper=_p(office=(0.47, 0.59, 1409), behavior=(0.39, 0.53, 178), virtualhome=(0.44, 0.51, 3417))),
        Row("llm_plus_p", "LLM+P", "table4_llm_plus_p.toml",
            paper=_p(office=(0.07, 0.21, 1945), behavior=(0.33, 0.37, 160), virtualhome=(0.30, 0.38, 5396))),
        Row("sayplan", "SayPlan", "table4_sayplan.toml",
            paper=_p(office=(0.46, 0.59, 3697), behavior=(0.36, 0.43, 1888), virtualhome=(0.86, 0.87, 5576))),
        Row("sayplan_lite", "SayPlan Lite", "table4_sayplan_lite.toml",
            paper=_p(office=(0.53, 0.68, 1368), behavior=(0.61, 0.76, 524), virtualhome=(0.84, 0.89, 4641))),
        Row("react", "ReAct", "table4_react.toml",
            paper=_p(office=(0.38, 0.64, 2503), behavior=(0.47, 0.61, 1713), virtualhome=(0.89, 0.91, 1322))),
        Row("lookplangraph", "LookPlanGraph", "table4_planning.toml",
            paper=_p(office=(0.62, 0.73, 1989), behavior=(0.60, 0.77, 1472), virtualhome=(0.87, 0.89, 2653))),
    ),
)

# Table II: dynamic environments (objects moved before the episode, seed 0). ReAct and
# LookPlanGraph perceive through the graph augmentation module (mode chosen at run time:
# ``parser`` on the environment's written descriptions, ``vlm`` with a describer and images);
# the GT rows take the true objects.
_GAM = {"augmentation": "@gam"}  # replaced by the run's augmentation mode (lookplangraph.evaluation.reproduce.run)
TABLE2 = Table(
    name="table2", title="Table II: planners in dynamic environments",
    splits=("virtualhome", "behavior"),
    columns={"virtualhome": "VirtualHome", "behavior": "OmniGibson (BEHAVIOR-1K)"},
    metrics=("sr", "app"), paper_models=("Llama3.2", "GPT-4o"),
    rows=(
        Row("llm_as_p", "LLM-as-P", "table2_llm_as_p.toml",
            paper=_t2((0.16, 0.53), (0.44, 0.65), (0.16, 0.36), (0.33, 0.59))),
        Row("llm_plus_p", "LLM+P", "table2_llm_plus_p.toml",
            paper=_t2((0.00, 0.38), (0.32, 0.58), (0.21, 0.40), (0.37, 0.62))),
        Row("sayplan", "SayPlan", "table2_sayplan.toml",
            paper=_t2((0.21, 0.53), (0.38, 0.59), (0.10, 0.26), (0.12, 0.31))),
        Row("sayplan_lite", "SayPlan Lite", "table2_sayplan_lite.toml",
            paper=_t2((0.39, 0.65), (0.48, 0.67), (0.27, 0.55), (0.40, 0.67))),
        Row("react", "ReAct", "table2_react.toml", overrides=_GAM,
            paper=_t2((0.30, 0.64), (0.22, 0.50), (0.33, 0.52), (0.41, 0.64))),
        Row("lookplangraph", "LookPlanGraph", "table2_dynamic.toml", overrides=_GAM,
            paper=_t2((0.60, 0.68), (0.52, 0.63), (0.35, 0.60), (0.42, 0.69))),
        Row("react_gt", "ReActGT", "table2_react.toml", overrides={"augmentation": "ground_truth"},
            paper=_t2((0.50, 0.74), (0.34, 0.58), (0.63, 0.75), (0.66, 0.78))),
        Row("lookplangraph_gt", "LookPlanGraphGT", "table2_dynamic.toml", overrides={"augmentation": "ground_truth"},
            paper=_t2((0.92, 0.96), (0.86, 0.92), (0.74, 0.86), (0.71, 0.84))),
    ),
    notes=("ReAct and LookPlanGraph perceive through the graph augmentation module; the GT rows take the true objects.",),
)

# Table V: LookPlanGraph's ablations on the office split, plus our correction mode "feedback".
TABLE5 = Table(
    name="table5", title="Table V: ablations on SayPlan Office",
    splits=("office",), columns={"office": "SayPlan Office"}, metrics=("sr", "app", "tpa"),
    rows=(
        Row("base", "LookPlanGraph", "table5_base.toml", paper=_p(office=(0.62, 0.73, 1989))),
        Row("json_graph", "Json graph", "table5_json_graph.toml", paper=_p(office=(0.55, 0.67, 2599))),
        Row("full_graph", "Full Graph", "table5_full_graph.toml", paper=_p(office=(0.65, 0.78, 4044))),
        Row("no_priors", "No Priors", "table5_no_priors.toml", paper=_p(office=(0.51, 0.68, 1767))),
        Row("no_correction", "No Correction", "table5_no_correction.toml", paper=_p(office=(0.24, 0.40, 1682))),
        Row("feedback_only", "Feedback only (ours: no rule correction)", "table5_feedback_only.toml"),
        Row("gpt4o", "GPT-4o", None, paper=_p(office=(0.76, 0.83, 1752))),
        Row("llama", "Llama3.2-90b", None, paper=_p(office=(0.59, 0.72, 2004))),
        Row("gemma", "Gemma3-12b", None, paper=_p(office=(0.31, 0.45, 2095))),
    ),
    notes=("Our rows use the --lm model; the paper's model rows (GPT-4o, Llama3.2-90b, Gemma3-12b) are the paper's only.",),
)


def _g(vh: tuple[float, float, float], og: tuple[float, float, float]) -> dict[str, dict[str, float]]:
    names = ("node_f1", "edge_f1", "success")
    return {"virtualhome": dict(zip(names, vh)), "behavior": dict(zip(names, og))}  # one model per row


# Table III: the graph augmentation module scored against true subgraphs.
TABLE3 = Table(
    name="table3", title="Table III: graph augmentation",
    splits=("virtualhome", "behavior"),
    columns={"virtualhome": "VirtualHome", "behavior": "OmniGibson (BEHAVIOR-1K)"},
    metrics=("node_f1", "edge_f1", "success"),
    rows=(
        Row("gam", "Ours (parser of --lm; describer --vlm with --bank)", "@gam"),
        Row("llama", "Llama3.2-90b", None, paper=_g((0.78, 0.73, 0.26), (0.67, 0.67, 0.33))),
        Row("gpt4o", "GPT-4o", None, paper=_g((0.87, 0.84, 0.44), (0.85, 0.88, 0.59))),
    ),
    notes=("Without --vlm and --bank the module's parser stage is scored on GraSIF's written descriptions "
           "(the paper's figures are for images described by a VLM).",),
)

TABLES: dict[str, Table] = {t.name: t for t in (TABLE2, TABLE3, TABLE4, TABLE5)}
