"""The graph augmentation module (vlm/): describer, parser, binding to an Observation, the Table III
metric, the description writer and the GraSIF evaluation.

No language model runs here. The describer talks to a fake OpenAI-style server on 127.0.0.1 (a
test double answering recorded text); parser replies come from ScriptedBackend (fixed texts
written for these tests, not an LM)."""

from __future__ import annotations

import base64
import json
import shutil

import pytest

from lookplangraph.lm import ScriptedBackend
from lookplangraph.cli import main
from sim_adapters.base import Observation, SeenObject
from tests.conftest import EXAMPLES
from tests.test_backends import HAVE_OPENAI, FakeServer, backend, completion
from tests.test_complete import tiny_png
from vlm.binding import canonical, to_observation
from vlm.descriptions import write_description
from vlm.gam import GraphAugmentation, parser_schema
from vlm.metrics import align, score, summarize


def obs(node, *rows):
    """An observation from (name, relation, parent[, states]) rows."""
    return Observation(node, tuple(SeenObject(r[0], r[1], r[2], tuple(r[3]) if len(r) > 3 else ()) for r in rows))


def entry(name, relation, related_to, states=()):
    return {"name": name, "relation": relation, "related_to": related_to, "states": list(states)}


def reply(*entries):
    return json.dumps({"objects": list(entries)})


# ------------------------------------------------------------------------------------------
# describer (fake OpenAI-compatible server, a test double)
# ------------------------------------------------------------------------------------------

DESCRIPTION = "On the shelf there is a bowl with two apples inside it, and a closed box. No cup is visible."


