"""The viewer's self-contained HTML page: data as JSON inside the page, rendered lazily by its
own script (no server, no network, nothing fetched).

The page (template, style and script are the package files ``assets/viewer.html``,
``viewer.css`` and ``viewer.js``) holds:

* ``#lpg-index``: the runs and one compact row per episode (what the list shows and filters on);
* ``#lpg-ep-N``: episode N's details (steps, goal units, the belief-graph deltas of
  :mod:`lookplangraph.apps.viewer.replay`), parsed only when the episode is opened; a step whose
  trace has no reason carries the reason saved after the run for its action (``asked``: the
  reason, the LM that gave it, when), else the episode's ``explain`` command asks for it;
* ``#lpg-g-N``: a belief graph before the first step, shared by the episodes that start from it;
* ``#lpg-img-N``: an image as a ``data:`` URL thumbnail (:func:`thumbnail`), read when shown.

Every JSON block is escaped so that no ``<`` appears inside the script element. Images are
downscaled to at most ``max_side`` pixels (JPEG) with Pillow when it is installed (else an image
of at most ``IMAGE_RAW_LIMIT`` bytes goes in as it is, a larger one is left out with a note);
once ``image_budget`` bytes of images are in the page, later ones are left out, each with a note
naming its file.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import mimetypes
import shlex
from importlib import resources
from pathlib import Path

from lookplangraph.apps.viewer.goals import goal_nodes, goal_units
from lookplangraph.apps.viewer.load import Episode, Run
from lookplangraph.apps.viewer.replay import replay

#: an image put in as it is when Pillow cannot make a thumbnail
IMAGE_RAW_LIMIT = 200_000
#: a step's raw LM reply is cut to this many characters in the page
TEXT_LIMIT = 4000


def _json(data) -> str:
    """JSON safe inside a ``<script>`` element (``<`` escaped; JSON strings read it back)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def thumbnail(path: Path, max_side: int = 320, quality: int = 70) -> tuple[str | None, str | None]:
    """``(data_url, None)`` for the image at ``path`` (module doc), or ``(None, why)``."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, f"{path}: cannot be read ({exc.strerror})"
    try:
        from PIL import Image
    except ImportError:
        if len(data) > IMAGE_RAW_LIMIT:
            return None, f"{path.name}: {len(data) // 1000} kB, too large without Pillow to make a thumbnail (pip install pillow)"
        mime = mimetypes.guess_type(path.name)[0] or "image/png"
        return f"data:{mime};base64,{base64.b64encode(data).decode()}", None
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.thumbnail((max_side, max_side))
            if img.mode not in ("RGB", "L"):
                img = img.convert("RGB")
            out = io.BytesIO()
            img.save(out, "JPEG", quality=quality, optimize=True)
    except Exception as exc:  # noqa: BLE001 - a broken image file must not stop the page
        return None, f"{path.name}: not a readable image ({exc})"
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode(), None


class Images:
    """The page's images: each file once, within the byte budget (module doc)."""

    def __init__(self, budget: int, max_side: int):
        self.budget, self.max_side = budget, max_side
        self.used = 0
        self.ids: dict[Path, int] = {}
        self.blocks: list[str] = []

    def add(self, path: Path) -> tuple[int | None, str | None]:
        """The image's id in the page, or None and why it is not there."""
        key = path.resolve()
        if key in self.ids:
            return self.ids[key], None
        if self.used >= self.budget:
            return None, f"{path.name}: left out, the page's image budget ({self.budget // 1_000_000} MB) is spent"
        url, why = thumbnail(path, self.max_side)
        if url is None:
            return None, why
        n = len(self.blocks)
        self.ids[key] = n
        self.used += len(url)
        self.blocks.append(f'<script type="application/json" id="lpg-img-{n}">{_json(url)}</script>')
        return n, None


def _find_image(ep: Episode, name: str | None) -> Path | None:
    """An image named in a trace or an augmentation file: as written, relative to the episode's
    directory, or by its file name in ``images/`` or ``photos/`` there."""
    if not name:
        return None
    p = Path(name)
    candidates = [p] if p.is_absolute() else [ep.directory / p]
    candidates += [ep.directory / "images" / p.name, ep.directory / "photos" / p.name]
    return next((c for c in candidates if c.is_file()), None)


def _env_images(ep: Episode) -> dict[int, list[str]]:
    """Images of a single-episode directory's ``steps.jsonl`` by trace call: the environment's
    successful steps are matched in order to each record's ``executed`` steps."""
    out: dict[int, list[str]] = {}
    pending = [s for s in ep.env_steps if s.get("ok")]
    i = 0
    for rec in ep.steps:
        for step in rec.get("executed") or []:
            while i < len(pending) and pending[i].get("action") != step:
                i += 1
            if i < len(pending):
                if pending[i].get("image"):
                    out.setdefault(rec["call"], []).append(pending[i]["image"])
                i += 1
    return out


