"""How large and how fast the episode viewer's page is on a 500-episode evaluation.

Builds (once; rerun reuses it) an evaluation directory of 500 real GraSIF episodes in the
``lookplangraph eval`` layout (``results.jsonl``, ``traces/``, ``summary.json``, ``config.json``),
run in the graph environment by the runner with the SCRIPTED error-injection policy
(:class:`lookplangraph.evaluation.injection.ErrorInjectionPolicy`: the ground-truth plan with injected
mistakes; not a language model), every third episode in dynamic mode so that some fail: all
VirtualHome and BEHAVIOR tasks and office tasks up to 500. Then writes the page and reports its
size and the seconds to write it; with ``--browser`` (Debian's chromium + chromedriver), also the
seconds until the page is ready in headless Chromium, to open the episode with the most steps,
and to draw its graph at every step.

    .venv/bin/python benchmarks/bench_viewer.py [--data-dir DIR] [--runs DIR] [--episodes 500] [--browser]
    .venv/bin/python benchmarks/bench_viewer.py --reuse RUN_DIR [--browser]   # an existing run directory
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grasif import dataset  # noqa: E402
from lookplangraph.lm import ScriptedBackend  # noqa: E402
from lookplangraph.evaluation.injection import ErrorInjectionPolicy  # noqa: E402
from lookplangraph.planners.config import PlannerConfig  # noqa: E402
from lookplangraph.evaluation.runner import traced_episode, write_summary  # noqa: E402
from lookplangraph.apps.viewer import write_view  # noqa: E402
from lookplangraph.apps.viewer.load import load_runs  # noqa: E402
from lookplangraph.apps.viewer.page import render_page  # noqa: E402

DONE = json.dumps({"function_name": "done", "node": None, "relation": None, "destination": None,
                   "reason": "scripted: no script for this task"})


def build_eval(data: Path, out: Path, n: int) -> Path:
    """The evaluation directory of ``n`` scripted episodes (module doc); kept when complete."""
    results = out / "results.jsonl"
    if results.exists() and len(results.read_text().splitlines()) >= n:
        return out
    shutil.rmtree(out, ignore_errors=True)
    (out / "traces").mkdir(parents=True)
    tasks = []
    for split in ("virtualhome", "behavior", "office"):
        tasks += dataset.load_split(data, split)
    tasks = tasks[:n]
    cfg = PlannerConfig()
    (out / "config.json").write_text(json.dumps({"planner": "lookplangraph", "lm": "scripted (error injection, rate 0.3)",
                                                 "split": "mixed", "dynamic": "every third episode"}, indent=1))
    rows = []
    with open(results, "w") as f:
        for i, task in enumerate(tqdm(tasks, desc="scripted episodes", unit="ep")):
            try:
                lm = ErrorInjectionPolicy(task, 0.3, seed=i)
            except ValueError:
                lm = ScriptedBackend([DONE])
            result = traced_episode(task, lm, cfg, out / "traces" / f"{task.split}__{task.id}.jsonl",
                                    dynamic_seed=i if i % 3 == 0 else None)
            row = asdict(result) | {"gt_actions": len(task.ground_truth_plan), "no_change": task.goal.is_empty()}
            f.write(json.dumps(row) + "\n")
            rows.append(row)
    write_summary(rows, out)
    return out


def browser_timing(page: Path) -> dict:
    """Seconds in headless Chromium until the list is ready; per split, for its episode with the
    most steps, milliseconds to open it and to draw its graph after each step (every room shown)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1440,900"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=opts)
    try:
        t0 = time.perf_counter()
        driver.get(page.as_uri())
        WebDriverWait(driver, 120).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "body[data-ready]")))
        ready = time.perf_counter() - t0
        rows = driver.execute_script("return document.querySelectorAll('#episode-rows tr').length")
        timing = driver.execute_script("""
            var eps = JSON.parse(document.getElementById('lpg-index').textContent).episodes;
            var longest = {};
            eps.forEach(function (e) { if (!longest[e.split] || e.calls > longest[e.split].calls) longest[e.split] = e; });
            var out = {};
            Object.keys(longest).sort().forEach(function (split) {
              var ep = longest[split], t0 = performance.now();
              document.querySelector('#episode-rows tr[data-id="' + ep.id + '"]').click();
              var open = performance.now() - t0;
              var toggle = document.getElementById('focus-toggle');
              if (toggle && toggle.checked) toggle.click();
              var t1 = performance.now(), steps = 0, most = 0;
              while (!document.getElementById('step-next').disabled) {
                document.getElementById('step-next').click(); steps++;
                most = Math.max(most, document.querySelectorAll('#graph-svg .gnode').length);
              }
              out[split] = {task: ep.task, open_ms: +open.toFixed(1), steps: steps,
                            per_step_ms: steps ? +((performance.now() - t1) / steps).toFixed(1) : 0, nodes_drawn: most};
            });
            return out;""")
        return {"ready_s": round(ready, 2), "rows": rows, "longest_episode_per_split": timing}
    finally:
        driver.quit()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=str(dataset.default_data_dir()), help="GraSIF data directory")
    ap.add_argument("--runs", default="/tmp/bench_viewer", help="where the synthetic evaluation is built")
    ap.add_argument("--episodes", type=int, default=500)
    ap.add_argument("--reuse", help="an existing run directory instead of the synthetic evaluation")
    ap.add_argument("--browser", action="store_true", help="also time the page in headless Chromium")
    args = ap.parse_args()
    data = Path(args.data_dir)
    if args.reuse:
        run = Path(args.reuse)
    else:
        if not (data / "index.json").exists():
            print(f"{data}: no GraSIF build; run `lookplangraph grasif build --out {data}` first", file=sys.stderr)
            return 2
        run = build_eval(data, Path(args.runs) / f"eval_{args.episodes}", args.episodes)

    t0 = time.perf_counter()
    runs = load_runs([run], data)
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    html = render_page(runs)
    t_render = time.perf_counter() - t0
    t0 = time.perf_counter()
    page = write_view([run], Path(args.runs) / "view.html", data_dir=data)
    t_total = time.perf_counter() - t0
    episodes = sum(len(r.episodes) for r in runs)
    steps = sum(len(e.steps) for r in runs for e in r.episodes)
    print(f"run directory: {run}")
    print(f"episodes: {episodes}, step records: {steps}")
    print(f"page: {page} {page.stat().st_size / 1e6:.2f} MB ({len(html.encode()) / episodes / 1e3:.1f} kB per episode)")
    print(f"seconds: read {t_load:.2f} + replay and render {t_render:.2f}; write_view end to end {t_total:.2f}")
    if args.browser:
        print("headless Chromium:", json.dumps(browser_timing(page)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
