"""SG-RwR (lookplangraph/planners/sgrwr/): message forms and markers, the assume-guard, the
graph data and the trusted prelude in the real sandbox, the two agents' histories, self-debugging,
every limit, malformed replies, static and step-by-step episodes, and a real GraSIF office task
judged by the real validator.

The LM is ScriptedBackend everywhere: SCRIPTED replies written for these tests, not a language
model. The code those replies contain runs in the real sandbox (lookplangraph/sandbox), which
needs strong isolation (Landlock or namespaces, an unprivileged uid); where the machine offers
only weak isolation the tests that run code are skipped with the sandbox's own reason."""

from __future__ import annotations

import json

import pytest

from grasif import office
from grasif.validate import validate_plan
from lookplangraph.lm import ContextOverflow, ScriptedBackend
from lookplangraph.cli import main
from lookplangraph.planners.config import PlannerConfig, SGRwRConfig
from lookplangraph.planners import get_planner
from lookplangraph.planners.sgrwr.agents import CODE_GRAMMAR, REASONER_GRAMMAR, STOPS, config_sandbox
from lookplangraph.planners.sgrwr.graphdata import graph_data, prelude
from lookplangraph.planners.sgrwr.guard import assumption
from lookplangraph.planners.sgrwr.hints import NO_CODE_YET, debug_hint
from lookplangraph.planners.sgrwr.messages import RETRIEVED, TERMINATE, read_action_list, read_reasoner, read_retriever
from lookplangraph.planners.sgrwr.planner import GO_ON, REPEATED
from lookplangraph.planners.sgrwr.prompts import reasoner_system, retriever_system, shared
from lookplangraph.sandbox import SandboxUnavailable
from lookplangraph.evaluation.settings import load_settings
from sim_adapters.graph_env import GraphEnvironment

from test_baselines import apple_task

try:
    config_sandbox(PlannerConfig())
    SANDBOX_WHY = None
except SandboxUnavailable as exc:  # pragma: no cover - depends on the kernel and the user
    SANDBOX_WHY = str(exc)
needs_sandbox = pytest.mark.skipif(SANDBOX_WHY is not None, reason=f"no strong sandbox here: {SANDBOX_WHY}")

PLAN = ["go_to(kitchen-1)", "open(fridge-1)", "open(box-1)", "pick_up(apple-1)", "close(box-1)", "close(fridge-1)",
        "go_to(bedroom-1)", "put_on(bed-1)"]


def query(text):
    return f"[Explanation]\nI need to know this.\n[Query]\n{text}"


def code(body, *, marker="[Code]"):
    return f"[Explanation]\nWork it out.\n{marker}\n```python\n{body}\n```"


def solution(actions):
    return f"[Summary]\nThe plan.\n[Actions]\n[{', '.join(actions)}]\n{TERMINATE}"


def retrieved(text):
    return f"[Summary]\n{text}\n{RETRIEVED}"


def act(call):
    return f"[Explanation]\nnext\n[Action]\n{call}"


FIND_APPLES = "for n, d in G.nodes(data=True):\n    if d['class'] == 'apple':\n        print(n, list(G.successors(n)))"


def run(replies, task=None, env=None, **cfg):
    task = task or apple_task()
    lm = ScriptedBackend(replies)  # SCRIPTED replies, not an LM
    steps = []
    result = get_planner("sg-rwr").run(task, env or GraphEnvironment(task.graph), lm, PlannerConfig.from_dict(cfg),
                                       on_step=steps.append)
    return result, sorted(steps, key=lambda s: s.call), lm


# -- message forms and markers ---------------------------------------------------------------------
def test_reasoner_forms_and_the_first_marker_wins():
    assert read_reasoner(query("Where is the apple?")).query == "Where is the apple?"
    r = read_reasoner(code("print(room_of('apple-1'))"))
    assert r.form == "code" and r.code == "print(room_of('apple-1'))"
    assert read_reasoner("```python\nprint(1)\n```").code == "print(1)"  # a bare fence is code
    assert read_reasoner("[Code]\nprint(2)").code == "print(2)"  # a [Code] section without a fence
    s = read_reasoner(solution(PLAN))
    assert s.form == "summary" and [str(a) for a in s.actions] == PLAN and s.summary == "The plan."
    # a query that goes on to imagine an answer and a plan is a query: its marker comes first
    r = read_reasoner(query("Where is the apple?") + "\n[Summary]\nx\n[Actions]\n[go_to(a-1)]\n" + TERMINATE)
    assert r.form == "query" and r.query == "Where is the apple?"


@pytest.mark.parametrize("listed", [
    '["go_to(kitchen-1)", "open(fridge-1)"]', "1. go_to(kitchen-1)\n2. open(fridge-1)",
    "[go_to(kitchen-1), open(fridge-1)]", "```\ngo_to(kitchen-1)\nopen(fridge-1)\n```"])
def test_action_lists_in_every_written_form(listed):
    assert [str(a) for a in read_action_list(listed)] == ["go_to(kitchen-1)", "open(fridge-1)"]


@pytest.mark.parametrize("text, words", [
    ("I think the apple is in the fridge.", "none of the message forms"),
    ("[Query]\n", "[Query] is empty"),
    ("[Code]\n", "has no code"),
    ("[Summary]\nx\n[Actions]\n[go_to(kitchen-1)]", TERMINATE),
    (f"[Summary]\nall done\n{TERMINATE}", "no [Actions] list"),
    (f"[Summary]\nx\n[Actions]\nfirst walk, then open\n{TERMINATE}", "no action found"),
    (f"[Summary]\nx\n[Actions]\n[go_to(kitchen-1, hall-1)]\n{TERMINATE}", "action 1 of the list"),
    ("[Action]\ngo_to(kitchen-1)", "none of the message forms"),  # no action form in static mode
])
def test_malformed_reasoner_replies_say_what_is_wrong(text, words):
    r = read_reasoner(text)
    assert r.form == "malformed" and words in r.error


