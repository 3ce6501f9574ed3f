"""``distill mix``: one training set from planning data, DAgger rounds and Cypher data
(lookplangraph.distill.training.mix). The sources here are small hand-written data directories."""

from __future__ import annotations

import json

import pytest

from lookplangraph.cli import main
from lookplangraph.distill.training.mix import MixError, Take, mix


def example(system: str, user: str, answer: str, meta: dict) -> dict:
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user},
                         {"role": "assistant", "content": answer}], "meta": meta}


def source(path, rows, counts):
    path.mkdir(parents=True)
    (path / "sft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "counts.json").write_text(json.dumps(counts))
    return path


@pytest.fixture
def sources(tmp_path):
    fmt = {"prompt_layout": "history-scene", "answer_format": "action"}
    data = source(tmp_path / "distill_v3", [example("FULL", f"task {i}", f"go_to(room-{i})",
                                                     {"split": "generated-office", "step": i}) for i in range(20)],
                  {**fmt, "expert": "expert (privileged), view-limited search"})
    dagger = source(tmp_path / "dagger", [example("FULL", f"state {i}", "done()",
                                                  {"source": "dagger", "expert": "expert (privileged), view-limited search"})
                                          for i in range(3)], fmt)
    cypher = source(tmp_path / "cypher", [example("CYPHER", f"question {i}", "3", {"source": "cypher-gold"})
                                          for i in range(5)], {"kind": "cypher", "questions": 5})
    return data, dagger, cypher


def test_a_mix_takes_the_amounts_asked_and_gives_only_planning_examples_the_system_prompt(sources, tmp_path):
    data, dagger, cypher = sources
    counts = mix([Take(data, 8), Take(dagger), Take(cypher, 2)], tmp_path / "mix", system="COMPACT",
                 system_name="compact", seed=1)
    rows = [json.loads(line) for line in (tmp_path / "mix" / "sft.jsonl").read_text().splitlines()]
    assert len(rows) == counts["examples"] == 13
    assert counts["by_source"] == {"generated-office": 8, "dagger": 3, "cypher-gold": 2}
    assert [(s["name"], s["taken"], s["available"]) for s in counts["sources"]] == \
        [("distill_v3", 8, 20), ("dagger", 3, 3), ("cypher", 2, 5)]
    systems = {r["meta"]["mixed_from"]: r["messages"][0]["content"] for r in rows}
    assert systems == {"distill_v3": "COMPACT", "dagger": "COMPACT", "cypher": "CYPHER"}
    assert all(sum(m["role"] == "system" for m in r["messages"]) == 1 for r in rows)
    assert counts["system_prompt"] == "COMPACT" and counts["system_prompt_name"] == "compact" and counts["systems_final"]
    assert (counts["prompt_layout"], counts["answer_format"]) == ("history-scene", "action")
    assert counts["experts"] == {"expert (privileged), view-limited search": 11}
    again = mix([Take(data, 8), Take(dagger), Take(cypher, 2)], tmp_path / "again", system="COMPACT",
                system_name="compact", seed=1)
    assert (tmp_path / "again" / "sft.jsonl").read_bytes() == (tmp_path / "mix" / "sft.jsonl").read_bytes()
    assert again["sources"][0]["sft_sha256"] == counts["sources"][0]["sft_sha256"]
    assert "cypher_transform" not in counts


def test_a_cypher_transform_changes_only_cypher_examples_and_not_the_sample(sources, tmp_path):
    data, dagger, cypher = sources
    takes = [Take(data, 8), Take(dagger), Take(cypher, 2)]
    plain = mix(takes, tmp_path / "plain", system="COMPACT", system_name="compact", seed=1)

    def marked(row):
        return {**row, "messages": [{**row["messages"][0], "content": "CYPHER+X"}, *row["messages"][1:]]}

    counts = mix(takes, tmp_path / "marked", system="COMPACT", system_name="compact", seed=1,
                 cypher_transform=marked, cypher_transform_name="mark")
    assert counts["cypher_transform"] == {"name": "mark", "changed": 2}
    a = [json.loads(line) for line in (tmp_path / "plain" / "sft.jsonl").read_text().splitlines()]
    b = [json.loads(line) for line in (tmp_path / "marked" / "sft.jsonl").read_text().splitlines()]
    assert [r["messages"][1:] for r in a] == [r["messages"][1:] for r in b]  # same sample, same order
    assert [(x["messages"][0]["content"], y["messages"][0]["content"]) for x, y in zip(a, b) if x != y] == \
        [("CYPHER", "CYPHER+X")] * 2
    assert plain["examples"] == counts["examples"]


def test_a_mix_that_cannot_be_made_writes_nothing(sources, tmp_path):
    data, dagger, cypher = sources
    other = source(tmp_path / "v0", [example("FULL", "t", "done()", {"split": "virtualhome"})],
                   {"prompt_layout": "scene-history", "answer_format": "action+reason"})
    out = tmp_path / "mix"
    with pytest.raises(MixError, match="disagree on prompt layout, answer format, recall or actions per answer"):
        mix([Take(data), Take(other)], out)
    with pytest.raises(MixError, match="50 examples asked, 5 there"):
        mix([Take(cypher, 50)], out)
    with pytest.raises(MixError, match="no sft.jsonl"):
        mix([Take(tmp_path / "missing")], out)
    (dagger / "sft.jsonl").write_text((dagger / "sft.jsonl").read_text() + '{"messages": [{"role": "user"}]}\n')
    with pytest.raises(MixError, match=r"dagger/sft.jsonl:4: not a chat example"):
        mix([Take(data), Take(dagger)], out)
    assert not out.exists()
    mix([Take(cypher)], out)
    assert mix([Take(out)], tmp_path / "twice")["examples"] == 5  # a mix is taken again as it is
    odd = source(tmp_path / "odd", [example("S", "u", "a", {})], {"hello": 1})
    with pytest.raises(MixError, match="neither planning data"):
        mix([Take(odd)], tmp_path / "odd_mix")


def test_take_reads_a_directory_and_an_amount():
    assert Take.parse("runs/distill_v3:5000") == Take(__import__("pathlib").Path("runs/distill_v3"), 5000)
    assert Take.parse("runs/dagger:all").n is None and Take.parse("runs/dagger").n is None
    with pytest.raises(MixError, match=">= 1"):
        Take.parse("runs/x:0")
    take = Take.parse("runs/homes@split=virtualhome,source=dagger:300")
    assert (take.n, take.where, take.name) == (300, (("split", "virtualhome"), ("source", "dagger")),
                                               "homes@split=virtualhome,source=dagger")
    assert Take.parse("runs/homes@split=behavior").n is None
    with pytest.raises(MixError, match="KEY=VALUE"):
        Take.parse("runs/homes@virtualhome:3")


def test_a_filtered_take_weights_one_part_of_a_source_more(tmp_path):
    fmt = {"prompt_layout": "history-scene", "answer_format": "action"}
    homes = source(tmp_path / "homes", [example("FULL", f"task {i}", "done()",
                                                {"split": "virtualhome" if i % 4 == 0 else "behavior"})
                                        for i in range(20)], fmt)
    counts = mix([Take(homes, 6), Take.parse(f"{homes}@split=virtualhome:3")], tmp_path / "mix", seed=2)
    rows = [json.loads(line) for line in (tmp_path / "mix" / "sft.jsonl").read_text().splitlines()]
    filtered = [r for r in rows if r["meta"]["mixed_from"] == "homes@split=virtualhome"]
    assert len(filtered) == 3 and {r["meta"]["split"] for r in filtered} == {"virtualhome"}
    assert [(s["name"], s["available"], s["taken"], s.get("where")) for s in counts["sources"]] == \
        [("homes", 20, 6, None), ("homes@split=virtualhome", 5, 3, {"split": "virtualhome"})]
    with pytest.raises(MixError, match="6 examples asked, 5 there"):
        mix([Take.parse(f"{homes}@split=virtualhome:6")], tmp_path / "no")
    with pytest.raises(MixError, match="matches the filter"):
        mix([Take.parse(f"{homes}@split=office")], tmp_path / "no")
    with pytest.raises(MixError, match="share a name"):
        mix([Take.parse(f"{homes}@split=behavior:2"), Take.parse(f"{homes}@split=behavior:3")], tmp_path / "no")
    assert not (tmp_path / "no").exists()


def test_the_command_prints_what_it_took_and_refuses_a_bad_source(sources, tmp_path, capsys):
    data, dagger, cypher = sources
    assert main(["distill", "mix", "--out", str(tmp_path / "m"), "--take", f"{data}:4", "--take", str(cypher),
                 "--system-prompt", "compact"]) == 0
    printed = capsys.readouterr().out
    assert "distill_v3 (planning): 4 of 20" in printed and "9 examples" in printed and "compact system prompt" in printed
    assert main(["distill", "mix", "--out", str(tmp_path / "n"), "--take", f"{cypher}:9"]) == 2
    assert "9 examples asked, 5 there" in capsys.readouterr().err
    for bad in (["--worked-examples", "-1"], ["--worked-examples", "2", "--worked-share", "1.5"]):
        assert main(["distill", "mix", "--out", str(tmp_path / "w"), "--take", str(cypher), *bad]) == 2
        assert "--worked-share between 0 and 1" in capsys.readouterr().err and not (tmp_path / "w").exists()
    # the fixture's Cypher rows ask no question (no meta.question): the transform runs and changes none
    assert main(["distill", "mix", "--out", str(tmp_path / "w"), "--take", str(cypher), "--worked-examples", "2"]) == 0
    assert "Cypher examples changed: 0 (worked examples: 2 (shipped), share 0.5" in capsys.readouterr().out
    assert json.loads((tmp_path / "w" / "counts.json").read_text())["cypher_transform"]["changed"] == 0


def test_a_committed_mix_is_taken_as_it_is_beside_new_sources(sources, tmp_path):
    import gzip
    import shutil

    data, dagger, cypher = sources
    mix([Take(data, 8), Take(cypher, 2)], tmp_path / "v1", system="COMPACT", system_name="compact", seed=1)
    committed = tmp_path / "mix-v1"  # as data/training/ holds one: gzipped, beside its counts
    committed.mkdir()
    (committed / "sft.jsonl.gz").write_bytes(gzip.compress((tmp_path / "v1" / "sft.jsonl").read_bytes()))
    shutil.copy(tmp_path / "v1" / "counts.json", committed / "counts.json")
    counts = mix([Take(committed), Take(dagger)], tmp_path / "v2", system="OTHER", system_name="compact", seed=2)
    rows = [json.loads(line) for line in (tmp_path / "v2" / "sft.jsonl").read_text().splitlines()]
    old = [json.loads(line) for line in (tmp_path / "v1" / "sft.jsonl").read_text().splitlines()]
    assert counts["examples"] == 13 and counts["sources"][0]["kind"] == "mix"
    kept = sorted(json.dumps(r["messages"]) for r in rows if r["meta"]["mixed_from"] != "dagger")
    assert kept == sorted(json.dumps(r["messages"]) for r in old)  # system messages as they were (final)
    assert {r["messages"][0]["content"] for r in rows if r["meta"]["mixed_from"] == "dagger"} == {"OTHER"}
    counts_v1 = json.loads((committed / "counts.json").read_text())
    (committed / "counts.json").write_text(json.dumps({**counts_v1, "systems_final": False}))
    with pytest.raises(MixError, match="not final"):
        mix([Take(committed)], tmp_path / "v3")


def test_a_mix_of_a_mix_keeps_the_inner_mixs_teacher_counts(sources, tmp_path):
    """A committed mix taken whole carries its ``experts``; a part of it counts what it can:
    ``meta.expert``, else the mix's only teacher, else ``experts_uncounted``."""
    import gzip

    data, dagger, cypher = sources
    teacher = "expert (privileged), view-limited search"
    inner = mix([Take(data, 8), Take(dagger), Take(cypher, 2)], tmp_path / "v1", system="COMPACT",
                system_name="compact", seed=1)
    assert inner["experts"] == {teacher: 11}
    rows = [json.loads(line) for line in (tmp_path / "v1" / "sft.jsonl").read_text().splitlines()]
    named = {r["meta"].get("expert") for r in rows if not r["meta"].get("source", "").startswith("cypher")}
    for r in rows:  # as committed mixes hold them: only DAgger's examples name their teacher
        if r["meta"].get("source") != "dagger":
            r["meta"].pop("expert", None)
    committed = tmp_path / "mix-v1"
    committed.mkdir()
    (committed / "sft.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    (committed / "counts.json").write_text(json.dumps(inner))

    whole = mix([Take(committed), Take(cypher, 1)], tmp_path / "v2", seed=2)
    assert whole["experts"] == {teacher: 11} and "experts_uncounted" not in whole
    assert (whole["sources"][0]["experts"], whole["sources"][0]["experts_from"]) == ({teacher: 11}, "carried")
    assert [(s["name"], s.get("experts"), s.get("experts_from")) for s in inner["sources"]] == \
        [("distill_v3", {teacher: 8}, "counted"), ("dagger", {teacher: 3}, "counted"), ("cypher", None, None)]
    assert named == {teacher}  # a mix names the teacher of each planning example it takes
    again = mix([Take(tmp_path / "v2")], tmp_path / "v3", seed=3)  # and the mix of that mix, in turn
    assert again["experts"] == {teacher: 11}

    part = mix([Take(committed, 6)], tmp_path / "part", seed=4)
    taken = [json.loads(line) for line in (tmp_path / "part" / "sft.jsonl").read_text().splitlines()]
    planning = sum(not r["meta"].get("source", "").startswith("cypher") for r in taken)
    assert part["experts"] == {teacher: planning} and part["sources"][0]["experts_from"] == "counted"
    office = mix([Take.parse(f"{committed}@split=generated-office")], tmp_path / "office")
    assert office["experts"] == {teacher: 8} and office["sources"][0]["experts"] == {teacher: 8}

    (committed / "counts.json").write_text(json.dumps({**inner, "experts": {teacher: 3, "expert (privileged)": 8}}))
    mixed = mix([Take(committed, 13)], tmp_path / "mixed", seed=5)  # two teachers: the office rows' is unknown
    assert mixed["experts"] == {teacher: 3} and mixed["experts_uncounted"] == 8
    assert mixed["sources"][0]["experts_uncounted"] == 8
    kept = mix([Take(tmp_path / "mixed")], tmp_path / "kept")
    assert (kept["experts"], kept["experts_uncounted"]) == ({teacher: 3}, 8)


def test_a_cypher_system_rewrite_reaches_every_cypher_example_a_committed_mix_too(sources, tmp_path):
    import gzip
    import shutil

    data, dagger, cypher = sources
    mix([Take(data, 8), Take(cypher, 2)], tmp_path / "v1", system="COMPACT", system_name="compact", seed=1)
    committed = tmp_path / "mix-v1"
    committed.mkdir()
    (committed / "sft.jsonl.gz").write_bytes(gzip.compress((tmp_path / "v1" / "sft.jsonl").read_bytes()))
    shutil.copy(tmp_path / "v1" / "counts.json", committed / "counts.json")
    takes = [Take(committed), Take(dagger), Take(cypher, 3)]
    plain = mix(takes, tmp_path / "plain", system="COMPACT", system_name="compact", seed=2)
    counts = mix(takes, tmp_path / "v2", system="COMPACT", system_name="compact", seed=2,
                 cypher_system=lambda s: s.replace("CYPHER", "CYPHER (end)"), cypher_system_name="end")
    assert counts["cypher_system"] == {"name": "end", "cypher_examples": 5, "changed": 5}
    assert "cypher_system" not in plain
    a = [json.loads(line) for line in (tmp_path / "plain" / "sft.jsonl").read_text().splitlines()]
    b = [json.loads(line) for line in (tmp_path / "v2" / "sft.jsonl").read_text().splitlines()]
    assert [r["messages"][1:] for r in a] == [r["messages"][1:] for r in b]  # the same sample, the same order
    changed = [(x["meta"]["mixed_from"], y["messages"][0]["content"]) for x, y in zip(a, b) if x != y]
    assert sorted(changed) == [("cypher", "CYPHER (end)")] * 3 + [("mix-v1", "CYPHER (end)")] * 2
    assert all(x == y for x, y in zip(a, b) if x["meta"].get("source") != "cypher-gold")  # planning untouched
    with pytest.raises(MixError, match="cypher: an example of None/None: bad prompt"):
        mix([Take(cypher)], tmp_path / "v3", cypher_system=lambda s: (_ for _ in ()).throw(ValueError("bad prompt")))


def test_the_command_moves_the_classes_line_of_real_cypher_prompts(sources, tmp_path, kitchen, capsys):
    pytest.importorskip("ladybug")
    from lookplangraph.cypher import QueryLimits, open_store
    from lookplangraph.cypher.agent import AgentConfig, CypherAgent
    from lookplangraph.lm import ScriptedBackend

    store = open_store("ladybug", QueryLimits())
    store.load(kitchen)

    def prompt(at: str, k: int) -> str:
        lm = ScriptedBackend([json.dumps({"thought": "t", "tool": "answer", "answer": 2})])  # scripted: prompt only
        CypherAgent(lm, store, AgentConfig(worked_examples=k, classes_at=at)).answer_question("How many apples?", "number")
        return lm.requests[0]["messages"][0]["content"]

    data, dagger, cypher = sources
    real = source(tmp_path / "cypher_real", [example(prompt("schema", i % 2), f"question {i}", "2",
                                                     {"source": "cypher-gold-intent", "split": "s", "scene": "k"})
                                             for i in range(4)], {"kind": "cypher", "questions": 4})
    assert main(["distill", "mix", "--out", str(tmp_path / "m"), "--take", f"{data}:4", "--take", str(real),
                 "--system-prompt", "compact", "--cypher-classes-at", "end"]) == 0
    assert "Cypher system prompts rewritten: 4 of 4" in capsys.readouterr().out
    rows = [json.loads(line) for line in (tmp_path / "m" / "sft.jsonl").read_text().splitlines()]
    ends = {prompt("end", 0), prompt("end", 1)}
    assert {r["messages"][0]["content"] for r in rows if r["meta"]["mixed_from"] == "cypher_real"} == ends
    assert {r["messages"][0]["content"] for r in rows if r["meta"]["mixed_from"] == "distill_v3"} != ends
    counts = json.loads((tmp_path / "m" / "counts.json").read_text())
    assert counts["cypher_system"]["changed"] == 4 and "classes_at_end" in counts["cypher_system"]["name"]
    store.close()
