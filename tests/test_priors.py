"""Object priors (grasif.priors): counted over the train pool only, rebuilt exactly by the command
that ships them, smoothed, and asked from the command line."""

from __future__ import annotations

import json

import pytest

from grasif import dataset, heldout, priors
from grasif.priors import Priors, PriorsError, head_noun, normalise
from lookplangraph.cli import main


@pytest.mark.parametrize("name, cls", [
    ("apple-1", "apple"), ("Apple", "apple"), ("apple.n.01_2", "apple"), ("water_glass1", "water_glass"),
    ("wicker baskets", "wicker_basket"), ("dishes", "dish"), ("berries", "berry"), ("glasses", "glasses"),
    ("kitchen_cabinet-2", "cabinet"), ("clothes_shirt", "shirt"), ("T-shirt", "shirt"), ("refrigerator-1", "fridge"),
])
def test_class_names_are_normalised(name, cls):
    assert normalise(name) == cls


def test_head_noun_is_the_last_word():
    assert head_noun("water_bottle") == "bottle" and head_noun("mug") == "mug"


def test_the_shipped_priors_come_from_the_train_pool_only():
    shipped, manifest = priors.shipped(), heldout.load_manifest()
    assert shipped.sources == manifest["train"]  # every pool task, with its task file's SHA-256, and nothing else
    assert not set(shipped.sources) & set(manifest["eval"])
    assert not set(shipped.sources) & {s["task"] for s in manifest["excluded_siblings"]}
    assert not any(k.startswith("office/") for k in shipped.sources)


def test_a_rebuild_from_a_fresh_build_is_the_shipped_file(grasif_build):
    assert priors.build(grasif_build).to_dict() == json.loads(priors.PRIORS_FILE.read_text())


def test_no_class_seen_only_in_held_out_tasks_has_counts(grasif_build):
    """Recomputed from the task files: a class whose every placement is in an evaluation task, a
    sibling or the office contributes nothing."""
    manifest = heldout.load_manifest()
    classes: dict[str, set[str]] = {"train": set(), "other": set()}
    for split in (*heldout.POOL_SPLITS, *heldout.EVAL_SPLITS):
        for task in dataset.load_split(grasif_build, split):
            side = "train" if f"{split}/{task.id}" in manifest["train"] else "other"
            classes[side] |= {normalise(o) for o, _, _ in priors.placements(task.graph)}
    only_held_out = classes["other"] - classes["train"]
    assert only_held_out  # the office alone has such classes, so the check has something to check
    assert not only_held_out & set(priors.shipped().counts)


def test_a_build_that_is_not_the_manifests_is_refused(grasif_build, tmp_path):
    manifest = heldout.load_manifest()
    changed = json.loads(json.dumps(manifest))
    key = sorted(changed["train"])[0]
    changed["train"][key] = "0" * 64
    with pytest.raises(heldout.LeakError, match="not the task file the manifest pins"):
        priors.build(grasif_build, changed)


def test_smoothing_gives_every_holder_some_probability_and_keeps_counted_ones_first():
    p = Priors(counts={"apple": {"fridge|inside": 8, "table|ontop": 2}, "book": {"shelf|ontop": 5}},
               marginal={"fridge|inside": 8, "table|ontop": 2, "shelf|ontop": 5}, sources={})
    ranked = p.holders("apple-3", top=None)
    assert [(r.holder, r.relation) for r in ranked[:2]] == [("fridge", "inside"), ("table", "ontop")]
    assert ranked[0].count == 8 and 0 < p.probability("apple", "bathtub", "inside") < p.probability("apple", "shelf", "ontop")
    assert sum(r.probability for r in ranked) <= 1.0
    assert p.probability("apple", "dining_table", "ontop") == p.probability("apple", "table", "ontop")  # head noun
    assert p.resolve("green_apple") == "apple" and p.resolve("pear") is None
    with pytest.raises(PriorsError, match="no train-pool scene has an object of class 'pear'"):
        p.holders("pear")


def test_the_command_prints_top_holders(capsys):
    assert main(["grasif", "priors", "--object", "apple", "--top", "3"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()[2:]]
    best = priors.shipped().holders("apple", 3)
    assert [(r[0], r[1]) for r in rows] == [(b.holder, b.relation) for b in best] and len(rows) == 3
    assert main(["grasif", "priors", "--object", "apple", "--top", "2", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["class"] == "apple" and [h["holder"] for h in shown["holders"]] == [b.holder for b in best[:2]]


@pytest.mark.parametrize("argv, message", [
    (["--object", "xyzzy"], "no train-pool scene has an object of class 'xyzzy'"),
    (["--object", "apple", "--top", "0"], "--top must be at least 1"),
    (["--object", "apple", "--file", "/nonexistent/priors.json"], "cannot read priors"),
    ([], "give --object CLASS, --list or --rebuild"),
])
def test_bad_input_exits_2_with_a_clear_error(capsys, argv, message):
    assert main(["grasif", "priors", *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_command_rebuilds_the_file(grasif_build, tmp_path, capsys):
    out = tmp_path / "priors.json"
    assert main(["grasif", "priors", "--rebuild", "--data-dir", str(grasif_build), "--file", str(out)]) == 0
    assert json.loads(out.read_text()) == json.loads(priors.PRIORS_FILE.read_text())
    assert not list(tmp_path.glob("*.part"))