@pytest.mark.parametrize("text", [
    "Query: Where is the apple?", "**Query:** Where is the apple?", "### Query\nWhere is the apple?",
    "[query]\nWhere is the apple?\n[Explanation]\nI need it.", "Explanation: I need it.\nQuery: Where is the apple?"])
def test_markers_in_markdown_and_colon_forms(text):
    r = read_reasoner(text)
    assert r.form == "query" and r.query == "Where is the apple?"


def test_markers_do_not_match_inside_sentences_or_other_words():
    assert read_reasoner("I have no Query: nothing to ask.").form == "malformed"  # not at a line start
    r = read_reasoner("**Summary:** done\n**Actions:**\n[go_to(kitchen-1)]\n" + TERMINATE)
    assert r.form == "summary" and [str(a) for a in r.actions] == ["go_to(kitchen-1)"] and r.summary == "done"
    assert read_reasoner("Actions: [go_to(kitchen-1)]\n" + TERMINATE, step_mode=True).form == "summary"  # not Action


def test_step_mode_reads_one_action_and_a_bare_termination():
    r = read_reasoner("[Explanation]\nfirst the kitchen\n[Action]\ngo_to(kitchen-1)", step_mode=True)
    assert r.form == "action" and str(r.action) == "go_to(kitchen-1)"
    assert read_reasoner(f"[Summary]\nall done\n{TERMINATE}", step_mode=True).form == "summary"
    assert read_reasoner("[Action]\nwalk somewhere", step_mode=True).form == "malformed"


def test_retriever_forms_and_its_marker():
    assert read_retriever("```python\nprint(G)\n```\n" + RETRIEVED).form == "code"  # code first: not run yet
    assert read_retriever(retrieved("apple-1 is in box-1")).summary == "apple-1 is in box-1"
    assert read_retriever(f"apple-1 is in box-1\n{RETRIEVED}").summary == "apple-1 is in box-1"
    assert read_retriever(f"[Summary]\n\n{RETRIEVED}").form == "malformed"
    assert read_retriever("The apple is in the box.").form == "malformed"
    assert read_retriever("for n in G:\n    print(n)").code == "for n in G:\n    print(n)"  # unfenced code
    assert read_retriever("print('the apple')").form == "malformed"  # Python, but it reads nothing
    # the marker written as the block's last line (the 1.5B model under the code grammar) is not code
    assert read_retriever(f"```python\nfor n in G:\n    print(n)\n{RETRIEVED}\n```").code == "for n in G:\n    print(n)"
    assert read_retriever(f"```python\nprint('{RETRIEVED}', G)\n```").code == f"print('{RETRIEVED}', G)"


# -- the assume-guard --------------------------------------------------------------------------------
def test_assume_guard_rule():
    assert "assum" in assumption("# assuming the apple is in the fridge\nprint(G)", "", reads_graph=True)
    assert "Assumption" in assumption("x = 'Assumption'\nprint(G)", "", reads_graph=True)
    assert "fridge-1" in assumption("print(list(G.predecessors('fridge-1')))", "What is in the fridge?", reads_graph=True)
    assert assumption("print(list(G.predecessors('fridge-1')))", "What is in fridge-1?", reads_graph=True) is None
    assert assumption("print(list(G.predecessors('fridge-1')))", "output: fridge-10", reads_graph=True) is not None
    assert "does not read the graph" in assumption("print('apple-1 is in the fridge')", "apple-1", reads_graph=True)
    assert assumption("print('apple-1 is in the fridge')", "apple-1") is None  # the Reasoner needs no G
    assert assumption("print(room_of('apple-1')", "") is None  # no syntax tree: the sandbox reports it


# -- prompts: schema, never data ---------------------------------------------------------------------
def test_prompts_carry_the_schema_and_no_scene_data():
    for mode in ("static", "step"):
        system = reasoner_system(mode)
        assert '"layer"' in system and '"relation"' in system and "fetch_steps" in system
        assert (TERMINATE in system) == (mode == "static") and ("done()" in system) == (mode == "step")
        assert "kitchen-1" in system  # the examples' own scenes only ...
        assert "apple-1" not in system and "bed-1" not in system  # ... nothing of the task's scene
        assert ('"seen"' in system) == (mode == "step") and ("[Action]" in system) == (mode == "step")
        assert RETRIEVED in retriever_system(mode) and "fetch_steps" not in retriever_system(mode)
        common = shared(mode)  # one prefix for the KV cache when the agents take turns
        assert system.startswith(common) and retriever_system(mode).startswith(common) and '"layer"' in common


# -- the graph data and the prelude in the sandbox ---------------------------------------------------
def test_graph_data_lists_nodes_edges_and_the_agent(kitchen):
    data = graph_data(kitchen, unseen={"apple-1"})
    nodes = {n["name"]: n for n in data["nodes"]}
    assert nodes["fridge-1"] == {"name": "fridge-1", "layer": "asset", "class": "fridge", "states": ["closed"],
                                 "affordances": ["put_inside", "open", "close"], "properties": []}
    assert nodes["apple-1"]["seen"] is False and nodes["apple-2"]["seen"] is True and "seen" not in nodes["fridge-1"]
    assert ["apple-1", "box-1", "inside"] in data["edges"] and ["fridge-1", "kitchen-1", "in_room"] in data["edges"]
    assert data["agent"] == {"name": "agent-1", "location": "bedroom-1", "holding": None}
    json.dumps(data)