def _verdict(result: dict | None) -> str:
    if result is None:
        return "unfinished"
    if result.get("success"):
        return "success"
    if result.get("success_changed_only"):
        return "changed-only"
    return "failure"


def _step(rec: dict, ep: Episode, images: Images, env_images: dict[int, list[str]], notes: list[str]) -> dict:
    text = rec.get("text") or ""
    perceived = []
    for p in rec.get("perceived") or []:
        if not isinstance(p, dict):
            continue
        img, why = None, None
        path = _find_image(ep, p.get("image"))
        if path is not None:
            img, why = images.add(path)
        elif p.get("image"):
            why = f"{p['image']}: not found"
        if why:
            notes.append(f"call {rec.get('call')}: image {why}")
        perceived.append({"node": p.get("node"), "mode": p.get("mode"), "objects": p.get("objects") or [],
                          "notes": p.get("notes") or [], "description": p.get("description"),
                          "tokens": [p.get("prompt_tokens", 0), p.get("completion_tokens", 0)],
                          "seconds": p.get("seconds", 0.0), "img": img})
    shots = []
    if not any(p["img"] is not None for p in perceived):
        for name in env_images.get(rec.get("call"), []):
            path = _find_image(ep, name)
            img, why = images.add(path) if path is not None else (None, f"{name}: not found")
            if img is not None:
                shots.append(img)
            elif why:
                notes.append(f"call {rec.get('call')}: image {why}")
    out = {"call": rec.get("call"), "reason": rec.get("reason"), "proposed": rec.get("proposed"),
           "accepted": bool(rec.get("accepted")), "executed": rec.get("executed") or [],
           "corrections": rec.get("corrections") or [], "feedback": rec.get("feedback"),
           "observed": rec.get("observed") or [], "perceived": perceived, "infeasible": rec.get("infeasible"),
           "tokens": [rec.get("prompt_tokens", 0), rec.get("completion_tokens", 0), rec.get("cached_tokens")],
           "seconds": rec.get("seconds", 0.0), "excluded": rec.get("excluded", 0), "failure": rec.get("failure")}
    if shots:
        out["shots"] = shots
    asked = ep.asked.get(rec.get("call"))
    if not rec.get("reason") and asked and asked.get("proposed") == rec.get("proposed"):
        out["asked"] = {"reason": asked["reason"], "by": _asked_by(asked)}
    if int(rec.get("in_answer") or 1) > 1:  # an action that came with the answer of an earlier step
        out["inAnswer"] = int(rec["in_answer"])
    for key in ("agent", "form"):  # two-agent planners (SG-RwR): who made the call, the reply's form
        if rec.get(key):
            out[key] = str(rec[key])
    if rec.get("code"):
        code = str(rec["code"])
        out["code"] = code[:TEXT_LIMIT] + (f"\n... ({len(code) - TEXT_LIMIT} more characters)" if len(code) > TEXT_LIMIT else "")
    if isinstance(rec.get("sandbox"), dict):
        out["sandbox"] = {k: v for k, v in rec["sandbox"].items() if isinstance(v, (str, int, float, bool)) or v is None}
    if text and text != rec.get("proposed"):
        out["text"] = text[:TEXT_LIMIT] + (f"... ({len(text) - TEXT_LIMIT} more characters)" if len(text) > TEXT_LIMIT else "")
    return out


def _asked_by(asked: dict) -> str:
    """Who gave a reason asked after the run, and when: ``LM X, time``."""
    return ", ".join(str(v) for v in (f"LM {asked['lm']}" if asked.get("lm") else None, asked.get("asked")) if v)


def _planner(ep: Episode, runs: list[Run]) -> str:
    r = ep.result or {}
    if r.get("planner"):
        return r["planner"]
    cfg = runs[ep.run].config or {}
    return cfg.get("planner") or "lookplangraph"


