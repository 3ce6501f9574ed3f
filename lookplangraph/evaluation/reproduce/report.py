"""Tables and plots of a reproduction (:mod:`.run`): ours beside the paper's figures.

For each table ``report/<table>.md`` (laid out like the paper: one line per method, a column
group per domain; each cell is our figure, then the paper's in italics and parentheses),
``<table>.csv`` and ``<table>.json`` (long format: table, row, split, metric, ours, paper model,
paper), and plots as PNG and SVG (our bars solid, the paper's hatched). A cell whose episodes are
not all finished shows ``k/n`` tasks, so a partial run is never mistaken for a full one.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from grasif.metrics import summarize

from lookplangraph.evaluation.gam_eval import summary_of
from lookplangraph.evaluation.injection_curve import plot_curve, read_curve
from lookplangraph.evaluation.reproduce.run import Cell
from lookplangraph.evaluation.reproduce.tables import METRIC_HEADERS, TABLES, Table
from lookplangraph.evaluation.runner import read_results, to_record


def cell_metrics(cell: Cell) -> dict:
    """``{"done": k, "n": n, metric: value ...}`` over the cell's finished tasks (or observations)."""
    if cell.row.config == "@gam":
        rows = read_results(cell.dir / "results.jsonl")
        mine = {r["key"]: r for r in rows if r.get("key") in set(cell.keys)}
        out: dict = {"done": len(mine), "n": len(cell.keys)}
        if mine:
            summary = summary_of(list(mine.values()))
            out.update({m: summary[cell.split][m] for m in ("node_f1", "edge_f1", "success")})
        return out
    wanted = set(cell.keys)
    rows = {}
    for r in read_results(cell.dir / "results.jsonl"):
        key = f"{r['split']}__{r['task_id']}"
        if key in wanted:
            rows[key] = r
    out = {"done": len(rows), "n": len(cell.keys)}
    if rows:
        s = summarize([to_record(r) for r in rows.values()])
        out.update(sr=s.sr, app=s.app, tpa=s.tpa, sr_changed_only=s.sr_changed_only, mean_wall_s=s.mean_wall_s)
    return out


def _fmt(metric: str, v) -> str:
    if v is None:
        return "–"
    return f"{v:.0f}" if metric == "tpa" else f"{v:.2f}"


def table_records(table: Table, cells: list[Cell]) -> list[dict]:
    """Long-format records: one per (row, split, metric), ours and the paper's figures."""
    ours = {(c.row.key, c.split): cell_metrics(c) for c in cells if c.table == table.name}
    records = []
    for row in table.rows:
        for split in table.splits:
            got = ours.get((row.key, split))
            for metric in table.metrics:
                paper = {m: row.paper.get(f"{split}/{m}" if m else split, {}).get(metric) for m in table.paper_models}
                records.append({"table": table.name, "row": row.key, "method": row.label, "split": split,
                                "metric": metric, "ours": None if got is None else got.get(metric),
                                "tasks_done": None if got is None else got["done"],
                                "tasks": None if got is None else got["n"], "paper": paper})
    return records