@needs_sandbox
def test_each_agent_sees_only_its_own_names_in_the_sandbox(kitchen):
    sb = config_sandbox(PlannerConfig())
    data = graph_data(kitchen)
    probe = "print(sorted(n for n in dir() if n in ('G', 'nx', 'DATA', 'room_of', 'fetch_steps', 'place_steps')))"
    assert sb.run(probe, data=data, prelude=prelude("retriever")).stdout.strip() == "['G', 'nx']"
    assert sb.run(probe, data=data, prelude=prelude("reasoner")).stdout.strip() == "['fetch_steps', 'place_steps', 'room_of']"
    r = sb.run("print(G.edges['apple-1', 'box-1']['relation'], G.nodes['agent-1']['layer'], "
               "list(G.successors('agent-1')))", data=data, prelude=prelude("retriever"))
    assert r.ok and r.stdout.strip() == "inside agent ['bedroom-1']"
    r = sb.run("print(fetch_steps('apple-1'))\nprint(place_steps('inside', 'box-1'))\nprint(closed_around('apple-1'))",
               data=data, prelude=prelude("reasoner").replace("del nx", "del nx\nfrom networkx import *"))
    assert r.stdout.splitlines() == [
        "['go_to(kitchen-1)', 'open(fridge-1)', 'open(box-1)', 'pick_up(apple-1)']",
        "['go_to(kitchen-1)', 'open(fridge-1)', 'open(box-1)', 'put_inside(box-1)']", "['fridge-1', 'box-1']"]
    # the tools keep G in a closure the Reasoner's code cannot reach
    r = sb.run("print(room_of.__closure__)", data=data, prelude=prelude("reasoner"))
    assert r.kind == "policy" and "__closure__" in r.error and r.isolation == "none"
    with pytest.raises(ValueError):
        prelude("planner")


# -- static episodes ---------------------------------------------------------------------------------
@needs_sandbox
def test_static_episode_with_every_message_form_and_only_queries_and_summaries_crossing():
    result, steps, lm = run([
        query("Where are the apples?"), code(FIND_APPLES, marker=""), retrieved("apple-1 is inside box-1"),
        code("print(fetch_steps('apple-1'))"),
        query("Which node of class bed is there?"), code("print([n for n in G if G.nodes[n]['class'] == 'bed'])"),
        retrieved("bed-1"), solution(PLAN)])
    assert result.success and result.failure is None and result.planner == "sg-rwr" and result.termination == "done"
    assert result.actions == PLAN and result.executed == PLAN and result.success_with_correction is True
    assert result.lm_calls == 8 and result.agent_calls == {"reasoner": 4, "retriever": 4}
    assert result.prompt_tokens == sum(s.prompt_tokens for s in steps) > 0 and result.completion_tokens > 0
    assert result.sandbox_runs == 3 and result.sandbox_failures == 0 and result.guard_refusals == 0
    assert result.sandbox_isolation and not result.sandbox_isolation.startswith("weak")
    assert [(s.agent, s.form) for s in steps] == [
        ("reasoner", "query"), ("retriever", "code"), ("retriever", "summary"), ("reasoner", "code"),
        ("reasoner", "query"), ("retriever", "code"), ("retriever", "summary"), ("reasoner", "summary")]
    assert steps[1].sandbox["kind"] == "ok" and steps[1].code == FIND_APPLES
    assert steps[1].feedback.startswith("Output:\napple-1 ['box-1']\napple-2 ['table-1']")
    assert steps[3].feedback == "Output of your code:\n['go_to(kitchen-1)', 'open(fridge-1)', 'open(box-1)', 'pick_up(apple-1)']"
    assert steps[7].executed == PLAN and steps[7].proposed == "plan of 8 actions"
    reasoner = [r["messages"] for r in lm.requests if "you are the planner" in r["messages"][0]["content"]]
    retriever = [r["messages"] for r in lm.requests if "you answer questions" in r["messages"][0]["content"]]
    assert len(reasoner) == 4 and len(retriever) == 4
    # the Reasoner got the summary, never the Retriever's code or output
    told = "\n".join(m["content"] for m in reasoner[-1])
    assert "Answer from the retriever:\napple-1 is inside box-1" in told and "G.nodes" not in told and "['table-1']" not in told
    # each query starts a fresh Retriever history holding only the query
    assert retriever[0][1:] == [{"role": "user", "content": "Query: Where are the apples?"}]
    assert retriever[2][1:] == [{"role": "user", "content": "Query: Which node of class bed is there?"}]
    assert "I need to know this" not in json.dumps(retriever)  # the Reasoner's explanation stays with it
    assert all(r["max_tokens"] == PlannerConfig().sg_rwr.reply_tokens for r in lm.requests)
    # a reply is cut where it starts to imagine the other side's message
    stops = {r["messages"][0]["content"][-40:]: r["stop"] for r in lm.requests}
    assert sorted(map(tuple, stops.values())) == sorted([STOPS["reasoner"], STOPS["retriever"]])


@needs_sandbox
def test_retriever_debugs_its_code_until_it_runs():
    result, steps, _ = run([query("Where are the apples?"), code("print(G.nodes[next(iter(G))]['colour'])", marker=""),
                            code(FIND_APPLES, marker=""), retrieved("apple-1 in box-1"), solution(PLAN)])
    assert result.success and result.sandbox_runs == 2 and result.sandbox_failures == 1
    assert steps[1].sandbox["kind"] == "exception" and "KeyError: 'colour'" in steps[1].feedback
    assert steps[1].feedback.endswith("Send corrected code.") and steps[2].sandbox["ok"]


