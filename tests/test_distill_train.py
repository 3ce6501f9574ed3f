"""``distill train`` end to end on the CPU: a tiny randomly initialised Qwen2 model (2 layers,
made here, with the real Qwen2.5 tokenizer and chat template copied from the embedded 0.5B GGUF)
goes through the expert's data -> LoRA training steps -> GGUF LoRA export -> llama.cpp loading
the unchanged base with the adapter -> a constrained decode. The tiny model knows nothing; what
is checked is the pipeline: the answer loss falls, a run resumes from its checkpoint, and
llama.cpp with the exported adapter computes the logits PEFT computes.

Needs the ``distill`` extra (torch, transformers, peft, gguf, accelerate) and llama-cpp-python
with the 0.5B model parts; skipped, saying which is missing, without them."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the distill extra is not installed: pip install -e '.[distill]'")
pytest.importorskip("transformers", reason="the distill extra is not installed: pip install -e '.[distill]'")
pytest.importorskip("peft", reason="the distill extra is not installed: pip install -e '.[distill]'")
gguf = pytest.importorskip("gguf", reason="the distill extra is not installed: pip install -e '.[distill]'")

from grasif import heldout  # noqa: E402
from lookplangraph.agent.decoding import action_schema  # noqa: E402
from lookplangraph.distill.planning.trajectories import build_data  # noqa: E402
from lookplangraph.lm import LMError, make_backend  # noqa: E402
from lookplangraph.lm.embedded import sha256_file  # noqa: E402
from lookplangraph.lm.llamacpp import load_llama  # noqa: E402
from lookplangraph.lm.lora import read_adapter, read_header  # noqa: E402
from lookplangraph.distill.training import answer_logits, gguf_lora, lineage, sft  # noqa: E402

LAYERS, HIDDEN = 2, 64


def tokenizer_fields(source, keep: int = 4096) -> tuple[dict[str, tuple], int]:
    """The ``tokenizer.*`` fields of the GGUF ``source`` as ``{key: (value, type, sub_type)}``,
    with the vocabulary cut to its first ``keep`` tokens plus its special tokens (renumbered after
    them) and the merges among the kept tokens. A BPE vocabulary lists tokens in merge order, so
    the cut one is the real tokenizer with fewer merges: fewer logits to train over on a CPU."""
    reader = gguf.GGUFReader(str(source))
    fields = {f.name: (f.contents(), f.types[0], f.types[1] if len(f.types) > 1 else None)
              for f in reader.fields.values() if f.name.startswith("tokenizer.")}
    tokens, token_types = fields["tokenizer.ggml.tokens"][0], fields["tokenizer.ggml.token_type"][0]
    special = [i for i, t in enumerate(token_types) if t != 1 and i >= keep]
    old_ids = list(range(keep)) + special
    new_id = {old: new for new, old in enumerate(old_ids)}
    kept = {tokens[i] for i in old_ids}
    merges = [m for m in fields["tokenizer.ggml.merges"][0]
              if (lambda a, b: a in kept and b in kept and a + b in kept)(*m.split(" ", 1))]
    fields["tokenizer.ggml.tokens"] = ([tokens[i] for i in old_ids], *fields["tokenizer.ggml.tokens"][1:])
    fields["tokenizer.ggml.token_type"] = ([token_types[i] for i in old_ids], *fields["tokenizer.ggml.token_type"][1:])
    fields["tokenizer.ggml.merges"] = (merges, *fields["tokenizer.ggml.merges"][1:])
    for key in ("bos_token_id", "eos_token_id", "padding_token_id"):
        key = "tokenizer.ggml." + key
        if key in fields:
            fields[key] = (new_id[fields[key][0]], *fields[key][1:])
    return fields, len(old_ids)


def write_tiny_qwen2(path, tokenizer_source, seed: int = 0):
    """A randomly initialised 2-layer Qwen2 as an f32 GGUF with the tokenizer and chat template
    of ``tokenizer_source`` (cut: :func:`tokenizer_fields`). Test fixture, not a converter."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    fields, n_vocab = tokenizer_fields(tokenizer_source)
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=n_vocab, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=LAYERS,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True)
    model = Qwen2ForCausalLM(config)
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name("tiny random qwen2 (test)")
    w.add_context_length(4096)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(2 * HIDDEN)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    for key, (value, vtype, sub_type) in fields.items():
        w.add_key_value(key, value, vtype, **({"sub_type": sub_type} if sub_type is not None else {}))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, LAYERS)
    for key, value in model.state_dict().items():
        if key != "lm_head.weight":  # tied to the embedding
            w.add_tensor(names.get_name(key, try_suffixes=(".weight", ".bias")), value.detach().float().numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def tiny_base(small_model_path, tmp_path_factory):
    return write_tiny_qwen2(tmp_path_factory.mktemp("tiny") / "tiny-qwen2.gguf", small_model_path)


@pytest.fixture(scope="module")
def data(split_tasks, tmp_path_factory):
    tasks = split_tasks("virtualhome")
    pool = [t for t in tasks if heldout.in_train_pool(t.split, t.id)][:1]
    built = tmp_path_factory.mktemp("sft")
    counts = build_data(pool, built, seeds=[None], augmentations=())
    assert counts.examples >= 2
    # The examples as built, less their system message (the planner's fixed instructions, two
    # thirds of the tokens): the user turn and the expert's answer are enough to exercise the
    # pipeline, and a third of the sequence is a third of the CPU time over a 151,936-token vocabulary.
    out = tmp_path_factory.mktemp("sft_short")
    lines = [json.loads(x) for x in (built / "sft.jsonl").read_text().splitlines()]
    assert all(ex["messages"][0]["role"] == "system" for ex in lines)
    (out / "sft.jsonl").write_text("".join(json.dumps({**ex, "messages": ex["messages"][1:]}) + "\n" for ex in lines))
    return out


CONFIG = dict(rank=4, alpha=8.0, learning_rate=2e-2, batch_size=1, grad_accum=1, examples=2, save_steps=10,
              logging_steps=1, warmup_ratio=0.0, seed=0)


@pytest.fixture(scope="module")
def trained(tiny_base, data, tmp_path_factory):
    """Ten steps, then the same run resumed from its checkpoint to twenty."""
    out = tmp_path_factory.mktemp("lora")
    first = sft.train(data, tiny_base, out, sft.TrainConfig(max_steps=10, **CONFIG), log=lambda _: None)
    second = sft.train(data, tiny_base, out, sft.TrainConfig(max_steps=20, **CONFIG), log=lambda _: None)
    return out, first, second


def test_training_lowers_the_answer_loss_and_resumes_from_its_checkpoint(trained):
    out, first, second = trained
    assert first.steps == 10 and second.steps == 20 and not second.stopped_by_time
    assert (out / "checkpoints" / "checkpoint-10").is_dir() and (out / "checkpoints" / "checkpoint-20").is_dir()
    with open(out / "loss.csv") as f:
        rows = [(int(r["step"]), float(r["loss"])) for r in csv.DictReader(f)]
    assert [s for s, _ in rows] == list(range(1, 21))  # the resumed run kept the first run's log
    last = sum(loss for _, loss in rows[-4:]) / 4
    assert last < rows[0][1] - 0.3, rows  # the answer-token loss falls (8.45 -> 7.87 when written)
    record = json.loads((out / "train.json").read_text())
    assert record["steps"] == 20 and record["lora_pairs"] == LAYERS * 7 and record["answer_tokens"] > 0
    assert record["prompt_tokens"] > 10 * record["answer_tokens"]  # the prompt is masked, not trained
    assert (out / "loss.png").stat().st_size > 0


def test_a_resumed_run_refuses_other_settings(trained, tiny_base, data):
    out, _, _ = trained
    with pytest.raises(sft.TrainError, match="config.rank"):
        sft.train(data, tiny_base, out, sft.TrainConfig(max_steps=20, **{**CONFIG, "rank": 8}), log=lambda _: None)


def test_the_time_schedule_warms_up_then_falls_to_zero_over_the_time_limit():
    lrs = [sft.time_schedule_lr(1e-3, f / 100, 0.1) for f in range(101)]
    assert lrs[0] == pytest.approx(1e-5) and lrs[10] == pytest.approx(1e-3)  # warm-up to the peak
    assert lrs[5] < lrs[10] and all(a >= b for a, b in zip(lrs[10:], lrs[11:]))  # then only down
    assert lrs[100] == pytest.approx(0.0, abs=1e-12) and sft.time_schedule_lr(1e-3, 3.0, 0.1) == lrs[100]
    with pytest.raises(sft.TrainError, match="needs max_minutes"):
        sft.TrainConfig(lr_schedule="time").check()
    with pytest.raises(sft.TrainError, match="lr_schedule"):
        sft.TrainConfig(lr_schedule="linear").check()


def test_a_time_limited_run_follows_the_time_schedule(tiny_base, data, tmp_path, monkeypatch):
    class Clock:
        """sft's clock, advanced one second per reading (the schedule reads it before each step, the
        time limit after): the run's length in steps is the same on every machine."""

        now = 0.0

        def monotonic(self):
            self.now += 1.0
            return self.now

    monkeypatch.setattr(sft, "time", Clock())
    config = sft.TrainConfig(**{**CONFIG, "logging_steps": 1}, max_steps=100_000, max_minutes=0.2, lr_schedule="time")
    report = sft.train(data, tiny_base, tmp_path, config, log=lambda _: None)
    assert report.stopped_by_time and report.steps == 7  # 12 s at 2 clock readings per step, the last one past the limit
    with open(tmp_path / "loss.csv") as f:
        lrs = [float(r["learning_rate"]) for r in csv.DictReader(f)]
    peak = CONFIG["learning_rate"]
    expected = [sft.time_schedule_lr(peak, (2 * k + 1) / 12, 0.0) for k in range(7)]
    assert lrs == pytest.approx(expected)  # the Trainer logs the time schedule's rates, not its constant peak
    assert lrs[-1] < 0.1 * peak


class PoisonGradients:
    """A trainer callback (test harness) that makes every LoRA gradient NaN in the optimizer
    steps it is given, the way one overflowing batch does after clipping."""

    def __init__(self, steps):
        from transformers import TrainerCallback

        self.steps, self.hooks = set(steps), []
        outer = self

        class Callback(TrainerCallback):
            def on_step_begin(self, args, state, control, model=None, **kwargs):
                if state.global_step + 1 in outer.steps:
                    outer.hooks = [p.register_hook(lambda g: g * float("nan"))
                                   for p in model.parameters() if p.requires_grad]
                return control

            def on_step_end(self, args, state, control, **kwargs):
                for h in outer.hooks:
                    h.remove()
                outer.hooks = []
                return control

        self.callback = Callback()


def test_a_step_with_non_finite_gradients_is_skipped_and_the_adapter_stays_finite(tiny_base, data, tmp_path):
    config = sft.TrainConfig(**CONFIG, max_steps=6)
    report = sft.train(data, tiny_base, tmp_path, config, log=lambda _: None, callbacks=[PoisonGradients({3}).callback])
    assert report.steps == 6 and report.skipped_steps == [3]
    assert json.loads((tmp_path / "train.json").read_text())["skipped_steps"] == [3]
    reader = gguf.GGUFReader(str(report.adapter_gguf))
    assert all(np.isfinite(np.asarray(t.data, dtype=np.float32)).all() for t in reader.tensors)


def test_a_run_whose_gradients_keep_failing_stops_and_exports_nothing(tiny_base, data, tmp_path):
    config = sft.TrainConfig(**CONFIG, max_steps=50)
    with pytest.raises(sft.TrainError, match=r"diverged: 3 of 4 optimizer steps had non-finite gradients \(steps \[2, 3, 4\]"):
        sft.train(data, tiny_base, tmp_path, config, log=lambda _: None, callbacks=[PoisonGradients({2, 3, 4, 5}).callback])
    assert not (tmp_path / "adapter.gguf").exists() and (tmp_path / "loss.csv").is_file()
    assert (tmp_path / "checkpoints" / "checkpoint-4").is_dir()  # a rerun (say with --attention eager) goes on from it
    again = sft.train(data, tiny_base, tmp_path, sft.TrainConfig(**CONFIG, max_steps=6, attention="eager"), log=lambda _: None)
    assert again.steps == 6 and again.skipped_steps == [] and again.adapter_gguf.is_file()


class StepLog:
    """A trainer callback (test harness): records each optimizer step's tokens (the data it trained)
    and stops the run after ``stop_after`` steps, as a machine taken away mid-run would."""

    def __init__(self, stop_after: int | None = None):
        from transformers import TrainerCallback

        self.tokens: dict[int, int] = {}
        outer, seen = self, {"last": 0}

        class Callback(TrainerCallback):
            def on_train_begin(self, args, state, control, **kwargs):
                seen["last"] = state.num_input_tokens_seen
                return control

            def on_step_end(self, args, state, control, **kwargs):
                outer.tokens[state.global_step] = state.num_input_tokens_seen - seen["last"]
                seen["last"] = state.num_input_tokens_seen
                if stop_after is not None and state.global_step >= stop_after:
                    control.should_training_stop = True
                return control

        self.callback = Callback()


def _steps(out):
    with open(out / "loss.csv") as f:
        return {int(r["step"]): (float(r["loss"]), float(r["learning_rate"])) for r in csv.DictReader(f)}


def test_a_run_whose_checkpoints_are_lost_goes_on_from_its_adapter_at_the_step_it_reached(tiny_base, data, tmp_path):
    """``start_step``: a run stopped after 2 of 5 steps, its checkpoints gone, goes on from its
    exported adapter with the uninterrupted run's examples (tokens per step) and learning rates
    at steps 3 to 5, and its first loss is the uninterrupted run's at step 3 (same weights, up
    to the adapter file's float16, far less than a step's change; no dropout, whose masks the
    lost run's random state drew)."""
    config = {**CONFIG, "examples": None, "learning_rate": 5e-3, "dropout": 0.0}
    whole, cut, rest = StepLog(), StepLog(stop_after=2), StepLog()
    sft.train(data, tiny_base, tmp_path / "whole", sft.TrainConfig(max_steps=5, **config), log=lambda _: None,
              callbacks=[whole.callback])
    stopped = sft.train(data, tiny_base, tmp_path / "cut", sft.TrainConfig(max_steps=5, **config), log=lambda _: None,
                        callbacks=[cut.callback])
    assert stopped.steps == 2
    lines = []
    going_on = sft.train(data, tiny_base, tmp_path / "rest",
                         sft.TrainConfig(max_steps=5, init_adapter=str(stopped.adapter_gguf), start_step=2, **config),
                         log=lines.append, callbacks=[rest.callback])
    assert going_on.steps == 5 and any("going on from step 2" in x for x in lines)
    assert len(set(whole.tokens.values())) > 1, whole.tokens  # the examples differ: their order shows in the tokens
    assert rest.tokens == {k: v for k, v in whole.tokens.items() if k > 2}
    a, b = _steps(tmp_path / "whole"), _steps(tmp_path / "rest")
    assert sorted(b) == [3, 4, 5]
    for step in (3, 4, 5):
        assert b[step][1] == pytest.approx(a[step][1], rel=1e-6)
    # the weights are the lost run's after step 2: a step moves the loss by ~0.05 here, float16 by ~0.003
    assert abs(b[3][0] - a[3][0]) < min(a[2][0] - a[3][0], a[3][0] - a[4][0]) / 5, (a, b)
    assert json.loads((tmp_path / "rest" / "train.json").read_text())["config"]["start_step"] == 2

    with pytest.raises(sft.TrainError, match="needs init_adapter"):
        sft.train(data, tiny_base, tmp_path / "x", sft.TrainConfig(max_steps=5, start_step=2, **config))
    with pytest.raises(sft.TrainError, match="leaves nothing to train"):
        sft.train(data, tiny_base, tmp_path / "y", sft.TrainConfig(max_steps=5, start_step=5,
                                                                    init_adapter=str(stopped.adapter_gguf), **config))
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_llama_cpp_applies_the_exported_adapter_as_peft_does(trained, tiny_base):
    from peft import PeftModel

    out, _, _ = trained
    adapter = out / "adapter.gguf"
    reader = gguf.GGUFReader(str(adapter))
    assert reader.get_field("general.type").contents() == "adapter"
    assert reader.get_field("adapter.type").contents() == "lora"
    assert reader.get_field("adapter.lora.alpha").contents() == pytest.approx(8.0)
    names = {t.name for t in reader.tensors}
    assert {"blk.0.attn_q.weight.lora_a", "blk.1.ffn_down.weight.lora_b"} <= names and len(names) == 2 * LAYERS * 7

    model, tokenizer = sft.load_base(tiny_base, torch.float32)
    messages = [{"role": "system", "content": "You plan."}, {"role": "user", "content": "Put the mug on the table."}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + '{"function_name": "'
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        hf_base = model(torch.tensor([ids])).logits[0].numpy()
        peft_model = PeftModel.from_pretrained(model, str(out / "adapter")).eval()
        hf_lora = peft_model(torch.tensor([ids])).logits[0].numpy()

    def llama_logits(**kw):
        llm = load_llama(tiny_base, logits_all=True, n_ctx=512, n_threads=1, verbose=False, **kw)
        assert llm.tokenize(text.encode(), add_bos=False, special=True) == ids  # one tokenizer on both sides
        llm.eval(ids)
        return np.array(llm.scores[: len(ids)])

    cpp_base, cpp_lora = llama_logits(), llama_logits(lora_path=str(adapter))
    change = np.abs(hf_lora - hf_base).max()
    assert change > 1e-2  # training moved the model
    assert np.abs(cpp_base - hf_base).max() < 1e-3
    assert np.abs(cpp_lora - hf_lora).max() < 0.05 * change  # f16 adapter: small rounding, same update


def test_a_spec_with_the_adapter_decodes_under_the_grammar(trained, tiny_base):
    out, _, _ = trained
    names = ["kitchen", "mug_1", "table_2"]
    lm = make_backend(f"llamacpp:{tiny_base}+{out / 'adapter.gguf'}", n_ctx=4096, n_threads=1, max_tokens=80)
    try:
        assert lm.name.endswith("+" + str(out / "adapter.gguf"))
        reply = lm.complete([{"role": "user", "content": "Put the mug on the table."}],
                            schema=action_schema(names, reason_max_length=20))
    finally:
        lm.close()
    action = json.loads(reply.text)
    assert list(action) == ["function_name", "node", "relation", "destination", "reason"]
    assert action["node"] in names + [None] and action["destination"] in names + [None]


def test_export_refuses_a_wrong_base_and_unexportable_variants(trained, small_model_path, tmp_path):
    out, _, _ = trained
    with pytest.raises(gguf_lora.ExportError, match="wrong base"):
        gguf_lora.export_lora(out / "adapter", small_model_path, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists() and not (tmp_path / "x.gguf.part").exists()
    rs = tmp_path / "rslora"
    rs.mkdir()
    (rs / "adapter_model.safetensors").write_bytes((out / "adapter" / "adapter_model.safetensors").read_bytes())
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    (rs / "adapter_config.json").write_text(json.dumps({**config, "use_rslora": True}))
    with pytest.raises(gguf_lora.ExportError, match="rsLoRA"):
        gguf_lora.export_lora(rs, small_model_path, tmp_path / "y.gguf")


def test_an_unknown_adapter_is_named_in_the_error(small_model_path):
    with pytest.raises(LMError, match="no adapter 'nope' shipped for 'qwen2.5-coder-0.5b'"):
        make_backend("llamacpp:qwen2.5-coder-0.5b+nope")


def test_bfloat16_trains_on_a_cpu_and_float16_is_refused_there(tiny_base, data, tmp_path, monkeypatch):
    """On a machine without a GPU, bfloat16 runs through the Trainer's CPU path (``use_cpu``),
    with a note where the CPU has no bfloat16 instructions, and the run goes on in float32 from
    its checkpoint; float16 cannot run there and says so before anything loads."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the CPU path is not the one taken")
    monkeypatch.setattr(sft, "cpu_has_native_bfloat16", lambda: False)
    lines: list[str] = []
    done = sft.train(data, tiny_base, tmp_path / "bf16", sft.TrainConfig(max_steps=2, dtype="bfloat16", **CONFIG),
                     log=lines.append)
    record = json.loads((tmp_path / "bf16" / "train.json").read_text())
    assert done.steps == 2 and record["config"]["dtype"] == "bfloat16" and record["dtype_used"] == "bfloat16"
    assert any(line.startswith("note: this CPU has no bfloat16 matrix instructions") for line in lines), lines
    again = sft.train(data, tiny_base, tmp_path / "bf16", sft.TrainConfig(max_steps=4, dtype="float32", **CONFIG),
                      log=lambda _: None)
    record = json.loads((tmp_path / "bf16" / "train.json").read_text())
    assert again.steps == 4 and record["dtype_used"] == "float32" and len(record["skipped_steps"]) == 0
    with pytest.raises(sft.TrainError, match="float16 needs a GPU"):
        sft.train(data, tiny_base, tmp_path / "fp16", sft.TrainConfig(max_steps=2, dtype="float16", **CONFIG),
                  log=lambda _: None)


def test_missing_data_is_refused_before_the_output_directory_is_made(tmp_path):
    with pytest.raises(sft.TrainError, match="no training data at"):
        sft.train(tmp_path / "nowhere", tmp_path / "base.gguf", tmp_path / "run", sft.TrainConfig(max_steps=1),
                  log=lambda _: None)
    assert not (tmp_path / "run").exists()


def test_a_mix_trains_with_its_own_system_messages_and_records_the_planning_one(tiny_base, data, tmp_path):
    """A mix (``distill mix``) holds its final system messages: training keeps them, records the
    planning examples' one in the adapter whatever example comes first, and refuses to replace
    them with another."""
    from lookplangraph.distill.training import mix

    planning = tmp_path / "planning"
    planning.mkdir()
    (planning / "sft.jsonl").write_text((data / "sft.jsonl").read_text())
    (planning / "counts.json").write_text(json.dumps({"prompt_layout": "history-scene", "answer_format": "action",
                                                      "recall": "named"}))
    cypher = tmp_path / "cypher"
    cypher.mkdir()
    (cypher / "sft.jsonl").write_text(json.dumps({"messages": [
        {"role": "system", "content": "Q"}, {"role": "user", "content": "How many rooms?"},
        {"role": "assistant", "content": "3"}], "meta": {"source": "cypher-gold"}}) + "\n")
    (cypher / "counts.json").write_text(json.dumps({"kind": "cypher", "questions": 1}))
    mixed = tmp_path / "mix"
    mix.mix([mix.Take(cypher), mix.Take(planning, 2)], mixed, system="P", system_name="compact")
    with pytest.raises(sft.TrainError, match="final system messages"):
        sft.train(mixed, tiny_base, tmp_path / "other", sft.TrainConfig(max_steps=1, system="other", **CONFIG),
                  log=lambda _: None)
    done = sft.train(mixed, tiny_base, tmp_path / "lora", sft.TrainConfig(max_steps=2, **{**CONFIG, "examples": 3}),
                     log=lambda _: None)
    info = read_adapter(done.adapter_gguf)
    assert info.metadata["lookplangraph.system_prompt"] == "P"
    assert info.system_prompt_name == "compact" and info.metadata["lookplangraph.prompt_layout"] == "history-scene"
    assert info.metadata["lookplangraph.recall"] == "named"  # the planner runs it with recall = named


def test_a_run_starts_from_a_gguf_adapter_exactly_and_refuses_one_that_does_not_fit(trained, tiny_base, data, tmp_path):
    """``init_adapter``: the exported GGUF LoRA is read back into a fresh PEFT model weight for
    weight (float16 precision), a run started from it begins at the trained loss, not the fresh
    one, and an adapter of another rank is refused before any weight changes."""
    import peft
    from safetensors.numpy import load_file

    out, _, _ = trained
    model, _ = sft.load_base(tiny_base, torch.float32)
    model = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8.0, target_modules=list(sft.DEFAULT_TARGETS),
                                                       task_type="CAUSAL_LM"))
    assert gguf_lora.load_lora(model, out / "adapter.gguf", tiny_base) == LAYERS * 7
    saved = load_file(str(out / "adapter" / "adapter_model.safetensors"))
    loaded = {n: p.detach().numpy() for n, p in model.named_parameters() if "lora_" in n}
    assert len(saved) == len(loaded) == LAYERS * 14
    for key, value in saved.items():
        mine = loaded[key.replace(".weight", ".default.weight")]
        np.testing.assert_allclose(mine, value, rtol=2e-3, atol=1e-4)

    warm = tmp_path / "warm"
    sft.train(data, tiny_base, warm, sft.TrainConfig(max_steps=1, init_adapter=str(out / "adapter.gguf"),
                                                      **{**CONFIG, "learning_rate": 1e-6}), log=lambda _: None)
    with open(out / "loss.csv") as f:
        fresh = [float(r["loss"]) for r in csv.DictReader(f)]
    with open(warm / "loss.csv") as f:
        started = float(next(csv.DictReader(f))["loss"])
    assert started < fresh[0] - 0.3 and abs(started - min(fresh[-4:])) < 0.5, (started, fresh)
    assert json.loads((warm / "settings.json").read_text())["init_adapter_sha256"]
    assert sft.start_mismatch(out / "adapter.gguf", sft.prompt_metadata(sft.TrainConfig(), "", data, "")) == []
    assert sft.start_mismatch(out / "adapter.gguf", {"lookplangraph.answer_format": "action"}) == [
        "the start adapter was trained with answer_format action+reason, these examples have action"]

    other = peft.get_peft_model(sft.load_base(tiny_base, torch.float32)[0], peft.LoraConfig(
        r=8, lora_alpha=16.0, target_modules=list(sft.DEFAULT_TARGETS), task_type="CAUSAL_LM"))
    before = {n: p.detach().clone() for n, p in other.named_parameters() if "lora_" in n}
    with pytest.raises(gguf_lora.ExportError, match="another rank"):
        gguf_lora.load_lora(other, out / "adapter.gguf", tiny_base)
    assert all(torch.equal(p, before[n]) for n, p in other.named_parameters() if "lora_" in n)
    with pytest.raises(sft.TrainError, match="cannot start from"):
        sft.train(data, tiny_base, tmp_path / "r8", sft.TrainConfig(max_steps=1, init_adapter=str(out / "adapter.gguf"),
                                                                     **{**CONFIG, "rank": 8}), log=lambda _: None)


def test_a_stamped_run_carries_its_record_and_a_run_from_it_records_each_stage(trained, tiny_base, data, tmp_path):
    """``distill stamp``: a run's adapter with its ``train.json`` inside, the tensors unchanged; a
    run started from such a file records the start's stages and its own (``lineage``), each
    stage starting from the adapter the one before wrote (through the stamped copy), and a run
    that goes on with ``start_step`` replaces its start's stage rather than following it."""
    out, _, _ = trained
    first = json.loads((out / "train.json").read_text())
    stamped = lineage.stamp_run(out, tmp_path / "v1.gguf")
    record = json.loads(read_adapter(stamped).metadata["lookplangraph.training"])
    assert record == first
    tensors = [(h.tensors, h.path.read_bytes()[h.data_start:]) for h in map(read_header, (stamped, out / "adapter.gguf"))]
    assert tensors[0] == tensors[1]
    assert lineage.init_record(out / "adapter.gguf") is None  # a run's own file carries no record

    config = {**CONFIG, "learning_rate": 1e-6}
    second = tmp_path / "second"
    sft.train(data, tiny_base, second, sft.TrainConfig(max_steps=1, init_adapter=str(stamped), **config),
              log=lambda _: None)
    record = json.loads((second / "train.json").read_text())
    assert record["init_adapter_sha256"] == sha256_file(stamped) != first["adapter_gguf_sha256"]
    assert record["init_trained_as_sha256"] == first["adapter_gguf_sha256"]
    stages = record["lineage"]
    assert [s["adapter_gguf_sha256"] for s in stages] == [first["adapter_gguf_sha256"], record["adapter_gguf_sha256"]]
    assert stages[0]["data"] == first["data"] and stages[0]["steps"] == 20 and stages[1]["steps"] == 1
    third = tmp_path / "third"
    sft.train(data, tiny_base, third, sft.TrainConfig(max_steps=1, init_adapter=str(lineage.stamp_run(second, tmp_path / "v2.gguf")),
                                                       **config), log=lambda _: None)
    stages = json.loads((third / "train.json").read_text())["lineage"]
    assert len(stages) == 3 and stages[:2] == record["lineage"]
    assert all(b.get("init_trained_as_sha256", b["init_adapter_sha256"]) == a["adapter_gguf_sha256"]
               for a, b in zip(stages, stages[1:]))
    # going on with the start's own data from a step of it: its stage is replaced, not followed
    assert lineage.lineage(record, {"data_sha256": first["data_sha256"]}, start_step=1) == [
        record["lineage"][0], {"data_sha256": first["data_sha256"]}]
    assert len(lineage.lineage(record, {"data_sha256": "other"}, start_step=1)) == 3

    (tmp_path / "moved").mkdir()
    for name in ("train.json", "adapter.gguf"):
        (tmp_path / "moved" / name).write_bytes((second if name == "train.json" else out).joinpath(name).read_bytes())
    with pytest.raises(lineage.RecordError, match="different training calls"):
        lineage.stamp_run(tmp_path / "moved", tmp_path / "x.gguf")
    with pytest.raises(lineage.RecordError, match="another file"):
        lineage.stamp_run(second, second / "adapter.gguf")
    with pytest.raises(lineage.RecordError, match="has no adapter.gguf"):
        lineage.stamp_run(tmp_path / "third" / "adapter", tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


# -- the conversation layout: one episode a sequence ------------------------------------------------

@pytest.fixture(scope="module")
def conversations(split_tasks, tmp_path_factory):
    """Conversation-layout data of two train-pool episodes, a mistake injected in each,
    less their system message (as ``data``)."""
    tasks = split_tasks("behavior")
    pool = [t for t in tasks if heldout.in_train_pool(t.split, t.id)][:2]
    built = tmp_path_factory.mktemp("conv")
    build_data(pool, built, seeds=[None], augmentations=(), prompt_layout="conversation", answer_format="action",
               recall="named", mistakes=1.0, mistake_seed=0)
    lines = [json.loads(x) for x in (built / "sft.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(ex["meta"]["mistakes"] for ex in lines)
    out = tmp_path_factory.mktemp("conv_short")
    (out / "sft.jsonl").write_text("".join(json.dumps({**ex, "messages": ex["messages"][1:]}) + "\n" for ex in lines))
    (out / "counts.json").write_text((built / "counts.json").read_text())
    return out


@pytest.fixture(scope="module")
def tiny_model(tiny_base):
    model, tokenizer = sft.load_base(tiny_base, torch.float32)
    model.eval()
    return model, tokenizer


def test_each_decisions_inference_prompt_is_the_conversations_prefix_token_for_token(tiny_base, tiny_model, conversations):
    from lookplangraph.distill.planning.conversations import trained as is_trained
    from lookplangraph.lm.llamacpp import LlamaCppBackend

    _, tokenizer = tiny_model
    backend = LlamaCppBackend(str(tiny_base), vocab_only=True)  # the chat template and tokenizer llama.cpp applies
    for messages in sft.read_examples(conversations):
        ids, labels = sft.tokenize_example(tokenizer, messages)
        turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        assert len(turns) >= 4 and any(not is_trained(messages[i]) for i in turns)
        for i in turns:
            prompt = backend.prompt_tokens([{"role": m["role"], "content": m["content"]} for m in messages[:i]])
            assert ids[:len(prompt)] == prompt  # what the backend evaluates for decision i
            answer = tokenizer(messages[i]["content"] + "<|im_end|>\n", add_special_tokens=False)["input_ids"]
            assert ids[len(prompt):len(prompt) + len(answer)] == answer
            span = labels[len(prompt):len(prompt) + len(answer)]
            assert span == (answer if is_trained(messages[i]) else [-100] * len(answer))
        assert sum(x != -100 for x in labels) == sum(
            len(tokenizer(messages[i]["content"] + "<|im_end|>\n", add_special_tokens=False)["input_ids"])
            for i in turns if is_trained(messages[i]))


def _loss_sum(model, ids, labels, position_ids=None):
    """The summed cross-entropy of the labelled tokens (next-token, as the Trainer computes it)."""
    with torch.no_grad():
        kw = {"position_ids": torch.tensor([position_ids])} if position_ids is not None else {}
        logits = model(input_ids=torch.tensor([ids]), use_cache=False, **kw).logits[0, :-1].float()
    target = torch.tensor(labels[1:])
    return float(torch.nn.functional.cross_entropy(logits, target, ignore_index=-100, reduction="sum"))


def test_a_conversation_and_a_pack_see_the_loss_of_their_decisions_trained_one_by_one(tiny_model, conversations):
    from lookplangraph.distill.planning.conversations import decisions

    model, tokenizer = tiny_model
    chats = sft.read_examples(conversations)
    whole = []
    for messages in chats:
        ids, labels = sft.tokenize_example(tokenizer, messages)
        one_by_one = sum(_loss_sum(model, *sft.tokenize_example(tokenizer, d)) for d in decisions(messages))
        whole.append(_loss_sum(model, ids, labels))
        assert whole[-1] == pytest.approx(one_by_one, rel=1e-4)
    rows = [dict(zip(("input_ids", "labels"), sft.tokenize_example(tokenizer, m))) for m in chats]
    [packed] = sft.pack_rows(rows, sum(len(r["input_ids"]) for r in rows))
    assert packed["position_ids"].count(0) == 2
    apart = _loss_sum(model, packed["input_ids"], packed["labels"], packed["position_ids"])
    # without the restarting positions the second conversation attends to the first (the random
    # tiny model barely uses attention, so the difference is small, but far above float noise)
    together = _loss_sum(model, packed["input_ids"], packed["labels"], list(range(len(packed["input_ids"]))))
    assert apart == pytest.approx(sum(whole), rel=1e-4) and together != apart
    start = len(rows[0]["input_ids"])  # the second conversation's logits: as alone when kept apart, not otherwise
    with torch.no_grad():
        alone = model(input_ids=torch.tensor([rows[1]["input_ids"]]), use_cache=False).logits[0]
        logits = {name: model(input_ids=torch.tensor([packed["input_ids"]]), use_cache=False,
                              position_ids=torch.tensor([positions])).logits[0, start:]
                  for name, positions in (("apart", packed["position_ids"]),
                                          ("together", list(range(len(packed["input_ids"])))))}
    apart_diff = float((logits["apart"] - alone).abs().max())
    together_diff = float((logits["together"] - alone).abs().max())
    print(f"max logit difference: kept apart {apart_diff:.2e}, together {together_diff:.2e}")
    assert apart_diff < 1e-4 < together_diff
    batch = sft.packed_collator(tokenizer.pad_token_id)([packed, rows[0] | {"position_ids": list(range(len(rows[0]["input_ids"])))}])
    assert "attention_mask" not in batch and batch["input_ids"].shape[0] == 2
    with torch.no_grad():
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}, use_cache=False).logits
    second = torch.nn.functional.cross_entropy(logits[1, :-1], batch["labels"][1, 1:], ignore_index=-100, reduction="sum")
    assert float(second) == pytest.approx(whole[0], rel=1e-4)  # the filled row's padding is a sequence of its own


def test_packed_conversations_train_and_a_run_resumes(tiny_base, conversations, tmp_path):
    config = dict(CONFIG, examples=None, pack=True, max_length=8192)
    first = sft.train(conversations, tiny_base, tmp_path, sft.TrainConfig(max_steps=2, **config), log=lambda _: None)
    record = json.loads((tmp_path / "train.json").read_text())
    assert first.steps == 2 and record["sequences"] == 1 and record["examples"] == 2
    assert record["decisions"] == first.decisions > 2 * 4
    assert record["tokens_seen_this_call"] > 0
    second = sft.train(conversations, tiny_base, tmp_path, sft.TrainConfig(max_steps=4, **config), log=lambda _: None)
    assert second.steps == 4
    assert json.loads((tmp_path / "train.json").read_text())["tokens_seen_this_call"] == record["tokens_seen_this_call"]  # steps 3-4 only
    with pytest.raises(sft.TrainError, match="config.pack"):
        sft.train(conversations, tiny_base, tmp_path, sft.TrainConfig(max_steps=5, **dict(config, pack=False)),
                  log=lambda _: None)


def test_a_template_that_renders_earlier_turns_otherwise_is_refused(tiny_model):
    _, tokenizer = tiny_model

    class Dropping:  # a chat template that drops earlier answers' text, as reasoning templates drop their thoughts
        def __getattr__(self, name):
            return getattr(tokenizer, name)

        def __call__(self, *a, **kw):
            return tokenizer(*a, **kw)

        def apply_chat_template(self, messages, **kw):
            last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
            shown = [m if m["role"] != "assistant" or i == last else {**m, "content": ""} for i, m in enumerate(messages)]
            return tokenizer.apply_chat_template(shown, **kw)

    chat = [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "u2"}, {"role": "assistant", "content": "a2"}]
    sft.tokenize_example(tokenizer, chat)
    with pytest.raises(sft.TrainError, match="prefix"):
        sft.tokenize_example(Dropping(), chat)


def test_the_base_is_loaded_with_dense_weights_asked_for(tiny_base, monkeypatch):
    import transformers

    seen = {}
    real = transformers.AutoModelForCausalLM.from_pretrained

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", spy)
    model, _ = sft.load_base(tiny_base, torch.float32)
    assert seen["quantization_config"].dequantize is True and seen["gguf_file"] == tiny_base.name
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert linear and all(m.weight.dtype == torch.float32 and m.weight.requires_grad for m in linear)


def test_the_loss_from_the_answer_positions_logits_is_the_loss_over_every_position(tiny_model, conversations):
    """:func:`answer_logits.answer_loss` reads logits projected at :func:`answer_logits.answer_positions` only; on a
    padded batch of two conversations and on a packed one it is the model's own causal-LM loss over
    all logits (summed over the trained tokens, over ``num_items_in_batch``), with fewer positions
    projected, and with the same gradient."""
    from transformers import DataCollatorForSeq2Seq

    model, tokenizer = tiny_model
    rows = [dict(zip(("input_ids", "labels"), sft.tokenize_example(tokenizer, m))) for m in sft.read_examples(conversations)]
    padded = answer_logits.with_answer_positions(DataCollatorForSeq2Seq(tokenizer, padding=True, label_pad_token_id=-100))(
        [r | {"attention_mask": [1] * len(r["input_ids"])} for r in rows])
    packed = answer_logits.with_answer_positions(sft.packed_collator(tokenizer.pad_token_id))(
        sft.pack_rows(rows, sum(len(r["input_ids"]) for r in rows)))
    weight = next(p for p in model.parameters())  # the embeddings: every position's gradient reaches them
    for batch in (padded, packed):
        labels, keep = batch["labels"], batch["logits_to_keep"]
        inputs = {k: v for k, v in batch.items() if k not in ("labels", "logits_to_keep")}
        n = (labels[:, 1:] != -100).sum()
        assert 0 < keep.numel() < labels.shape[1] / 2  # most positions are prompt: not projected
        model.zero_grad()
        full = model(**inputs, labels=labels, num_items_in_batch=n, use_cache=False).loss
        full.backward()
        full_grad = weight.grad.clone()
        model.zero_grad()
        outputs = model(**inputs, logits_to_keep=keep, use_cache=False)
        assert outputs.logits.shape[:2] == (labels.shape[0], keep.numel())
        kept = answer_logits.answer_loss(outputs, labels, num_items_in_batch=n)
        kept.backward()
        assert kept.item() == pytest.approx(full.item(), rel=1e-5)
        assert torch.allclose(weight.grad, full_grad, rtol=1e-4, atol=1e-7)
    none = torch.full((1, 5), -100)
    assert answer_logits.answer_positions(none).tolist() == [0]  # nothing trained: one masked position, a zero loss
    empty = answer_logits.answer_loss(type("Out", (), {"logits": torch.zeros(1, 1, 7, requires_grad=True)})(), none)
    assert empty.item() == 0.0
