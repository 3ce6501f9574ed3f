"""The endpoint pool (lookplangraph/lm/pool.py) and evaluation over several endpoints.

The servers here are SCRIPTED stand-ins for OpenAI-compatible LM servers
(lookplangraph/evaluation/scripted_server.py: ground-truth plans replayed, not a language model)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

from grasif import office
from lookplangraph.agent.decide import decide
from lookplangraph.lm.pool import (
    AllEndpointsDown, Endpoint, EndpointDown, EndpointPool, PooledBackend, parse_endpoints, pool_factory,
)
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.evaluation.runner import EpisodeFailed, evaluate, read_results
from lookplangraph.evaluation.scripted_server import ScriptedServer

OPTS = {"backoff": 0.01, "max_retries": 1, "timeout": 5}


@pytest.fixture(scope="module")
def office_tasks():
    return office.build_tasks()


def pool_of(*servers, log=None, **kw):
    lines = [] if log is None else log
    return EndpointPool([Endpoint(s.url, **kw) for s in servers], log=lines.append), lines


def ask(b: PooledBackend):
    return decide(b, "S", "D", None)


def test_parse_endpoints_and_bad_input():
    eps = parse_endpoints("http://a:8000/v1/, http://b:8000/v1", concurrency=4, rate=10)
    assert [e.url for e in eps] == ["http://a:8000/v1", "http://b:8000/v1"]
    assert [(e.concurrency, e.rate) for e in eps] == [(4, 10.0), (4, 10.0)]
    eps = parse_endpoints([{"url": "http://a/v1", "concurrency": 2}, "http://b/v1"], rate=5)
    assert (eps[0].concurrency, eps[0].rate, eps[1].concurrency) == (2, 5.0, None)
    with pytest.raises(ValueError, match="not an http"):
        parse_endpoints("a:8000")
    with pytest.raises(ValueError, match="listed twice"):
        parse_endpoints("http://a/v1,http://a/v1/")
    with pytest.raises(ValueError, match="no endpoints"):
        parse_endpoints(" , ")
    with pytest.raises(ValueError, match="unknown key.*weight"):
        parse_endpoints([{"url": "http://a/v1", "weight": 2}])
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        parse_endpoints("http://a/v1", concurrency=0)
    with pytest.raises(ValueError, match="rate must be a positive"):
        parse_endpoints("http://a/v1", rate=0)
    with pytest.raises(ValueError, match="needs an openai"):
        pool_factory("scripted:x", "http://a/v1")
    with pytest.raises(ValueError, match="not in the backend spec"):
        pool_factory("openai:m@http://a/v1", "http://b/v1")


def test_workers_spread_round_robin_and_stay_bound():
    with ScriptedServer() as a, ScriptedServer() as b, ScriptedServer() as c:
        pool, _ = pool_of(a, b, c)
        workers = [PooledBackend(pool, "scripted", **OPTS) for _ in range(6)]
        for w in workers:
            assert ask(w).action.function_name == "done"
        for w in workers:  # a second request goes where the first went
            ask(w)
        assert (a.requests, b.requests, c.requests) == (4, 4, 4)
        assert [w.endpoint.url for w in workers] == [a.url, b.url, c.url] * 2
        assert workers[0].name == "openai:scripted@pool"
        workers[1].close()  # a freed place is taken first
        late = PooledBackend(pool, "scripted", **OPTS)
        ask(late)
        assert late.endpoint.url == b.url


def test_concurrency_limit_caps_requests_in_flight():
    with ScriptedServer(delay=0.15) as a:
        pool, _ = pool_of(a, concurrency=2)
        workers = [PooledBackend(pool, "scripted", **OPTS) for _ in range(6)]
        threads = [threading.Thread(target=ask, args=(w,)) for w in workers]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
    assert a.requests == 6 and a.max_in_flight == 2
    assert elapsed >= 3 * 0.15 - 0.02  # six requests, two at a time


def test_rate_limit_paces_request_starts():
    with ScriptedServer() as a:
        pool, _ = pool_of(a, rate=20.0)
        workers = [PooledBackend(pool, "scripted", **OPTS) for _ in range(3)]

        def four(w):
            for _ in range(4):
                ask(w)

        threads = [threading.Thread(target=four, args=(w,)) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    starts = sorted(a.starts)
    assert len(starts) == 12
    # 20 requests/s: starts 50 ms apart at the client; the server sees them with some jitter
    # (on a loaded machine ~0.05 s: one request seen late shortens the whole span), so look at
    # five gaps at a time. Unpaced, the 12 requests take a few ms each, far below either bound.
    spans = [b - a for a, b in zip(starts, starts[5:])]
    assert min(spans) >= 5 * 0.05 - 0.05
    assert starts[-1] - starts[0] >= 11 * 0.05 - 0.1


def test_dead_endpoint_is_taken_out_and_the_worker_moves():
    with ScriptedServer() as a, ScriptedServer() as b:
        log: list[str] = []
        pool, _ = pool_of(a, b, log=log)
        wa, wb = PooledBackend(pool, "scripted", **OPTS), PooledBackend(pool, "scripted", **OPTS)
        ask(wa), ask(wb)
        assert (wa.endpoint.url, wb.endpoint.url) == (a.url, b.url)
        b.kill()
        with pytest.raises(EndpointDown) as ei:
            ask(wb)
        assert ei.value.url == b.url
        assert [e.url for e in pool.alive()] == [a.url]
        assert len(log) == 1 and b.url in log[0] and "taken out of rotation" in log[0] and "1 of 2" in log[0]
        assert ask(wb).action.function_name == "done" and wb.endpoint.url == a.url
        assert a.requests == 2


def test_repeated_failures_take_an_endpoint_out_and_a_success_resets_the_count():
    with ScriptedServer(fail_after=10**9) as a:
        pool, log = pool_of(a)
        ep = pool.endpoints[0]
        assert not pool.failed(ep, "HTTP 503") and ep.alive
        pool.succeeded(ep)
        assert not pool.failed(ep, "HTTP 503") and ep.alive  # the count started again
        assert pool.failed(ep, "HTTP 503") and not ep.alive  # two in a row (max_failures=2)
        assert "2 failed requests in a row" in log[0]
        assert pool.failed(ep, "again") and len(log) == 1  # logged once


def test_all_endpoints_dead_is_a_clear_error():
    with ScriptedServer() as a, ScriptedServer() as b:
        pool, log = pool_of(a, b)
        w = PooledBackend(pool, "scripted", **OPTS)
        ask(w)
        a.kill(), b.kill()
        with pytest.raises(EndpointDown):
            ask(w)  # its endpoint (a) fails
        with pytest.raises(EndpointDown):
            ask(w)  # moved to b, which fails too
        with pytest.raises(AllEndpointsDown) as ei:
            ask(w)
        assert a.url in str(ei.value) and b.url in str(ei.value) and "out of rotation" in str(ei.value)
        assert len(log) == 2


def test_workers_retrying_a_dead_endpoint_give_up_when_it_is_taken_out():
    with ScriptedServer() as a:
        pool, _ = pool_of(a)
        slow = PooledBackend(pool, "scripted", backoff=30.0, max_retries=6, timeout=5)
        ask(slow)
        a.kill()
        # another worker takes the endpoint out while this one waits 30 s for its first retry; the
        # wait is cut short, so only the first attempt was made (not 7, with 30 s of backoff each)
        threading.Timer(0.3, pool.failed, (pool.endpoints[0], "taken out by another worker", True)).start()
        with pytest.raises(EndpointDown) as ei:
            ask(slow)
        assert "given up" in str(ei.value) and "after 1 attempts" in str(ei.value)


def test_evaluation_survives_an_endpoint_dying_mid_run(tmp_path, office_tasks):
    tasks = office_tasks[:12]
    lines: list[str] = []
    with ScriptedServer(tasks) as a, ScriptedServer(tasks, fail_after=15) as b:
        factory = pool_factory("openai:scripted", [a.url, b.url], OPTS, log=lines.append)
        rows = evaluate(tasks, factory, PlannerConfig(), tmp_path, concurrency=4, log=lines.append)
    assert b.dead and b.requests >= 15  # it died on its 15th (another may have been on its way)
    ids = [r["task_id"] for r in read_results(tmp_path / "results.jsonl")]
    assert sorted(ids) == sorted(t.id for t in tasks) and len(ids) == len(set(ids))
    assert all(r["success"] for r in rows)  # the script is the ground truth: every rerun episode ends well
    rerun = [r for r in rows if r.get("attempts", 1) > 1]
    assert rerun and all(r["attempts"] == 2 for r in rerun)
    assert any("taken out of rotation" in line and b.url in line for line in lines)
    assert any("running it again from the start" in line for line in lines)
    traces = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert traces == sorted(f"office__{t.id}.jsonl" for t in tasks)  # no partial trace left
    for r in rerun:  # a rerun's trace holds that attempt only: one record per LM call of the row
        trace = (tmp_path / "traces" / f"office__{r['task_id']}.jsonl").read_text().splitlines()
        assert len(trace) == r["lm_calls"] and [json.loads(x)["call"] for x in trace] == list(range(1, len(trace) + 1))


def test_evaluation_stops_when_every_endpoint_is_dead_and_keeps_finished_rows(tmp_path, office_tasks):
    tasks = office_tasks[:12]
    with ScriptedServer(tasks, fail_after=20) as a, ScriptedServer(tasks, fail_after=20) as b:
        factory = pool_factory("openai:scripted", [a.url, b.url], OPTS, log=lambda line: None)
        with pytest.raises((AllEndpointsDown, EpisodeFailed)) as ei:
            evaluate(tasks, factory, PlannerConfig(), tmp_path, concurrency=3, log=lambda line: None)
    assert "out of rotation" in str(ei.value) or "lost its LM endpoint" in str(ei.value)
    text = (tmp_path / "results.jsonl").read_text() if (tmp_path / "results.jsonl").exists() else ""
    rows = [json.loads(line) for line in text.splitlines()]  # every line whole
    ids = [r["task_id"] for r in rows]
    assert 0 < len(ids) < len(tasks) and len(ids) == len(set(ids))
    assert all(r["success"] for r in rows)
    # resuming against a live endpoint finishes the rest and repeats nothing
    with ScriptedServer(tasks) as c:
        factory = pool_factory("openai:scripted", [c.url], OPTS)
        rows = evaluate(tasks, factory, PlannerConfig(), tmp_path, concurrency=3)
    ids = [r["task_id"] for r in read_results(tmp_path / "results.jsonl")]
    assert sorted(ids) == sorted(t.id for t in tasks) and len(rows) == len(tasks)
    assert not list(Path(tmp_path / "traces").glob("*.partial"))


def test_cli_eval_over_endpoints_reruns_from_the_reply_cache(tmp_path, office_tasks, capsys):
    """``eval --endpoints`` with ``--cache``: an episode rerun after its endpoint died replays the
    replies it had already got from the cache, so no prompt is sent twice."""
    from lookplangraph.cli import main

    config = tmp_path / "fast_retries.toml"
    config.write_text("lm_options = { backoff = 0.01, max_retries = 1 }\n")
    out = tmp_path / "out"
    with ScriptedServer(office_tasks) as a, ScriptedServer(office_tasks, fail_after=15) as b:
        args = ["eval", "--config", str(config), "--split", "office", "--data-dir", str(tmp_path / "data"),
                "--limit", "12", "--lm", "openai:scripted", "--endpoints", f"{a.url},{b.url}", "--concurrency", "4",
                "--endpoint-concurrency", "8", "--cache", "--out", str(out)]
        assert main(args) == 0
    err = capsys.readouterr().err
    assert f"endpoint {b.url} taken out of rotation" in err and "running it again from the start" in err
    rows = read_results(out / "results.jsonl")
    assert len(rows) == len({r["task_id"] for r in rows}) == 12 and all(r["success"] for r in rows)
    assert any(r.get("attempts") == 2 for r in rows) and {r["lm"] for r in rows} == {"openai:scripted@pool"}
    answered = a.answered + b.answered  # b died on its 15th request (and cut those in flight)
    keys = [json.loads(line)["key"] for line in (out / "lm_cache.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == answered  # every prompt was sent once, reruns included
    assert json.loads((out / "config.json").read_text())["endpoints"] == f"{a.url},{b.url}"
    with ScriptedServer(office_tasks) as c:  # bad input is named
        assert main(["eval", "--split", "office", "--data-dir", str(tmp_path / "data"), "--limit", "1",
                     "--lm", f"openai:scripted@{c.url}", "--endpoints", c.url, "--out", str(tmp_path / "bad")]) == 2
    assert "not in the backend spec" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# Worker processes (evaluate(processes=P)): the pool's state is shared across them.
# ------------------------------------------------------------------------------------------

def test_endpoint_limits_hold_across_worker_processes(tmp_path, office_tasks):
    tasks = office_tasks[:8]
    with ScriptedServer(tasks, delay=0.05) as a:
        factory = pool_factory("openai:scripted", [a.url], OPTS, concurrency=2)
        rows = evaluate(tasks, factory, PlannerConfig(), tmp_path, concurrency=6, processes=3)
    assert len(rows) == 8 and all(r["success"] for r in rows)
    # six workers in three processes, one request slot pair between them all
    assert a.max_in_flight == 2 and a.requests == sum(r["lm_calls"] for r in rows)


def test_worker_processes_survive_an_endpoint_dying_mid_run(tmp_path, office_tasks, capfd):
    tasks = office_tasks[:12]
    lines: list[str] = []
    with ScriptedServer(tasks) as a, ScriptedServer(tasks, fail_after=15) as b:
        factory = pool_factory("openai:scripted", [a.url, b.url], OPTS)
        rows = evaluate(tasks, factory, PlannerConfig(), tmp_path, concurrency=4, processes=2, log=lines.append)
    assert b.dead and b.requests >= 15
    ids = [r["task_id"] for r in read_results(tmp_path / "results.jsonl")]
    assert sorted(ids) == sorted(t.id for t in tasks) and len(ids) == len(set(ids))
    assert all(r["success"] for r in rows)
    rerun = [r for r in rows if r.get("attempts", 1) > 1]
    assert rerun and all(r["attempts"] == 2 for r in rerun)
    assert any("running it again from the start" in line for line in lines)  # the workers' lines reach the writer
    err = capfd.readouterr().err  # the pool logs in the process that saw the failure
    assert err.count(f"endpoint {b.url} taken out of rotation") == 1  # once, whichever process saw it first
    assert not list((tmp_path / "traces").glob("*.partial"))


def test_worker_processes_need_picklable_factories(tmp_path, office_tasks):
    with pytest.raises(ValueError, match="picklable"):
        evaluate(office_tasks[:4], lambda: None, PlannerConfig(), tmp_path, concurrency=2, processes=2)
    assert read_results(tmp_path / "results.jsonl") == []  # nothing ran, nothing half-written


def test_two_real_llama_cpp_servers_one_killed_mid_run(tmp_path, office_tasks, small_model_path, capfd):
    """REAL model: two llama.cpp server processes (the 0.5B model) as the endpoints of an
    evaluation in two worker processes; the first is killed once the first episode is written.
    Every episode ends once, with a verdict, and the episodes it was serving run again on the other."""
    from tests.conftest import llama_server_process

    tasks = office_tasks[:4]
    # A short prompt, and episodes of one decision each (an accepted action ends one at the action
    # limit, a refused or unreadable reply as unresolved): the CPU's time goes to the run. What is
    # checked is the pool's and the rerun's, not the episodes' length: when the first row is written,
    # the worker bound to the first server is inside a decision or about to start one of the two
    # episodes not yet begun, and either way its request fails on the killed server, so an episode
    # runs again on the other, as with longer episodes.
    cfg = PlannerConfig(max_actions=1, max_unresolved=1, system_prompt="compact")
    with llama_server_process(small_model_path, tmp_path / "a.log", 1) as (a, url_a), \
            llama_server_process(small_model_path, tmp_path / "b.log", 1) as (_, url_b):
        factory = pool_factory("openai:qwen-0.5b", [url_a, url_b],
                               {"structured": "json_object", "backoff": 0.05, "max_retries": 1, "timeout": 120})
        box: dict = {}
        lines: list[str] = []
        run = threading.Thread(target=lambda: box.update(rows=evaluate(
            tasks, factory, cfg, tmp_path / "out", concurrency=2, processes=2, log=lines.append)))
        run.start()
        results = tmp_path / "out" / "results.jsonl"
        while run.is_alive() and not read_results(results):
            time.sleep(0.1)
        a.kill()  # SIGKILL: the server is gone mid-run, with episodes left to run
        run.join(timeout=600)
    assert not run.is_alive() and "rows" in box
    rows = read_results(results)
    assert sorted(r["task_id"] for r in rows) == sorted(t.id for t in tasks)  # each once
    assert all(r["termination"] in ("done", "max_actions", "unresolved") and isinstance(r["success"], bool)
               for r in rows)
    assert any(r.get("attempts", 1) == 2 for r in rows)  # what ran on the killed server ran again
    assert {r["lm"] for r in rows} == {"openai:qwen-0.5b@pool"}
    assert f"endpoint {url_a} taken out of rotation" in capfd.readouterr().err
    assert any("running it again from the start" in line for line in lines)