@needs_sandbox
def test_retriever_gives_up_after_the_debug_attempts():
    result, steps, lm = run([query("Where are the apples?"), code("print(G.nodes[next(iter(G))]['colour'])", marker=""),
                             code("print(1 / 0)\nprint(G)", marker=""), solution(PLAN)], sgrwr_debug_attempts=1)
    assert result.success and result.sandbox_runs == 2 and result.sandbox_failures == 2
    assert [s.agent for s in steps] == ["reasoner", "retriever", "retriever", "reasoner"]
    assert steps[0].feedback.startswith("No answer: the retriever could not answer: its code failed 2 times in a row")
    assert "ZeroDivisionError" in steps[0].feedback


@needs_sandbox
def test_reasoner_code_is_given_up_after_the_debug_attempts():
    bad = code("print(fetch_steps('apple-1')[99])")
    result, steps, _ = run([query("Where are the apples?"), code(FIND_APPLES, marker=""), retrieved("apple-1"),
                            bad, bad, bad, query("Where is the bed?"), code("print([n for n in G if 'bed' in n])", marker=""),
                            retrieved("bed-1"), code("print(room_of('bed-1'))"), solution(PLAN)], sgrwr_debug_attempts=1)
    assert result.success
    reasoner = [s for s in steps if s.agent == "reasoner"]
    assert "IndexError" in reasoner[1].feedback and reasoner[1].sandbox["kind"] == "exception"
    assert "given up" in reasoner[2].feedback and reasoner[2].sandbox is not None
    assert reasoner[3].feedback.startswith("Your code was not run.") and reasoner[3].sandbox is None
    assert reasoner[5].feedback == "Output of your code:\nbedroom-1"  # a new count after another form
    assert result.sandbox_runs == 5 and result.sandbox_failures == 2


@needs_sandbox
def test_reasoner_reading_the_graph_is_told_to_ask_the_retriever():
    _, steps, _ = run([code("print(len(G))"), solution(PLAN)])
    assert "NameError: name 'G' is not defined" in steps[0].feedback
    assert steps[0].feedback.endswith("ask the retriever a query to read it.")


@needs_sandbox
def test_assume_guard_sends_code_back_without_running_it():
    result, steps, _ = run([
        query("Where is the apple?"), code("# assume the apple is in the fridge\nprint(G.nodes['apple-1'])", marker=""),
        code("print('apple-1 is in fridge-1')", marker=""), code("print(list(G.successors('fridge-1')))", marker=""),
        code(FIND_APPLES, marker=""), retrieved("apple-1 in box-1"),
        code("print(place_steps('ontop', 'bed-1'))"), code("print(place_steps('ontop', 'bed-1'))"), solution(PLAN)],
        sgrwr_debug_attempts=3, sgrwr_retriever_turns=6)
    # the same guessing code twice: the refusal names bed-1, which does not make it known
    assert result.success and result.guard_refusals == 5 and result.sandbox_runs == 1
    retr = [s for s in steps if s.agent == "retriever"]
    assert "do not assume" in retr[0].feedback and retr[0].sandbox is None
    assert "does not read the graph" in retr[1].feedback
    assert "fridge-1" in retr[2].feedback and "do not guess names" in retr[2].feedback
    reasoner = [s for s in steps if s.agent == "reasoner"]
    assert reasoner[1].feedback.startswith("Your code was not run:") and "bed-1" in reasoner[1].feedback
    assert reasoner[2].feedback == reasoner[1].feedback


@needs_sandbox
def test_retriever_must_run_code_before_its_summary():
    result, steps, _ = run([query("Where is the apple?"), retrieved("apple-1 is in the fridge"),
                            code(FIND_APPLES, marker=""), retrieved("apple-1 in box-1"), solution(PLAN)])
    assert result.success and steps[1].form == "summary" and not steps[1].accepted
    assert "not run any code" in steps[1].feedback and steps[3].accepted


@needs_sandbox
@pytest.mark.parametrize("bad, hint", [
    ("print([G.successors(n)[0] for n in G if G.nodes[n]['class'] == 'apple'])", "list(G.successors(n))"),
    ("print([G.nodes[n]['holding'] for n in G if G.nodes[n]['class'] == 'apple'])", "attribute of the agent node only"),
])
def test_retriever_debugging_explains_known_mistakes(bad, hint):
    # the two mistakes the 1.5B model made most: an iterator indexed, the holder read as an attribute
    replies = [query("Where is the apple?"), code(bad, marker=""), code(FIND_APPLES, marker=""),
               retrieved("apple-1 in box-1"), solution(PLAN)]
    result, steps, lm = run(replies, sgrwr_debug_hints=True)
    assert result.success and steps[1].sandbox["kind"] == "exception"
    assert "Hint: " in steps[1].feedback and hint in steps[1].feedback
    assert steps[1].feedback.endswith("Send corrected code.")
    # the hint reaches the LM in the Retriever's next prompt; off by default
    assert hint in lm.requests[2]["messages"][-1]["content"]
    _, steps, _ = run(replies)
    assert "Hint:" not in steps[1].feedback and hint not in steps[1].feedback


def test_debug_hints_name_the_mistake_and_nothing_else():
    assert "list(...)" in debug_hint("TypeError: 'dict_keyiterator' object is not subscriptable")
    assert "is an edge" in debug_hint("Traceback (most recent call last):\nKeyError: 'location'")
    assert "instead of guessing names" in debug_hint("KeyError: 'money-1'")
    assert "is not a node attribute" in debug_hint("KeyError: 'colour'")
    assert debug_hint("KeyError: 'states'") is None  # a real attribute: missing on some node, no rule to give
    assert debug_hint("ZeroDivisionError: division by zero") is None and debug_hint(None) is None