@pytest.mark.skipif(not HAVE_OPENAI, reason="the openai package is not installed")
def test_vlm_mode_describer_request_and_parser(tmp_path):
    image = tmp_path / "shelf-1.png"
    image.write_bytes(tiny_png())
    parser = ScriptedBackend([reply(entry("bowl-1", "ontop", "shelf-1"), entry("apple", "inside", "bowl-1"),
                                    entry("apple", "inside", "bowl-1"), entry("box", "ontop", "shelf-1", ["closed"]))])
    with FakeServer([(200, completion(DESCRIPTION), 0)]) as srv:
        describer = backend(srv.url, structured="json_schema")
        gam = GraphAugmentation("vlm", describer=describer, parser=parser)
        aug = gam.augment("shelf-1", image=image, names=["bowl-1", "apple-1", "cup-1"],
                          priors=[SeenObject("apple-1", "inside", "bowl-1")])
    body = srv.requests[0][1]
    assert "response_format" not in body  # free text: no schema
    [user] = body["messages"]
    text, picture = user["content"]
    assert "shelf-1" in text["text"] and "bowl-1, apple-1, cup-1" in text["text"]
    assert "apple-1 (inside bowl-1)" in text["text"]
    url = picture["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == image.read_bytes()  # whole image, right size
    # the parser saw the description, not the image
    parser_messages = parser.requests[0]["messages"]
    assert DESCRIPTION in parser_messages[1]["content"]
    assert all(isinstance(m["content"], str) for m in parser_messages)
    assert parser.requests[0]["schema"] == parser_schema()
    got = [(o.name, o.relation, o.parent, o.states) for o in aug.observation.objects]
    # the first apple confirms the prior apple-1, the second is new; the box is new
    assert got == [("bowl-1", "ontop", "shelf-1", ()), ("box-1", "ontop", "shelf-1", ("closed",)),
                   ("apple-1", "inside", "bowl-1", ()), ("apple-2", "inside", "bowl-1", ())]
    assert aug.observation.image == str(image)
    assert aug.description == DESCRIPTION and set(aug.stages) == {"describer", "parser"}
    assert aug.usage.prompt_tokens == 100 + aug.stages["parser"].prompt_tokens


def test_vlm_mode_needs_an_image_and_a_describer():
    with pytest.raises(ValueError, match="describer"):
        GraphAugmentation("vlm", parser=ScriptedBackend(["{}"]))
    gam = GraphAugmentation("vlm", describer=ScriptedBackend(["text"]))
    with pytest.raises(ValueError, match="needs an image"):
        gam.augment("shelf-1")
    with pytest.raises(ValueError, match="mode must be one of"):
        GraphAugmentation("magic")


def test_ground_truth_mode_passes_the_environment_observation_through():
    truth = obs("table-1", ("cup-1", "ontop", "table-1"))
    aug = GraphAugmentation("ground_truth").augment("table-1", truth=truth)
    assert aug.observation is truth and aug.notes == [] and aug.usage.prompt_tokens == 0


# ------------------------------------------------------------------------------------------
# parser + binding (scripted replies)
# ------------------------------------------------------------------------------------------

def parse(*replies, names=(), priors=(), node="table-1", description="text"):
    lm = ScriptedBackend(list(replies), name="scripted:parser")
    aug = GraphAugmentation("parser", parser=lm).augment(node, description=description, names=names, priors=priors)
    return aug, lm


def rows(observation):
    return [(o.name, o.relation, o.parent, o.states) for o in observation.objects]


def test_reused_names_confirm_priors_and_nesting_comes_parents_first():
    aug, lm = parse(reply(entry("apple-2", "inside", "bowl-1"), entry("bowl-1", "ontop", "table-1"),
                          entry("Bowl 1", "ontop", "table-1")),
                    names=["bowl-1", "apple-1", "apple-2"])
    assert rows(aug.observation) == [("bowl-1", "ontop", "table-1", ()), ("apple-2", "inside", "bowl-1", ())]
    assert aug.notes == ["'Bowl 1': listed twice, the repeat dropped"]
    user = lm.requests[0]["messages"][1]["content"]
    assert "Furniture: table-1." in user and "bowl-1, apple-1, apple-2" in user and '"text"' in user


def test_malformed_entries_and_unknown_parents_are_dropped_with_notes():
    entries = [
        entry("cup-1", "ontop", "table-1"),
        "a loose string",
        {"relation": "ontop", "related_to": "table-1"},  # no name
        entry("spoon", "beside", "table-1"),  # not a relation
        entry("fork", "ontop", None),
        entry("plate", "ontop", "counter-1"),  # not observed here
        entry("pear", "ontop", "plate"),  # under a dropped entry
        entry("table-1", "ontop", "table-1"),  # the node itself
        entry("knife", "inside", "knife"),  # itself
        entry("lamp-1", "ontop", "table-1", ["turned_on", "shiny"]),
    ]
    aug, _ = parse(json.dumps(entries), names=["cup-1", "lamp-1", "plate-4"])
    assert rows(aug.observation) == [("cup-1", "ontop", "table-1", ()), ("lamp-1", "ontop", "table-1", ("on",))]
    notes = "\n".join(aug.notes)
    for expected in ["not an object ('a loose string')", "entry 3: no name", "relation 'beside' is not ontop or inside",
                     "'fork': no related_to", "related_to 'counter-1' is neither table-1 nor an object",
                     "pear-1: its parent plate-5 was dropped", "'table-1': the observed node itself", "knife-1: related to itself",
                     "state 'shiny' is not one of open, closed, on, off"]:
        assert expected in notes
    assert "the parser's reply does not fit the schema" in notes  # a list at the root, strings as entries


def test_new_names_follow_the_memory_and_never_collide():
    aug, _ = parse(reply(entry("Bottle of lotion", "ontop", "the table"), entry("cup-7", "ontop", "table-1"),
                         entry("wine glass 2", "inside", "cup-7")),
                   names=["bottle__of__lotion-1", "cup-2", "wine_glass-2"])
    assert rows(aug.observation) == [("bottle__of__lotion-2", "ontop", "table-1", ()), ("cup-3", "ontop", "table-1", ()),
                                     ("wine_glass-2", "inside", "cup-3", ())]


def test_a_cycle_hangs_from_nothing_and_is_dropped():
    aug, _ = parse(reply(entry("box-1", "inside", "bag-1"), entry("bag-1", "inside", "box-1"), entry("cup-1", "ontop", "table-1")))
    assert rows(aug.observation) == [("cup-1", "ontop", "table-1", ())]
    assert sum("forms a cycle" in n for n in aug.notes) == 2


def test_unreadable_and_cut_replies_never_raise():
    aug, _ = parse("I am sorry, I cannot see the image.")
    assert aug.observation.objects == () and "does not fit the schema" in aug.notes[0]
    aug, _ = parse('{"objects": [{"name": "cup-1", "relation": "ontop", "related_to": "table-1", "states": []}, {"name": "sau')
    assert rows(aug.observation) == [("cup-1", "ontop", "table-1", ())]
    aug, _ = parse('[{"name": "cup", "relation": "on top of", "related_to": "table-1", "states": "closed, switched_off"}]')
    assert rows(aug.observation) == [("cup-1", "ontop", "table-1", ("closed", "off"))]


def test_canonical_names():
    assert canonical("The Apple 1") == "apple-1"
    assert canonical("dish_bowl1") == "dish_bowl-1"
    assert canonical("wine  glass") == "wine_glass"
    assert canonical("bottle__of__lotion-3") == "bottle_of_lotion-3"


def test_binding_accepts_objects_wrapper_and_plain_lists():
    o1, _ = to_observation("t-1", {"objects": [entry("a-1", "ontop", "t-1")]})
    o2, _ = to_observation("t-1", [entry("a-1", "ontop", "t-1")])
    o3, notes = to_observation("t-1", "nonsense")
    assert o1 == o2 and o3.objects == () and "not a list" in notes[0]


# ------------------------------------------------------------------------------------------
# metric (Table III)
# ------------------------------------------------------------------------------------------

TRUTH = obs("table-1", ("bowl-1", "ontop", "table-1"), ("apple-1", "inside", "bowl-1"),
            ("apple-2", "inside", "bowl-1"), ("box-1", "ontop", "table-1", ("closed",)))


def test_metric_perfect_and_renamed_instances():
    assert score(TRUTH, TRUTH).success and score(TRUTH, TRUTH).state_accuracy == 1.0
    renamed = obs("table-1", ("bowl-7", "ontop", "table-1"), ("apple-9", "inside", "bowl-7"),
                  ("apple-4", "inside", "bowl-7"), ("box-3", "ontop", "table-1", ("closed",)))
    s = score(renamed, TRUTH)
    assert (s.node_f1, s.edge_f1, s.success) == (1.0, 1.0, True)
    assert align(renamed, TRUTH) == {"bowl-7": "bowl-1", "apple-9": "apple-1", "apple-4": "apple-2", "box-3": "box-1"}


def test_metric_missing_extra_and_wrong_relation():
    missing = obs("table-1", ("bowl-1", "ontop", "table-1"), ("apple-1", "inside", "bowl-1"),
                  ("box-1", "ontop", "table-1", ("closed",)))
    s = score(missing, TRUTH)
    assert s.node_f1 == pytest.approx(6 / 7) and s.edge_f1 == pytest.approx(6 / 7) and not s.success
    extra = obs("table-1", *[(o.name, o.relation, o.parent, o.states) for o in TRUTH.objects], ("cup-1", "ontop", "table-1"))
    s = score(extra, TRUTH)
    assert s.node_f1 == pytest.approx(8 / 9) and s.edge_f1 == pytest.approx(8 / 9)
    wrong = obs("table-1", ("bowl-1", "ontop", "table-1"), ("apple-1", "ontop", "bowl-1"),
                ("apple-2", "inside", "bowl-1"), ("box-1", "ontop", "table-1", ("closed",)))
    s = score(wrong, TRUTH)
    assert s.node_f1 == 1.0 and s.edge_f1 == pytest.approx(6 / 8) and not s.success
    # a wrong parent of the parent: the apples' edges are right only under the bowl
    flat = obs("table-1", ("bowl-1", "ontop", "table-1"), ("apple-1", "ontop", "table-1"),
               ("apple-2", "ontop", "table-1"), ("box-1", "ontop", "table-1", ("closed",)))
    assert score(flat, TRUTH).edge_f1 == pytest.approx(4 / 8)


def test_metric_states_apart_and_empty_cases():
    open_box = obs("table-1", ("bowl-1", "ontop", "table-1"), ("apple-1", "inside", "bowl-1"),
                   ("apple-2", "inside", "bowl-1"), ("box-1", "ontop", "table-1", ("open",)))
    s = score(open_box, TRUTH)
    assert s.success and s.state_accuracy == 0.0 and s.states_judged == 1
    dirty = obs("t-1", ("cup-1", "ontop", "t-1", ("dirty",)))
    assert score(obs("t-1", ("cup-1", "ontop", "t-1")), dirty).state_accuracy is None  # not in the vocabulary
    assert score(obs("t-1"), obs("t-1")).success
    nothing = score(obs("t-1"), TRUTH)
    assert nothing.node_f1 == 0.0 and nothing.edge_f1 == 0.0


def test_metric_two_parents_of_one_class_are_told_apart():
    truth = obs("shelf-1", ("bowl-1", "ontop", "shelf-1"), ("bowl-2", "ontop", "shelf-1"),
                ("apple-1", "inside", "bowl-1"), ("pear-1", "inside", "bowl-2"))
    swapped = obs("shelf-1", ("bowl-5", "ontop", "shelf-1"), ("bowl-6", "ontop", "shelf-1"),
                  ("apple-3", "inside", "bowl-6"), ("pear-3", "inside", "bowl-5"))
    assert score(swapped, truth).success  # bowl-6 holds the apple, so it is bowl-1


def test_summarize_mean_and_micro():
    small = score(obs("t-1", ("cup-1", "ontop", "t-1")), obs("t-1", ("cup-1", "ontop", "t-1")))
    big = score(obs("t-1", ("cup-1", "ontop", "t-1")), obs("t-1", *[(f"cup-{i}", "ontop", "t-1") for i in range(1, 4)]))
    s = summarize([small, big])
    assert s["n"] == 2 and s["success"] == 0.5
    assert s["node_f1"] == pytest.approx((1 + 0.5) / 2)
    assert s["node_f1_micro"] == pytest.approx(2 * 2 / (2 + 4))


# ------------------------------------------------------------------------------------------
# description writer (deterministic, not a model)
# ------------------------------------------------------------------------------------------

def test_description_writer_is_deterministic_and_varied():
    texts = [write_description(TRUTH, seed, distractors=["cup", "bowl"], node_states=["open"]) for seed in range(12)]
    assert texts == [write_description(TRUTH, seed, distractors=["cup", "bowl"], node_states=["open"]) for seed in range(12)]
    assert len(set(texts)) > 6
    for text in texts:
        assert "bowl" in text and "apple" in text and ("box" in text) and "closed" in text
        assert "no bowl" not in text.lower()  # a distractor is never something that is there
    assert any("cup" in t for t in texts) and any("apple-1" in t for t in texts) and any("two apples" in t for t in texts)


def test_description_writer_names_the_holder_among_several():
    truth = obs("shelf-1", ("bowl-1", "ontop", "shelf-1"), ("bowl-2", "ontop", "shelf-1"), ("apple-1", "inside", "bowl-2"))
    for seed in range(8):
        text = write_description(truth, seed)
        assert "bowl-2" in text  # "inside the bowl" would not say which


# ------------------------------------------------------------------------------------------
# evaluation over a GraSIF-style data directory, and the command
# ------------------------------------------------------------------------------------------

@pytest.fixture
def data_dir(tmp_path):
    root = tmp_path / "grasif"
    (root / "behavior").mkdir(parents=True)
    shutil.copy(EXAMPLES / "gift_basket" / "task.json", root / "behavior" / "assembling_gift_baskets.json")
    (root / "index.json").write_text(json.dumps({"format": 2, "splits": {"behavior": {"assembling_gift_baskets": "x"}},
                                                  "assembled": "tests/test_vlm.py"}))
    return root


def test_evaluate_with_scripted_parser_and_resume(data_dir, tmp_path):
    from lookplangraph.evaluation.gam_eval import evaluate, sample_cases, table

    cases = sample_cases(data_dir, ["behavior"], 5, seed=0)
    assert len(cases) == 3  # the assets with objects on them
    assert cases == sample_cases(data_dir, ["behavior"], 5, seed=0)
    perfect = [reply(*[entry(o.name, o.relation, o.parent, o.states) for o in c.truth.objects]) for c in cases]
    out = tmp_path / "out"
    summary = evaluate(cases[:1], GraphAugmentation("parser", parser=ScriptedBackend(perfect[:1])), out)
    assert summary["behavior"]["n"] == 1 and summary["behavior"]["success"] == 1.0
    lm = ScriptedBackend(perfect[1:])
    summary = evaluate(cases, GraphAugmentation("parser", parser=lm), out)  # resumes: two new calls
    assert lm.calls == 2 and summary["behavior"]["n"] == 3 and summary["behavior"]["node_f1"] == 1.0
    assert "behavior" in table(summary) and (out / "summary.csv").read_text().startswith("split,n,node_f1")
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["description"] == cases[0].description


def test_gam_eval_command_ground_truth(data_dir, tmp_path, capsys):
    out = tmp_path / "gt"
    code = main(["gam-eval", "--mode", "ground_truth", "--n", "4", "--splits", "behavior", "--data-dir", str(data_dir),
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0 and "behavior" in printed and "1.000" in printed
    assert json.loads((out / "summary.json").read_text())["behavior"]["success"] == 1.0
    code = main(["gam-eval", "--mode", "ground_truth", "--n", "4", "--seed", "3", "--splits", "behavior",
                 "--data-dir", str(data_dir), "--out", str(out)])
    assert code == 2 and "other settings" in capsys.readouterr().err


def test_parser_schema_compiles_to_a_llama_cpp_grammar():
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed")
    assert llama_cpp.LlamaGrammar.from_json_schema(json.dumps(parser_schema()), verbose=False) is not None


def test_binding_never_raises_on_arbitrary_json():
    from hypothesis import given, settings, strategies as st

    scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=12)
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                          max_leaves=12)
    words = st.sampled_from(["cup-1", "cup", "table-1", "bowl-2", "Bowl 2", "", "ontop", "inside", "on top of", "x"])
    entries = st.lists(st.fixed_dictionaries({"name": words | values, "relation": words | values,
                                              "related_to": words | values, "states": values}), max_size=6)

    @settings(max_examples=300, deadline=None)
    @given(entries | values)
    def check(value):
        observation, notes = to_observation("table-1", value, names=["cup-1", "bowl-2"], priors=["cup-1"])
        placed = {"table-1"}
        for o in observation.objects:  # parents before children, each name once, no self edges
            assert o.parent in placed and o.name not in placed and o.relation in ("ontop", "inside")
            placed.add(o.name)

    check()


def test_an_empty_reply_cache_is_still_the_parser(tmp_path):
    # CachedBackend has __len__ (0 when empty): the augmentation must not read it as "no backend"
    from lookplangraph.lm import ScriptedBackend
    from lookplangraph.lm.cache import CachedBackend
    from vlm.gam import GraphAugmentation

    cached = CachedBackend(ScriptedBackend(['{"objects": []}']), tmp_path / "cache.jsonl")  # SCRIPTED
    assert len(cached) == 0
    gam = GraphAugmentation("parser", parser=cached)
    assert gam.parser is not None and gam.parser.lm is cached
