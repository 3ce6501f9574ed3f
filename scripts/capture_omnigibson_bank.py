#!/usr/bin/env python
"""Capture an OmniGibson image bank for GraSIF's BEHAVIOR tasks (format: sim_adapters/omnigibson.py).

Needs OmniGibson (Isaac Sim, an NVIDIA RTX GPU; https://behavior.stanford.edu/omnigibson/ :
``pip install omnigibson`` then ``python -m omnigibson.install`` for Isaac Sim and the
BEHAVIOR-1K assets). Without it the script says how to install it and exits with 2. Not run in
this project's tests (no OmniGibson here); its output is what ``--env omnigibson-bank@DIR`` and
``gam-eval --bank DIR`` read.

For each task: an ``og.Environment`` with a ``BehaviorTask`` (the activity and definition id
from the GraSIF task's provenance; the cached activity instance of ``--scene``, or online
sampling), every GraSIF node mapped to its OmniGibson object through
``env.task.object_scope[<bddl instance>]`` (the provenance's ``instances``). The true subgraph is
read from OmniGibson's object states (``Inside``/``OnTop`` to the smallest holder, ``Open``,
``ToggledOn``) and mapped back to GraSIF names. A ``VisionSensor`` looks at each asset from
``--distances`` x ``--views`` poses; the view that shows most pixels of the asset and its objects
(instance segmentation) is saved as PNG. Each entry is appended to ``manifest.jsonl`` as one
whole line after its image is in place, so an interrupted capture resumes where it stopped.

    python scripts/capture_omnigibson_bank.py --out banks/og --scene Rs_int dispose_of_a_pizza_box
    python scripts/capture_omnigibson_bank.py --out banks/og --all --online-sampling
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

INSTALL = ("OmniGibson is not installed. It needs Isaac Sim and an NVIDIA RTX GPU:\n"
           "  pip install omnigibson && python -m omnigibson.install\n"
           "(see https://behavior.stanford.edu/omnigibson/getting_started/installation.html), then rerun this script.")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tasks", nargs="*", help="GraSIF behavior task ids (= BEHAVIOR activity names)")
    p.add_argument("--all", action="store_true", help="every task of the behavior split")
    p.add_argument("--data-dir", help="GraSIF data directory (default: $LOOKPLANGRAPH_DATA or ~/.cache/lookplangraph/grasif)")
    p.add_argument("--out", required=True, metavar="BANKDIR", help="bank directory (created; resumed when it exists)")
    p.add_argument("--scene", default="Rs_int", help="OmniGibson scene model (default Rs_int)")
    p.add_argument("--instance", type=int, default=0, help="cached activity instance id (default 0)")
    p.add_argument("--online-sampling", action="store_true", help="sample the activity online instead of a cached instance")
    p.add_argument("--robot", default="Fetch", help="robot type standing in for the BDDL agent (default Fetch)")
    p.add_argument("--size", type=int, nargs=2, default=(512, 512), metavar=("W", "H"), help="image size (default 512 512)")
    p.add_argument("--distances", default="0.6,1.2", help="camera distances beyond the asset's half-diagonal, metres")
    p.add_argument("--views", type=int, default=4, help="camera azimuths around the asset per distance (default 4)")
    p.add_argument("--elevation", type=float, default=35.0, help="camera elevation, degrees (default 35)")
    return p.parse_args(argv)


def look_at(eye, target):
    """Quaternion (x, y, z, w) turning a USD camera (looks along -Z, +Y up) at ``target``."""
    f = [t - e for t, e in zip(target, eye)]
    n = math.sqrt(sum(v * v for v in f)) or 1.0
    z = [-v / n for v in f]
    x = [-z[1], z[0], 0.0] if abs(z[2]) < 0.999 else [1.0, 0.0, 0.0]  # cross(up=(0,0,1), z)
    nx = math.sqrt(sum(v * v for v in x))
    x = [v / nx for v in x]
    y = [z[1] * x[2] - z[2] * x[1], z[2] * x[0] - z[0] * x[2], z[0] * x[1] - z[1] * x[0]]
    m = [[x[0], y[0], z[0]], [x[1], y[1], z[1]], [x[2], y[2], z[2]]]
    tr = m[0][0] + m[1][1] + m[2][2]
    if tr > 0:
        s = math.sqrt(tr + 1.0) * 2
        return [(m[2][1] - m[1][2]) / s, (m[0][2] - m[2][0]) / s, (m[1][0] - m[0][1]) / s, 0.25 * s]
    i = max(range(3), key=lambda k: m[k][k])
    j, k = (i + 1) % 3, (i + 2) % 3
    s = math.sqrt(1.0 + m[i][i] - m[j][j] - m[k][k]) * 2
    q = [0.0, 0.0, 0.0, (m[k][j] - m[j][k]) / s]
    q[i], q[j], q[k] = 0.25 * s, (m[j][i] + m[i][j]) / s, (m[k][i] + m[i][k]) / s
    return q


def done_entries(out: Path) -> set[tuple[str, str]]:
    """(task, node) already in the manifest; a torn last line (an interrupted write) is dropped."""
    manifest = out / "manifest.jsonl"
    if not manifest.exists():
        return set()
    lines = manifest.read_text(encoding="utf-8").splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        tmp = manifest.with_suffix(".tmp")
        tmp.write_text("".join(lines[:-1]), encoding="utf-8")
        os.replace(tmp, manifest)
        lines = lines[:-1]
    return {(d["task"], d["node"]) for d in map(json.loads, filter(str.strip, lines))}


def capture_task(og, task, args, out: Path, done: set) -> int:
    import torch as th
    from omnigibson import object_states as S

    from sgs.graph import Layer
    from sim_adapters.omnigibson import write_png

    prov = task.provenance
    definition = int(Path(prov.get("file", "problem0.bddl")).stem.replace("problem", "") or 0)
    width, height = args.size
    cfg = {"scene": {"type": "InteractiveTraversableScene", "scene_model": args.scene},
           "robots": [{"type": args.robot, "obs_modalities": ["rgb"]}],
           "task": {"type": "BehaviorTask", "activity_name": prov["activity"], "activity_definition_id": definition,
                    "activity_instance_id": args.instance, "online_object_sampling": args.online_sampling},
           "env": {"external_sensors": [{"sensor_type": "VisionSensor", "name": "bank_camera",
                                         "relative_prim_path": "/bank_camera", "modalities": ["rgb", "seg_instance"],
                                         "sensor_kwargs": {"image_width": width, "image_height": height},
                                         "include_in_obs": False}]}}
    env = og.Environment(configs=cfg)
    camera = env.external_sensors["bank_camera"]
    graph, scope = task.graph, env.task.object_scope
    objs = {}  # GraSIF name -> OmniGibson object
    for name, inst in prov["instances"].items():
        entity = scope.get(inst)
        if name in graph.nodes and graph.nodes[name].layer is not Layer.PLACE and entity is not None \
                and entity.exists and not entity.is_system:
            objs[name] = entity.wrapped_obj
    volume = {n: float(th.prod(o.aabb_extent)) for n, o in objs.items()}
    parent = {}
    for name, obj in objs.items():
        if graph.nodes[name].layer is not Layer.OBJECT:
            continue
        holders = [(volume[h], rel, h) for h, other in objs.items() if h != name
                   for rel, state in (("inside", S.Inside), ("ontop", S.OnTop))
                   if state in obj.states and obj.states[state].get_value(other)]
        if holders:
            _, rel, holder = min(holders)
            parent[name] = (holder, rel)

    def states(obj):
        out = []
        if S.Open in obj.states:
            out.append("open" if obj.states[S.Open].get_value() else "closed")
        if S.ToggledOn in obj.states:
            out.append("on" if obj.states[S.ToggledOn].get_value() else "off")
        return out

    written = 0
    for asset in graph.names(Layer.ASSET):
        if (task.id, asset) in done or asset not in objs:
            continue
        seen, frontier = [], [asset]
        while frontier:  # parents before children
            holder = frontier.pop(0)
            for child in sorted(c for c, (h, _) in parent.items() if h == holder):
                seen.append({"name": child, "relation": parent[child][1], "parent": holder, "states": states(objs[child])})
                frontier.append(child)
        wanted = {objs[asset].name, *(objs[o["name"]].name for o in seen)}
        center = [float(v) for v in objs[asset].aabb_center]
        reach = 0.5 * float(th.linalg.norm(objs[asset].aabb_extent))
        best = None
        for dist in (float(d) for d in args.distances.split(",")):
            for k in range(args.views):
                a, e, r = 2 * math.pi * k / args.views, math.radians(args.elevation), reach + dist
                eye = [center[0] + r * math.cos(a) * math.cos(e), center[1] + r * math.sin(a) * math.cos(e),
                       center[2] + r * math.sin(e)]
                camera.set_position_orientation(position=th.tensor(eye, dtype=th.float32),
                                                orientation=th.tensor(look_at(eye, center), dtype=th.float32))
                for _ in range(3):
                    og.sim.render()
                obs = camera.get_obs()
                obs, info = obs if isinstance(obs, tuple) else (obs, {})
                seg, labels = obs.get("seg_instance"), info.get("seg_instance", {})
                ids = [int(i) for i, label in labels.items() if label in wanted]
                score = sum(int((seg == i).sum()) for i in ids) if seg is not None else 0
                if best is None or score > best[0]:
                    rgb = obs["rgb"][..., :3]
                    best = (score, (rgb.cpu().numpy() if hasattr(rgb, "cpu") else rgb).astype("uint8").tobytes(),
                            {"position": eye, "target": center, "distance": dist, "azimuth_deg": math.degrees(a),
                             "elevation_deg": args.elevation, "visible_pixels": score})
        rel = Path(task.id) / f"{asset}.png"
        (out / task.id).mkdir(parents=True, exist_ok=True)
        tmp = out / rel.with_suffix(".tmp.png")
        write_png(tmp, width, height, best[1])
        os.replace(tmp, out / rel)
        line = {"task": task.id, "node": asset, "image": rel.as_posix(), "objects": seen,
                "source": {"synthetic": False, "simulator": "omnigibson", "omnigibson": getattr(og, "__version__", None),
                           "scene": args.scene, "activity": prov["activity"], "definition": definition,
                           "instance": None if args.online_sampling else args.instance, "camera": best[2],
                           "bddl_instance": prov["instances"].get(asset)}}
        with open(out / "manifest.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())
        written += 1
    env.close() if hasattr(env, "close") else None
    (og.clear if hasattr(og, "clear") else og.sim.clear)()
    return written


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import omnigibson as og
        from omnigibson.macros import gm
    except ImportError:
        print(INSTALL, file=sys.stderr)
        return 2
    from grasif import dataset

    root = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    tasks = {t.id: t for t in dataset.load_split(root, "behavior")}
    wanted = list(tasks) if args.all else args.tasks
    unknown = [t for t in wanted if t not in tasks]
    if not wanted or unknown:
        print(f"give task ids of the behavior split or --all (unknown: {', '.join(unknown) or '-'})", file=sys.stderr)
        return 2
    with (gm.unlocked() if hasattr(gm, "unlocked") else contextlib.nullcontext()):
        gm.ENABLE_OBJECT_STATES = True
        gm.HEADLESS = True
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    done = done_entries(out)
    for task_id in wanted:
        n = capture_task(og, tasks[task_id], args, out, done)
        print(f"{task_id}: {n} picture(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