@needs_sandbox
def test_a_summary_before_any_code_gets_a_runnable_example(kitchen):
    result, steps, _ = run([query("Where is the apple?"), retrieved("apple-1 is in the fridge"),
                            code(FIND_APPLES, marker=""), retrieved("apple-1 in box-1"), solution(PLAN)],
                           sgrwr_debug_hints=True)
    assert result.success and "```python" in steps[1].feedback and steps[1].feedback == NO_CODE_YET
    # the example itself passes the sandbox's policy and runs over a real scene graph
    example = NO_CODE_YET.split("```python\n")[1].split("```")[0]
    sandbox, data = config_sandbox(PlannerConfig()), graph_data(kitchen)
    r = sandbox.run(example, data=data, prelude=prelude("retriever"))
    assert r.ok and r.stdout.strip() == "cup-1 [] ['tray-1'] ['ontop']"
    r = sandbox.run(example.replace('"cup"', '"giraffe"'), data=data, prelude=prelude("retriever"))
    assert r.ok and r.stdout.strip() == "None"


@needs_sandbox
def test_code_grammar_holds_the_retriever_to_code_until_its_code_has_run():
    replies = [query("Where is the apple?"), code("print(G.nodes['apple-1'])", marker=""),  # refused: a guessed name
               code(FIND_APPLES, marker=""), retrieved("apple-1 in box-1"), solution(PLAN)]
    result, steps, lm = run(replies, sgrwr_code_grammar=True)
    assert result.success
    grammars = [("you answer questions" in r["messages"][0]["content"], r["grammar"]) for r in lm.requests]
    # Retriever calls: code required before its code ran (the refused try included), free after; Reasoner never
    assert [g for is_retriever, g in grammars if is_retriever] == [CODE_GRAMMAR, CODE_GRAMMAR, None]
    assert [g for is_retriever, g in grammars if not is_retriever] == [None, None]
    _, _, lm = run(replies)  # off by default
    assert all(r["grammar"] is None for r in lm.requests)


def test_code_grammar_admits_a_code_block_and_nothing_else(small_model_path):
    # llama.cpp's own grammar engine over the 0.5B model's vocabulary (no weights used)
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed")
    from lookplangraph.planners.pddl.grammar import accepts

    vocab = llama_cpp.Llama(model_path=str(small_model_path), vocab_only=True, verbose=False)
    assert accepts(CODE_GRAMMAR, f"```python\n{FIND_APPLES}\n```", vocab)
    assert not accepts(CODE_GRAMMAR, retrieved("apple-1 is in the fridge"), vocab)
    assert not accepts(CODE_GRAMMAR, f"Here is the code:\n```python\n{FIND_APPLES}\n```", vocab)


@needs_sandbox
def test_reasoner_grammar_goes_with_every_reasoner_call_of_its_mode():
    replies = [query("Where is the apple?"), code(FIND_APPLES, marker=""), retrieved("apple-1 in box-1"), solution(PLAN)]
    result, _, lm = run(replies, sgrwr_reasoner_grammar=True)
    assert result.success
    grammars = [("you answer questions" in r["messages"][0]["content"], r["grammar"]) for r in lm.requests]
    assert [g for is_retriever, g in grammars if not is_retriever] == [REASONER_GRAMMAR["static"]] * 2
    assert [g for is_retriever, g in grammars if is_retriever] == [None, None]  # the Retriever's own option
    result, _, lm = run([act("go_to(kitchen-1)"), act("done()")], sgrwr_mode="step", sgrwr_reasoner_grammar=True)
    assert [r["grammar"] for r in lm.requests] == [REASONER_GRAMMAR["step"]] * 2
    _, _, lm = run(replies)  # off by default
    assert all(r["grammar"] is None for r in lm.requests)


# every form of a mode, as the scripted replies write it, and the form read_reasoner finds in it
_ONE_MESSAGE = {
    "static": [(query("Where is the apple?"), "query"), (code(FIND_APPLES), "code"),
               (solution(PLAN), "summary"), ("[Explanation]\nTwo lines\nof thought.\n[Query]\nWhere?", "query")],
    "step": [(query("Where is the apple? " * 15), "query"), (code("print(fetch_steps('apple-1'))"), "code"),
             (act("go_to(kitchen-1)"), "action"), (act("done()"), "action")],
}
# what the 1.5B model wrote past the end of its message, a form of the other mode, a message without
# [Explanation] or with four lines of it, a query over 300 characters
_MORE = {
    "static": [query("Where?") + "\n[Code]\n```python\nprint(1)\n```", code("print(1)") + "\nThe robot must know.",
               act("go_to(kitchen-1)"), solution(PLAN) + "\n[Explanation]\nagain", "I think the apple is here."],
    "step": [query("Where?") + "\n\n[Code]\nprint(fetch_steps('a-1'))\n```\nThe robot must know where the watch is.",
             act("go_to(kitchen-1)") + "\n[Action]\nopen(fridge-1)", solution(PLAN), "[Action]\ngo_to(kitchen-1)",
             "[Explanation]\na\nb\nc\nd\n[Query]\nWhere?",
             query(" ".join(["Which nodes have the class \"pick_up\", and are they seen?"] * 6))],  # > 300 characters
}


@pytest.mark.parametrize("mode", ["static", "step"])
def test_reasoner_grammar_admits_one_message_of_one_form_and_nothing_after_it(mode, small_model_path):
    # llama.cpp's own grammar engine over the 0.5B model's vocabulary (no weights used)
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed")
    from lookplangraph.planners.pddl.grammar import accepts

    vocab = llama_cpp.Llama(model_path=str(small_model_path), vocab_only=True, verbose=False)
    for text, form in _ONE_MESSAGE[mode]:
        assert accepts(REASONER_GRAMMAR[mode], text, vocab), text
        assert read_reasoner(text, step_mode=mode == "step").form == form
    for text in _MORE[mode]:
        assert not accepts(REASONER_GRAMMAR[mode], text, vocab), text