def markdown(table: Table, records: list[dict], identity: dict) -> str:
    """The table in Markdown, our figure first in each cell and the paper's in italics."""
    models = [m for m in table.paper_models if m]
    head = ["Method"]
    for split in table.splits:
        head += [f"{table.columns[split]} n"] + [f"{table.columns[split]} {METRIC_HEADERS[m]}" for m in table.metrics]
    lines = [f"## {table.title}", "",
             f"Each cell: **ours** (LM `{identity['lm']}`" + (f", VLM `{identity['vlm']}`" if identity.get("vlm") else "")
             + (f", a seeded sample of {identity['limit']} tasks per split" if identity.get("limit") else ", all tasks")
             + ") then *(the paper's figure" + (f": {' / '.join(models)}" if models else "") + ")*. "
             "`n` is finished/planned tasks of our run; – : not run or no successful task (TPA).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by = {(r["row"], r["split"], r["metric"]): r for r in records}
    for row in table.rows:
        cells = [row.label]
        for split in table.splits:
            first = by[(row.key, split, table.metrics[0])]
            cells.append("–" if first["tasks"] is None else f"{first['tasks_done']}/{first['tasks']}")
            for metric in table.metrics:
                r = by[(row.key, split, metric)]
                paper = [r["paper"].get(m) for m in table.paper_models]
                ours = "–" if r["ours"] is None else f"**{_fmt(metric, r['ours'])}**"
                theirs = " / ".join(_fmt(metric, p) for p in paper) if any(p is not None for p in paper) else ""
                cells.append(ours + (f" *({theirs})*" if theirs else ""))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [""] + [f"- {n}" for n in table.notes]
    return "\n".join(lines) + "\n"


def write_table(table: Table, cells: list[Cell], report: Path, identity: dict) -> Path:
    """``report/<table>.md``, ``.csv``, ``.json`` and the plots; returns the Markdown's path."""
    report.mkdir(parents=True, exist_ok=True)
    records = table_records(table, cells)
    md = report / f"{table.name}.md"
    _atomic_write(md, markdown(table, records, identity))
    _atomic_write(report / f"{table.name}.json", json.dumps({"identity": identity, "records": records}, indent=1) + "\n")
    tmp = report / f"{table.name}.csv.tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["table", "row", "method", "split", "metric", "ours", "tasks_done", "tasks", "paper_model", "paper"])
        for r in records:
            for model, value in r["paper"].items():
                w.writerow([r["table"], r["row"], r["method"], r["split"], r["metric"], r["ours"], r["tasks_done"],
                            r["tasks"], model or "paper", value])
    tmp.replace(report / f"{table.name}.csv")
    plot_table(table, records, report)
    return md


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_table(table: Table, records: list[dict], report: Path) -> list[Path]:
    """Grouped bars: one panel per (split, metric), a group of bars per method: ours solid, the
    paper's hatched (none for the paper's own rows, where we have no figure). TPA gets its own
    figure (another scale)."""
    plt = _pyplot()
    written = []
    rows = list(table.rows)
    groups = [[m for m in table.metrics if m != "tpa"]] + ([["tpa"]] if "tpa" in table.metrics else [])
    models = list(table.paper_models)
    width = 0.8 / (1 + len(models))
    for metrics in groups:
        panel_w = max(3.0, 0.45 * len(rows) * (1 + len(models)) / 2 + 1.4)
        fig, axes = plt.subplots(len(table.splits), len(metrics), squeeze=False,
                                 figsize=(panel_w * len(metrics), 3.1 * len(table.splits) + 0.6))
        for i, split in enumerate(table.splits):
            for j, metric in enumerate(metrics):
                ax = axes[i][j]
                by = {r["row"]: r for r in records if r["split"] == split and r["metric"] == metric}
                xs = range(len(rows))
                ours = [by[row.key]["ours"] for row in rows]
                ax.bar([x - 0.4 + width / 2 for x in xs], [v or 0 for v in ours], width, label="ours", color="#1f77b4")
                for k, model in enumerate(models):
                    vals = [by[row.key]["paper"].get(model) for row in rows]
                    ax.bar([x - 0.4 + width * (k + 1.5) for x in xs], [v or 0 for v in vals], width,
                           label=f"paper{' ' + model if model else ''}", color=["#ff7f0e", "#2ca02c"][k % 2],
                           alpha=0.55, hatch="//")
                for x, v, row in zip(xs, ours, rows):
                    if row.config is not None and not v:  # nothing finished (n/a), or a measured 0
                        ax.text(x - 0.4 + width / 2, 0.01, "n/a" if v is None else "0", ha="center", va="bottom",
                                fontsize=6, rotation=90 if v is None else 0)
                ax.set_xticks(list(xs))
                ax.set_xticklabels([_short(row.label) for row in rows], rotation=35, ha="right", fontsize=8)
                if metric != "tpa":
                    ax.set_ylim(0, 1.05)
                ax.set_title(f"{table.columns[split]}: {METRIC_HEADERS[metric]}", fontsize=9)
                ax.grid(axis="y", alpha=0.3)
        axes[0][0].legend(fontsize=7)
        fig.suptitle(table.title, fontsize=10)
        fig.tight_layout()
        stem = report / (f"{table.name}_tpa" if metrics == ["tpa"] else table.name)
        for ext in ("png", "svg"):
            fig.savefig(stem.with_suffix(f".{ext}"), dpi=120)
            written.append(stem.with_suffix(f".{ext}"))
        plt.close(fig)
    return written


def _short(label: str, width: int = 18) -> str:
    """A method's name for an axis: the part before any parenthesis, at most ``width`` characters."""
    name = label.split(" (")[0]
    return name if len(name) <= width else name[: width - 1] + "…"


def write_report(names: list[str], cells: list[Cell], out: Path, identity: dict) -> list[Path]:
    """Every table of ``names`` and, when Table V was run, the injection curve; plus
    ``report/README.md`` listing them. Returns the Markdown files."""
    report = out / "report"
    mds = [write_table(TABLES[name], cells, report, identity) for name in names]
    curve = out / "table5" / "injection" / "curve.csv"
    if "table5" in names and curve.exists():
        plot_curve(read_curve(curve), report / "injection_curve")
    index = ["# Reproduction report", "", f"Run: `{json.dumps(identity)}`", ""]
    for name in sorted(TABLES):  # every table written so far into this report, not only this command's
        md = report / f"{name}.md"
        if not md.exists():
            continue
        index += [md.read_text(), ""]
        for plot in sorted(report.glob(f"{name}*.png")):
            index.append(f"![{plot.stem}]({plot.name})")
        index.append("")
    if (report / "injection_curve.png").exists():
        index += ["## Error-injection curve (Table V's correction modes, a scripted policy)", "",
                  "![injection curve](injection_curve.png)", ""]
    _atomic_write(report / "README.md", "\n".join(index))
    return mds
