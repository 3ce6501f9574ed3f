"""A small SYNTHETIC image bank for tests of :mod:`sim_adapters.omnigibson`.

These pictures are GENERATED here (flat colored boxes: the asset as a wide bar, each object a box
on or in its holder), NOT OmniGibson captures; every manifest line says so
(``"source": {"synthetic": true, ...}``). They exercise the bank format, the environment and
the VLM augmentation path without OmniGibson. A real bank comes from
``scripts/capture_omnigibson_bank.py`` on a machine with OmniGibson.

The subgraphs (``objects``) are the tasks' true ones (:meth:`GraphEnvironment.observe` on each
asset of the initial graph), one entry per asset that has objects on or inside it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterable

from grasif.task import Task, save_task
from sgs.graph import Layer, node_class
from sim_adapters.base import Observation
from sim_adapters.graph_env import GraphEnvironment
from sim_adapters.omnigibson import MANIFEST, write_png
from vlm.descriptions import write_description

#: BEHAVIOR tasks used by the tests: a closed fridge holding a box holding a pizza; a closed
#: backpack with money in it and an empty checkout; a closed cabinet with two carboys.
TASKS = ("dispose_of_a_pizza_box", "buy_basic_garden_tools", "recycling_glass_bottles")
WIDTH, HEIGHT = 96, 64


def _color(name: str) -> tuple[int, int, int]:
    digest = hashlib.sha256(node_class(name).encode()).digest()
    return 60 + digest[0] % 180, 60 + digest[1] % 180, 60 + digest[2] % 180


def picture(obs: Observation) -> bytes:
    """RGB pixels of a generated picture of ``obs`` (not a rendering of anything real)."""
    px = bytearray(bytes((235, 235, 240)) * (WIDTH * HEIGHT))

    def box(x0, y0, x1, y1, rgb):
        for y in range(max(0, y0), min(HEIGHT, y1)):
            for x in range(max(0, x0), min(WIDTH, x1)):
                px[(y * WIDTH + x) * 3:(y * WIDTH + x) * 3 + 3] = bytes(rgb)

    box(4, HEIGHT - 20, WIDTH - 4, HEIGHT - 4, _color(obs.node))  # the asset
    children: dict[str, list] = {}
    for o in obs.objects:
        children.setdefault(o.parent, []).append(o)

    def place(holder: str, x0: int, x1: int, base: int, size: int) -> None:
        items = children.get(holder, [])
        for k, o in enumerate(items):
            width = max(4, (x1 - x0) // max(1, len(items)) - 2)
            left = x0 + k * (width + 2)
            top = base - size if o.relation == "ontop" else base + 2
            box(left, top, left + width, top + size, _color(o.name))
            place(o.name, left + 1, left + width - 1, top, max(3, size // 2))

    place(obs.node, 6, WIDTH - 6, HEIGHT - 20, 14)
    return bytes(px)


def write_data_dir(root: Path, tasks: Iterable[Task]) -> Path:
    """A minimal GraSIF data directory (``index.json`` and one file per task) holding ``tasks``."""
    root.mkdir(parents=True, exist_ok=True)
    index = {"format": 2, "splits": {}, "assembled": "tests/synthetic_bank.py"}  # not built: never rebuilt
    for task in tasks:
        (root / task.split).mkdir(parents=True, exist_ok=True)
        save_task(task, root / task.split / f"{task.id}.json")
        index["splits"].setdefault(task.split, {})[task.id] = "synthetic-test"
    (root / "index.json").write_text(json.dumps(index, indent=1))
    return root


def build_bank(out: Path, tasks: Iterable[Task], descriptions: bool = True) -> Path:
    """Write a SYNTHETIC bank for ``tasks`` into ``out`` (module doc); returns ``out``. With
    ``descriptions`` every entry also gets a deterministic text of its subgraph."""
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for task in tasks:
        env = GraphEnvironment(task.graph)
        for asset in task.graph.names(Layer.ASSET):
            obs = env.observe(asset)
            if not obs.objects:
                continue
            rel = Path(task.id) / f"{asset}.png"
            (out / task.id).mkdir(exist_ok=True)
            write_png(out / rel, WIDTH, HEIGHT, picture(obs))
            line = {"task": task.id, "node": asset, "image": rel.as_posix(),
                    "objects": [{"name": o.name, "relation": o.relation, "parent": o.parent, "states": list(o.states)}
                                for o in obs.objects],
                    "source": {"synthetic": True, "generator": "tests/synthetic_bank.py",
                               "note": "generated boxes, not an OmniGibson capture"}}
            if descriptions:
                line["description"] = write_description(obs, f"synthetic|{task.id}|{asset}")
            lines.append(json.dumps(line))
    (out / MANIFEST).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