@needs_sandbox
@pytest.mark.parametrize("snippet, kind, cfg", [
    ("while True:\n    pass\nprint(G)", "timeout", {"sgrwr_code_seconds": 1}),
    ("print('x' * 100000)\nprint(G)", "output", {"sgrwr_output_bytes": 1000}),
    ("big = bytearray(600 * 1024 * 1024)\nprint(G)", "memory", {"sgrwr_code_memory_mb": 256}),
    ("import os\nprint(G)", "policy", {}),
])
def test_code_limits_come_back_as_errors_to_debug(snippet, kind, cfg):
    result, steps, _ = run([query("Where is the apple?"), code(snippet, marker=""), code(FIND_APPLES, marker=""),
                            retrieved("apple-1 in box-1"), solution(PLAN)], **cfg)
    assert result.success and steps[1].sandbox["kind"] == kind and result.sandbox_failures == 1
    assert "none" not in result.sandbox_isolation.split(" | ")  # a policy refusal starts no process
    assert steps[1].feedback.startswith(f"Your code failed ({kind}):")


def test_round_limit_ends_without_a_plan_and_malformed_replies_are_answered():
    result, steps, _ = run(["I would walk to the kitchen.", "[Query]\n", f"[Summary]\nx\n[Actions]\nnone\n{TERMINATE}"],
                           sgrwr_max_rounds=3)
    assert not result.success and result.failure == "round_limit" and result.termination == "no_plan"
    assert result.lm_calls == 3 and result.agent_calls == {"reasoner": 3} and result.executed == []
    assert [s.form for s in steps] == ["malformed"] * 3
    assert "none of the message forms" in steps[0].feedback and "no action found" in steps[2].feedback


def test_retriever_turns_limit_a_query():
    result, steps, _ = run([query("Where is the apple?"), "The apple is in the fridge.", "I am not sure.",
                            solution(PLAN)], sgrwr_retriever_turns=2)
    assert result.success and [s.agent for s in steps] == ["reasoner", "retriever", "retriever", "reasoner"]
    assert steps[0].feedback == "No answer: the retriever found no answer in 2 replies. Ask differently."


def test_static_plan_runs_as_written_and_fails_on_an_infeasible_step():
    result, steps, _ = run([solution([a for a in PLAN if a != "open(box-1)"])])
    assert not result.success and result.failure == "infeasible_step" and result.success_with_correction is True
    assert result.executed == ["go_to(kitchen-1)", "open(fridge-1)"] and "pick_up(apple-1)" in result.infeasible[0]
    assert steps[-1].infeasible == result.infeasible[0]


class OverflowAfter(ScriptedBackend):
    """SCRIPTED replies, then a context overflow (as a real backend raises it)."""

    def __init__(self, replies, n):
        super().__init__(replies)
        self.n = n

    def complete(self, messages, **kw):
        if self.calls >= self.n:
            raise ContextOverflow("the prompt does not fit (scripted)")
        return super().complete(messages, **kw)


@needs_sandbox
def test_context_overflow_in_the_middle_of_a_query_ends_the_episode():
    task = apple_task()
    lm = OverflowAfter([query("Where is the apple?"), code(FIND_APPLES, marker="")], 2)
    steps = []
    result = get_planner("sg-rwr").run(task, GraphEnvironment(task.graph), lm, PlannerConfig(), on_step=steps.append)
    assert result.failure == "context_overflow" and not result.success and result.lm_calls == 3
    assert sorted(s.call for s in steps) == [1, 2, 3] and "prompt refused" in steps[-1].feedback
    assert (steps[-1].agent, steps[-1].form) == ("retriever", "context_overflow")
    assert result.agent_calls == {"reasoner": 1, "retriever": 2}


def test_weak_isolation_refuses_before_any_lm_call(monkeypatch):
    import lookplangraph.planners.sgrwr.planner as sgrwr_planner

    def weak(cfg):
        raise SandboxUnavailable("only weak isolation (scripted refusal)")
    monkeypatch.setattr(sgrwr_planner, "config_sandbox", weak)
    lm = ScriptedBackend([solution(PLAN)])  # SCRIPTED
    with pytest.raises(SandboxUnavailable, match=r"\[sg_rwr\] require_strong = false") as caught:
        get_planner("sg-rwr").run(apple_task(), GraphEnvironment(apple_task().graph), lm, PlannerConfig())
    assert lm.calls == 0 and isinstance(caught.value, ValueError)  # the CLI reports it as an input error


@needs_sandbox
def test_sandbox_limits_come_from_the_config():
    sb = config_sandbox(PlannerConfig(sg_rwr=SGRwRConfig(code_seconds=2, code_memory_mb=300, output_bytes=999,
                                                        require_strong=False)))
    assert (sb.limits.cpu_seconds, sb.limits.wall_seconds, sb.limits.memory_mb, sb.limits.output_bytes) == (2, 9, 300, 999)
    assert sb.require_strong is False and config_sandbox(PlannerConfig()).require_strong is True
    assert sb is config_sandbox(PlannerConfig(sg_rwr=SGRwRConfig(code_seconds=2, code_memory_mb=300, output_bytes=999,
                                                                require_strong=False)))  # one probe per set of limits