def build_payload(runs: list[Run], *, image_budget: int = 25_000_000, max_side: int = 320) -> tuple[dict, list[str], list[str], list[str]]:
    """``(index, episode blocks, graph blocks, image blocks)`` of the page (module doc)."""
    images = Images(image_budget, max_side)
    graphs: dict[str, int] = {}
    graph_blocks: list[str] = []
    episode_blocks: list[str] = []
    rows = []
    for ep in (e for run in runs for e in run.episodes):
        n = len(rows)
        r = ep.result or {}
        planner = _planner(ep, runs)
        notes = list(ep.warnings)
        env_images = _env_images(ep) if ep.env_steps else {}
        steps = [_step(rec, ep, images, env_images, notes) for rec in ep.steps]
        graph, graph_why = None, None
        if ep.task is None:
            graph_why = "the task is not at hand, so the memory graph cannot be drawn (give --data-dir)"
        else:
            try:
                config = r.get("config")
                if config is None and ep.kind == "trial":
                    config = (runs[ep.run].config or {}).get("planner")
                tl = replay(ep.task, ep.result, ep.steps, ep.augmentations, planner=planner, config=config)
            except Exception as exc:  # noqa: BLE001 - one episode's odd trace must not stop the page
                graph_why = f"the memory graph could not be rebuilt: {type(exc).__name__}: {exc}"
            else:
                base = _json(tl.base)
                key = hashlib.sha1(base.encode()).hexdigest()
                if key not in graphs:
                    graphs[key] = len(graph_blocks)
                    graph_blocks.append(f'<script type="application/json" id="lpg-g-{graphs[key]}">{base}</script>')
                graph = {"base": graphs[key], "deltas": tl.deltas, "belief": tl.belief, "exact": tl.exact,
                         "notes": tl.notes}
        units, goal_note = goal_units(ep.task, ep.result, ep.checklist)
        tokens = r.get("prompt_tokens", 0) + r.get("completion_tokens", 0) if r else sum(
            s["tokens"][0] + s["tokens"][1] for s in steps)
        instruction = ep.task.instruction if ep.task is not None else r.get("instruction")
        verdict = _verdict(ep.result)
        actions = r.get("actions") or []
        rows.append({
            "id": n, "run": ep.run, "split": ep.split or "", "task": ep.task_id or "", "planner": planner,
            "lm": r.get("lm") or "", "verdict": verdict, "sr": None if not r else int(bool(r.get("success"))),
            "lenient": None if not r or r.get("success_changed_only") is None else int(bool(r["success_changed_only"])),
            "app": r.get("precision"), "actions": len(actions) if r else sum(s["accepted"] for s in steps),
            "tokens": tokens, "seconds": r.get("wall_s"), "end": r.get("termination") or "",
            "failure": r.get("failure") or "",
            "calls": r.get("lm_calls", len(steps)) if r else sum("inAnswer" not in s for s in steps),
            "q": " ".join(map(str, [ep.task_id, instruction, planner, r.get("lm"), r.get("termination"),
                                    r.get("failure"), verdict, *actions])).lower(),
        })
        detail = {
            "instruction": instruction, "goal": units, "goalNote": goal_note, "goalNodes": goal_nodes(ep.task),
            "notes": notes,
            "moves": r.get("moves") or [], "infeasible": r.get("infeasible") or [],
            "result": {k: r.get(k) for k in ("termination", "failure", "precision", "success", "success_changed_only",
                                             "success_with_correction", "lm", "lm_calls", "prompt_tokens",
                                             "completion_tokens", "cached_tokens", "lm_seconds", "wall_s",
                                             "augmentation", "augmentation_calls", "gt_actions")} if r else None,
            "actions": actions, "executedCount": len(r.get("executed") or []) if r else None,
            "steps": steps, "graph": graph, "graphWhy": graph_why, "explain": _explain_command(ep, runs, planner),
            "askedBy": sorted({s["asked"]["by"] for s in steps if "asked" in s and s["asked"]["by"]}),
        }
        episode_blocks.append(f'<script type="application/json" id="lpg-ep-{n}">{_json(detail)}</script>')
    index = {
        "runs": [{"label": run.label, "kind": run.kind, "path": str(run.path), "warnings": run.warnings,
                  "lm": (run.config or {}).get("lm"), "planner": (run.config or {}).get("planner"),
                  "dynamic": (run.config or {}).get("dynamic"), "episodes": len(run.episodes)} for run in runs],
        "episodes": rows, "graphs": len(graph_blocks), "images": len(images.blocks),
    }
    return index, episode_blocks, graph_blocks, images.blocks


def _explain_command(ep, runs, planner: str) -> str | None:
    """The command that asks the run's LM for the reasons of the episode's steps
    (``lookplangraph explain``), for LookPlanGraph episodes of run and eval directories."""
    run = runs[ep.run]
    if planner != "lookplangraph" or ep.kind not in ("eval", "run"):
        return None
    where = shlex.quote(str(run.path))
    return f"lookplangraph explain {where}" + (f" --task {ep.split}/{ep.task_id}" if ep.kind == "eval" else "")


def _asset(name: str) -> str:
    return resources.files("lookplangraph.apps.viewer").joinpath("assets", name).read_text(encoding="utf-8")


def render_page(runs: list[Run], *, title: str | None = None, image_budget: int = 25_000_000,
                max_side: int = 320) -> str:
    """The whole page for ``runs`` (module doc)."""
    index, episodes, graphs, images = build_payload(runs, image_budget=image_budget, max_side=max_side)
    title = title or "LookPlanGraph episodes: " + ", ".join(r.label for r in runs)
    data = "\n".join([f'<script type="application/json" id="lpg-index">{_json(index)}</script>',
                      *episodes, *graphs, *images])
    page = _asset("viewer.html")
    # the script may contain "{{": replace the placeholders in an order that never rescans inserted text
    head, _, rest = page.partition("{{STYLE}}")
    mid, _, tail = rest.partition("{{DATA}}")
    mid2, _, end = tail.partition("{{SCRIPT}}")
    return ((head.replace("{{TITLE}}", html.escape(title)) + _asset("viewer.css") + mid + data + mid2
             + _asset("viewer.js").replace("</script", "<\\/script") + end))
