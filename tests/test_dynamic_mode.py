"""Dynamic mode as the paper runs it (sim_adapters.dynamic): a seeded half of the tasks, objects
moved to holders drawn from the object prior, near their room with a stated probability; the
older mode kept by name; bad names refused."""

from __future__ import annotations

from collections import Counter

import pytest

from grasif import dataset
from grasif.goals import GoalSpec, NodeGoal
from grasif.priors import Priors
from grasif.task import Task
from lookplangraph.cli import main
from lookplangraph.evaluation.runner import make_env
from sgs.graph import Layer
from sgs.io import graph_to_dict
from sim_adapters.dynamic import DYNAMIC_MODES, dynamic_mode, is_perturbed, perturb, relevant_objects
from sim_adapters.graph_env import GraphEnvironment
from sim_adapters.wrappers import DynamicPerturbation

from conftest import kitchen_dict


def kitchen_task(task_id: str = "k") -> Task:
    goal = GoalSpec(node_goals=[NodeGoal(node="apple-2", relation="ontop", destination="bed-1")])
    return Task(id=task_id, split="examples", instruction="Put the apple on the bed.", initial_graph=kitchen_dict(),
                goal=goal)


@pytest.fixture(scope="module")
def tasks(grasif_build):
    return [t for s in ("virtualhome", "behavior", "office") for t in dataset.load_split(grasif_build, s)]


def test_a_seeded_half_of_the_tasks_is_perturbed_the_same_for_everyone(tasks):
    movable = [t for t in tasks if relevant_objects(t.graph, t.goal)]
    for seed in (0, 1):
        chosen = [t for t in movable if perturb(t.graph, t.goal, seed, "paper", f"{t.split}/{t.id}")[1]]
        assert 0.4 < len(chosen) / len(movable) < 0.6
        assert all(is_perturbed(f"{t.split}/{t.id}", seed, 0.5) for t in chosen)
    # the choice is the task's own: the same draw alone, in another order, or through the environment
    task = movable[7]
    alone = perturb(task.graph, task.goal, 0, "paper", f"{task.split}/{task.id}")
    env = make_env(task, 0)
    env.reset()
    assert env.moves == alone[1] and graph_to_dict(env.true_graph()) == graph_to_dict(alone[0])
    s0 = {t.id for t in movable if is_perturbed(f"{t.split}/{t.id}", 0, 0.5)}
    s1 = {t.id for t in movable if is_perturbed(f"{t.split}/{t.id}", 1, 0.5)}
    assert s0 != s1  # another seed, another half


def test_moved_objects_go_to_assets_near_them_about_as_often_as_stated(tasks):
    near = far = 0
    for t in tasks:
        for seed in range(4):
            g, notes = perturb(t.graph, t.goal, seed, "paper", f"{t.split}/{t.id}")
            for note in notes:
                obj, holder = note.split(":")[0], note.split()[-1]
                assert g.nodes[holder].layer is Layer.ASSET and g.parent[obj][0] == holder
                if len(t.graph.places) > 1:
                    if t.graph.place_of(obj) == g.place_of(holder):
                        near += 1
                    else:
                        far += 1
    same_room = DYNAMIC_MODES["paper"].same_room
    assert near + far > 100 and abs(near / (near + far) - same_room) < 0.12


def test_holders_are_drawn_in_proportion_to_the_prior():
    """A prior that keeps apples in fridges: most draws put the apple in the fridge."""
    task = kitchen_task()
    prior = Priors(counts={"apple": {"fridge|inside": 50}}, marginal={"fridge|inside": 50, "bed|ontop": 50}, sources={})
    where = Counter()
    for seed in range(200):
        key = f"examples/k{seed}"
        if not is_perturbed(key, seed, 0.5):
            continue
        g, notes = perturb(task.graph, task.goal, seed, "paper", key, priors=prior)
        where[g.parent["apple-2"][0]] += 1
    assert sum(where.values()) > 60
    assert where["fridge-1"] / sum(where.values()) > 0.75
    assert "bed-1" not in where  # the goal's destination is never drawn


def test_the_older_mode_is_kept_by_name():
    task = kitchen_task()
    g, notes = perturb(task.graph, task.goal, 3, "anywhere")
    assert notes and perturb(task.graph, task.goal, 3, "anywhere") == (g, notes)
    env = DynamicPerturbation(GraphEnvironment(task.graph), task.goal, 3, mode="anywhere")
    env.reset()
    assert env.moves == notes


def test_bad_mode_names_and_a_missing_key_are_refused():
    task = kitchen_task()
    with pytest.raises(ValueError, match="unknown dynamic mode 'nowhere': the modes are paper"):
        dynamic_mode("nowhere")
    with pytest.raises(ValueError, match="pass key='split/id'"):
        perturb(task.graph, task.goal, 0, "paper")
    with pytest.raises(ValueError, match="pass key='split/id'"):
        DynamicPerturbation(GraphEnvironment(task.graph), task.goal, 0)


def test_the_command_line_refuses_an_unknown_mode_with_exit_2(capsys, tmp_path):
    assert main(["run", "--split", "office", "--task", "office-01", "--lm", "expert", "--dynamic",
                 "--dynamic-mode", "nowhere", "--out", str(tmp_path / "r")]) == 2
    assert "invalid choice: 'nowhere'" in capsys.readouterr().err
    config = tmp_path / "c.toml"
    config.write_text('dynamic = true\ndynamic_mode = "nowhere"\n')
    assert main(["run", "--config", str(config), "--split", "office", "--task", "office-01", "--lm", "expert",
                 "--out", str(tmp_path / "r2")]) == 2
    assert "nowhere" in capsys.readouterr().err