# -- step mode ---------------------------------------------------------------------------------------
@needs_sandbox
def test_step_mode_acts_one_action_at_a_time_on_the_updated_memory():
    seen = "for n in G.predecessors('fridge-1'):\n    print(n, G.nodes[n]['seen'])"
    result, steps, lm = run([
        query("What is inside fridge-1?"), code(seen, marker=""), retrieved("box-1, not seen"),
        act("go_to(kitchen-1)"), act("pick_up(apple-1)"), act("open(fridge-1)"), act("discover_objects(fridge-1)"),
        query("What is inside fridge-1?"), code(seen, marker=""), retrieved("box-1, seen"),
        act("open(box-1)"), act("pick_up(apple-1)"), act("close(box-1)"), act("close(fridge-1)"),
        act("go_to(bedroom-1)"), act("put_on(bed-1)"), act("done()")], sgrwr_mode="step")
    assert result.success and result.termination == "done" and result.failure is None
    assert result.actions == ["go_to(kitchen-1)", "open(fridge-1)", "discover_objects(fridge-1)", "open(box-1)",
                              "pick_up(apple-1)", "close(box-1)", "close(fridge-1)", "go_to(bedroom-1)",
                              "put_on(bed-1)", "done()"]
    assert steps[1].feedback.startswith("Output:\nbox-1 False") and steps[8].feedback.startswith("Output:\nbox-1 True")
    picked = [s for s in steps if s.proposed == "pick_up(apple-1)"]
    assert not picked[0].accepted and "only remembered" in picked[0].feedback  # a prior must be looked at first
    assert picked[0].feedback.endswith("The robot is in kitchen-1 and holds nothing.")
    assert picked[1].accepted and picked[1].feedback == "pick_up(apple-1): done. The robot is in kitchen-1 and holds apple-1."
    assert result.sandbox_runs == 2 and result.agent_calls == {"reasoner": 13, "retriever": 4}
    assert "[Action]" in lm.requests[0]["messages"][0]["content"]


@needs_sandbox
def test_plan_guard_sends_back_plans_and_actions_naming_nodes_no_answer_contained():
    rooms = "print(sorted(n for n in G if G.nodes[n]['layer'] == 'place'))"
    where = "print(sorted(G.predecessors('fridge-1')), list(G.successors('bed-1')))"
    # static: the first plan is guessed (the 1.5B model's way); the guard sends it back, the
    # Reasoner asks, and the same plan is accepted once every name came in an answer
    result, steps, _ = run([solution(PLAN), solution(PLAN), query("Which rooms are there?"), code(rooms, marker=""),
                            retrieved("bedroom-1, kitchen-1"), query("What is in fridge-1, and where is bed-1?"),
                            code(where, marker=""), retrieved("box-1 holds apple-1; fridge-1 holds box-1; bed-1"),
                            solution(PLAN)], sgrwr_plan_guard=True)
    assert steps[0].feedback.startswith("Your plan was not run: it names kitchen-1, fridge-1, box-1, apple-1, "
                                        "bedroom-1, bed-1, which no answer") and not steps[0].accepted
    assert steps[1].feedback == steps[0].feedback  # the refusal quoted the names: they are not learned from it
    assert result.success and result.guard_refusals == 2 and result.agent_calls == {"reasoner": 5, "retriever": 4}
    # off (the paper's guard: code only), the guessed plan runs at once
    result, _, _ = run([solution(PLAN)])
    assert result.success and result.guard_refusals == 0 and result.lm_calls == 1
    # step: a guessed action is not executed, a named room from the robot's feedback is known
    result, steps, _ = run([act("open(fridge-1)"), act("done()")], sgrwr_mode="step", sgrwr_plan_guard=True)
    assert steps[0].feedback.startswith("open(fridge-1) was not run: it names fridge-1") and result.executed == []
    assert result.guard_refusals == 1 and result.actions == ["done()"]


@needs_sandbox
def test_a_repeated_query_on_unchanged_data_gets_its_earlier_answer():
    inside = "print(sorted(G.predecessors('fridge-1')))"
    asked = [query("What is inside fridge-1?"), code(inside, marker=""), retrieved("box-1")]
    # static: the data never changes; the repeat (case and spacing aside) costs no Retriever call
    result, steps, _ = run(asked + [query("what is inside  fridge-1?"), solution(PLAN)], sgrwr_repeat_answers=True)
    assert result.success and result.repeated_queries == 1 and result.agent_calls == {"reasoner": 3, "retriever": 2}
    assert steps[3].accepted and steps[3].feedback == f"{REPEATED}, so the answer is the same (the retriever was not asked again):\nbox-1\n{GO_ON}"
    # off (the paper's way): the Retriever is asked again
    result, steps, _ = run(asked + asked + [solution(PLAN)])
    assert result.repeated_queries == 0 and result.agent_calls == {"reasoner": 3, "retriever": 4}
    assert steps[3].feedback == "Answer from the retriever:\nbox-1"
    # a query that could not be answered is given back as such
    result, steps, _ = run([query("Where is the cat?"), retrieved("on the bed"), query("Where is the cat?"), solution(PLAN)],
                           sgrwr_repeat_answers=True, sgrwr_retriever_turns=1)
    assert result.agent_calls == {"reasoner": 3, "retriever": 1} and not steps[2].accepted
    assert steps[2].feedback == (f"{REPEATED}; it could not be answered then: the retriever found no answer in 1 replies. "
                                 f"{GO_ON}")
    # step: an executed action replaces the data, so the same query goes to the Retriever again
    result, steps, _ = run(asked + [query("What is inside fridge-1?"), act("go_to(kitchen-1)")] + asked + [act("done()")],
                           sgrwr_mode="step", sgrwr_repeat_answers=True)
    assert result.repeated_queries == 1 and result.agent_calls == {"reasoner": 5, "retriever": 4}
    assert result.actions == ["go_to(kitchen-1)", "done()"] and steps[5].feedback == "Answer from the retriever:\nbox-1"


def test_step_mode_ends_at_the_action_and_round_limits():
    result, _, _ = run([act("go_to(kitchen-1)"), act("go_to(bedroom-1)")], sgrwr_mode="step", max_actions=2)
    assert result.termination == "max_actions" and result.failure == "max_actions" and not result.success
    assert result.lm_calls == 2
    result, steps, _ = run([act("fly(kitchen-1)")], sgrwr_mode="step", sgrwr_max_rounds=3)
    assert result.termination == "round_limit" and result.lm_calls == 3 and not any(s.accepted for s in steps)
    result, _, _ = run([f"[Summary]\nnothing to do\n{TERMINATE}"], sgrwr_mode="step")
    assert result.termination == "done" and result.actions == ["done()"]


# -- a real GraSIF task --------------------------------------------------------------------------
OFFICE_PLAN = ["go_to(peters_office-1)", "pick_up(watch-1)", "put_inside(cabinet-6)", "close(cabinet-6)"]


@needs_sandbox
def test_office_task_solved_through_the_retriever_and_judged_by_the_validator():
    task = {t.id: t for t in office.build_tasks()}["office-02"]
    find = ("for n, d in G.nodes(data=True):\n    if d['class'] in ('watch', 'cabinet'):\n"
            "        h = list(G.successors(n))[0]\n        print(n, G.edges[n, h]['relation'], h, d['states'], d['properties'])")
    result, steps, _ = run([
        query("Which watches and cabinets are there, where, and whose?"), code(find, marker=""),
        retrieved("watch-1 (Peter's) lies on desk-6; cabinet-6 (open) is in peters_office-1"),
        code("print(fetch_steps('watch-1'))\nprint(place_steps('inside', 'cabinet-6'))"),
        solution(OFFICE_PLAN)], task=task)
    assert "watch-1 ontop desk-6 [] [\"Peter's\"]" in steps[1].feedback
    assert "cabinet-6 in_room peters_office-1 ['open'] []" in steps[1].feedback
    assert steps[3].feedback == ("Output of your code:\n['go_to(peters_office-1)', 'pick_up(watch-1)']\n"
                                 "['go_to(peters_office-1)', 'put_inside(cabinet-6)']")
    assert result.success and result.precision == 1.0 and result.goal_not_met == []
    report = validate_plan(task.graph, OFFICE_PLAN, task.goal, correct=False)
    assert report.success  # the same verdict from GraSIF's validator without corrections


# -- selectable everywhere -----------------------------------------------------------------------
def test_configs_select_both_modes():
    assert load_settings("configs/table4_sg_rwr.toml", {}).planner_config().sg_rwr.mode == "static"
    s = load_settings("configs/table2_sg_rwr.toml", {})
    assert s.planner == "sg-rwr" and s.dynamic and s.planner_config().sg_rwr.mode == "step"
    with pytest.raises(ValueError, match="sg_rwr.mode"):
        SGRwRConfig(mode="dynamic")


@needs_sandbox
def test_cli_runs_sg_rwr(tmp_path, capsys):
    from grasif.task import save_task

    task_file = tmp_path / "apple.json"
    save_task(apple_task(), task_file)
    out = tmp_path / "run"
    code_ = main(["run", "--planner", "sg-rwr", "--task-file", str(task_file), "--lm", "scripted:" + solution(PLAN),
                  "--out", str(out)])
    printed = capsys.readouterr().out
    assert code_ == 0, printed
    assert "SUCCESS" in printed
    result = json.loads((out / "result.json").read_text())
    assert result["planner"] == "sg-rwr" and result["agent_calls"] == {"reasoner": 1}
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert trace[0]["agent"] == "reasoner" and trace[0]["form"] == "summary"


@needs_sandbox
def test_step_mode_in_a_dynamic_office_queries_the_updated_memory():
    """office-02 with the watch moved (seed 0: desk-6 -> mail_shelf-1): the map says desk-6; looking
    there removes the prior from memory, and the Retriever's next answer reflects that."""
    from sim_adapters.wrappers import DynamicPerturbation

    task = {t.id: t for t in office.build_tasks()}["office-02"]
    env = DynamicPerturbation(GraphEnvironment(task.graph), task.goal, 0, mode="anywhere")
    env.reset()  # the moves are drawn at reset
    assert env.moves == ["watch-1: ontop desk-6 -> ontop mail_shelf-1"]
    find = ("found = [n for n in G if G.nodes[n]['class'] == 'watch']\nprint(found or None)\n"
            "for n in found:\n    h = list(G.successors(n))[0]\n    print(n, G.edges[n, h]['relation'], h, 'seen:', G.nodes[n]['seen'])")
    result, steps, _ = run([
        query("Where is the watch?"), code(find, marker=""), retrieved("watch-1 on desk-6, not seen"),
        act("go_to(peters_office-1)"), act("discover_objects(desk-6)"),
        query("Where is the watch?"), code(find, marker=""), retrieved("None"),
        act("go_to(mail_room-1)"), act("discover_objects(mail_shelf-1)"),
        act("pick_up(watch-1)"), act("go_to(peters_office-1)"), act("put_inside(cabinet-6)"), act("close(cabinet-6)"),
        act("done()")], task=task, env=env, sgrwr_mode="step")
    assert steps[1].feedback.startswith("Output:\n['watch-1']\nwatch-1 ontop desk-6 seen: False")
    looked = next(s for s in steps if s.proposed == "discover_objects(desk-6)")
    assert "not found: watch-1" in looked.observed
    assert steps[6].feedback.startswith("Output:\nNone")  # the memory graph no longer has the watch
    assert result.success and result.termination == "done" and result.moves == env.moves


def test_static_mode_plans_from_the_stale_map_in_a_dynamic_run():
    from sim_adapters.wrappers import DynamicPerturbation

    task = {t.id: t for t in office.build_tasks()}["office-02"]
    env = DynamicPerturbation(GraphEnvironment(task.graph), task.goal, 0, mode="anywhere")
    result, _, _ = run([solution(OFFICE_PLAN)], task=task, env=env)
    assert not result.success and result.failure == "infeasible_step"
    assert result.executed == ["go_to(peters_office-1)"] and result.infeasible[0].startswith("pick_up(watch-1)")
