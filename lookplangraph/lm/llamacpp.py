"""A GGUF model run in process through ``llama-cpp-python`` (CPU, or a GPU build)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Sequence

from lookplangraph.lm import embedded as models, structured
from lookplangraph.lm.base import (
    AdapterError, Completion, ContextOverflow, ImageError, LMError, Relaxed, Usage, checked_completion,
)
from lookplangraph.lm.cpu_features import cpu_has_amx
from lookplangraph.lm.images import DEFAULT_MAX_IMAGE_BYTES, with_images
from lookplangraph.lm.jump import ChainSchema, FlatSchema, JumpDecoder, Unsure, flat_chain, flat_schema
from lookplangraph.lm.lora import check_adapter, merged_record


def _cpu_times() -> list[int]:
    """The machine's CPU time counters (``/proc/stat``'s first line: user, nice, system, idle,
    iowait, ...); OSError or ValueError where there is no such file or it reads otherwise."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = f.readline().split()
    if not fields or fields[0] != "cpu" or len(fields) < 6:
        raise ValueError("/proc/stat does not start with the cpu line")
    return [int(x) for x in fields[1:]]


def busy_cpus(window_s: float = 0.25) -> float:
    """How many CPUs are busy now: the machine's busy share over ``window_s`` seconds
    (``/proc/stat``) times its CPUs; where that cannot be read, the 1-minute load average (which
    lags: it still counts a build or a run that ended a minute ago)."""
    try:
        before = _cpu_times()
        time.sleep(window_s)
        after = _cpu_times()
        total = sum(after) - sum(before)
        idle = (after[3] + after[4]) - (before[3] + before[4])
        if total > 0:
            return (os.cpu_count() or 1) * max(0.0, 1.0 - idle / total)
    except (OSError, ValueError):
        pass
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def default_threads() -> int:
    """``$LOOKPLANGRAPH_THREADS`` when set (a positive integer); otherwise the CPUs available to
    this process that are not busy now (:func:`busy_cpus`, rounded), at least 1: all CPUs on an
    idle machine, 1 on a 2-CPU machine that already runs one busy process. llama.cpp threads spin
    at barriers, so asking for a busy CPU makes every step wait for it. Scripts that run several
    models at once set the variable."""
    env = os.environ.get("LOOKPLANGRAPH_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise LMError(f"LOOKPLANGRAPH_THREADS must be a positive integer, not {env!r}")
        return int(env)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cpus, cpus - round(busy_cpus())))


def default_gpu_layers() -> int:
    """``$LOOKPLANGRAPH_GPU_LAYERS`` when set (an integer: layers offloaded to the GPU, -1 for
    all); otherwise 0. It matters only for a llama-cpp-python built with a GPU backend (e.g.
    ``CMAKE_ARGS="-DGGML_CUDA=on" pip install llama-cpp-python``); a CPU build ignores it. An
    explicit ``n_gpu_layers`` in ``lm_options`` wins."""
    env = os.environ.get("LOOKPLANGRAPH_GPU_LAYERS", "").strip()
    if not env:
        return 0
    try:
        layers = int(env)
    except ValueError:
        raise LMError(f"LOOKPLANGRAPH_GPU_LAYERS must be an integer (-1 for all layers), not {env!r}") from None
    if layers < -1:
        raise LMError(f"LOOKPLANGRAPH_GPU_LAYERS must be -1 (all layers) or more, not {layers}")
    return layers


def default_extra_buffers() -> bool:
    """Whether llama.cpp may put weights in its *extra buffer types* (the CPU backend's repacked
    layouts, the AMX buffer among them). ``$LOOKPLANGRAPH_LLAMA_EXTRA_BUFFERS`` (``1``/``0``)
    decides when set; otherwise off on a CPU with AMX, on elsewhere. A llama.cpp built on an AMX
    machine (Sapphire Rapids and later Xeons) moves Q4_K weights into the AMX buffer and its
    matrix product there segfaults on the first decode (reported upstream as ggml-org/llama.cpp#20824;
    seen with llama-cpp-python 0.3.36 and both embedded models). Without extra buffers the plain
    CPU kernels run (``docs/guides/lm-backends.md``)."""
    env = os.environ.get("LOOKPLANGRAPH_LLAMA_EXTRA_BUFFERS", "").strip()
    if env:
        if env not in ("0", "1"):
            raise LMError(f"LOOKPLANGRAPH_LLAMA_EXTRA_BUFFERS must be 1 or 0, not {env!r}")
        return env == "1"
    return not cpu_has_amx()


_LOAD_LOCK = threading.Lock()
#: where llama.cpp's own log goes in this process (:func:`route_native_log`)
_NATIVE_LOG: dict[str, Any] = {"path": None, "file": None, "echo": False, "callback": None}


def route_native_log(path: str | os.PathLike | None = None, echo: bool = False) -> None:
    """Send llama.cpp's own log (model and adapter loading, its warnings and errors) of this
    process to ``path`` (appended; None: no file) and, when ``echo``, to standard error as well.
    Without either it is dropped. Process-wide, as llama.cpp's logger is: a
    :class:`LlamaCppBackend` given ``native_log`` or ``verbose`` sets it, one given neither keeps
    what an earlier one set (dropped when none did)."""
    import ctypes

    import llama_cpp  # importing it installs llama-cpp-python's own handler, which this one replaces

    state = _NATIVE_LOG
    path = str(Path(path).expanduser()) if path is not None else None
    if path != state["path"]:
        if state["file"] is not None:
            state["file"].close()
        state["file"] = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            state["file"] = open(path, "a", encoding="utf-8", errors="replace", buffering=1)
        state["path"] = path
    state["echo"] = bool(echo)
    if state["callback"] is None:
        @llama_cpp.llama_log_callback
        def _log(level: int, text: bytes, user_data: Any) -> None:
            line = text.decode("utf-8", errors="replace")
            if _NATIVE_LOG["file"] is not None:
                _NATIVE_LOG["file"].write(line)
            if _NATIVE_LOG["echo"]:
                sys.stderr.write(line)

        state["callback"] = _log  # kept: llama.cpp holds only the C pointer
        llama_cpp.llama_log_set(_log, ctypes.c_void_p(0))


def set_extra_buffers(extra_buffers: bool) -> Callable[[], Any]:
    """Make every ``llama_cpp.Llama`` made from now on in this process load its model with
    ``use_extra_bufts = extra_buffers``; returns the function it replaced. The ``Llama``
    constructor takes no such argument and loads the model at once from
    ``llama_model_default_params()``, so that function is wrapped. :func:`load_llama` does it for
    one load; ``python -m lookplangraph.lm.serve`` for a whole server process."""
    import llama_cpp.llama as llama_module

    lib = llama_module.llama_cpp
    original = lib.llama_model_default_params

    def params():
        p = original()
        p.use_extra_bufts = extra_buffers
        return p

    lib.llama_model_default_params = params
    return original


@contextmanager
def _model_params(extra_buffers: bool):
    """While a ``Llama`` is made: its model parameters with ``use_extra_bufts`` set
    (:func:`set_extra_buffers`), under a lock (two loads at a time would see each other's
    setting), then the library's own function back."""
    import llama_cpp.llama as llama_module

    with _LOAD_LOCK:
        original = set_extra_buffers(extra_buffers)
        try:
            yield
        finally:
            llama_module.llama_cpp.llama_model_default_params = original


def load_llama(model_path: str | os.PathLike, *, extra_buffers: bool | None = None, **kwargs: Any):
    """``llama_cpp.Llama(model_path, **kwargs)`` with llama.cpp's extra buffer types on or off
    (``extra_buffers``; None: :func:`default_extra_buffers`). Everything in this project that runs
    a model through llama-cpp-python loads it here."""
    import llama_cpp

    if extra_buffers is None:
        extra_buffers = default_extra_buffers()
    if extra_buffers:
        return llama_cpp.Llama(model_path=str(model_path), **kwargs)
    with _model_params(False):
        return llama_cpp.Llama(model_path=str(model_path), **kwargs)


class LlamaCppBackend:
    """A GGUF model run in process through ``llama-cpp-python``.

    ``model`` is a name of :data:`lookplangraph.lm.embedded.MODELS` (assembled on first use) or a path
    to a ``.gguf`` file. Decoding is greedy (``temperature=0``); a requested ``schema`` is compiled
    into a grammar (what ``response_format={"type": "json_object", "schema": ...}`` does, except
    that a schema the converter cannot handle raises :class:`LMError` instead of silently falling
    back to free JSON). Grammars are cached per schema. A greedy reply to a flat schema (the
    planner's decisions, one action or, in the action-only format, several) is decoded without the grammar by jump-forward decoding
    (:mod:`lookplangraph.lm.jump`: the model runs only where the schema leaves a choice, fixed
    text is evaluated in batches). A greedy reply to any other schema is first decoded without
    the grammar and kept when it is text the grammar allows (:func:`grammar_text`): then it is
    the text the grammar decode would give, since each of its tokens was the model's first choice
    and allowed; otherwise it is decoded again with the grammar (counted in
    :attr:`grammar_fallbacks`). ``jump_forward=False`` keeps every request on the grammar.

    Prompt cache: llama-cpp-python keeps the tokens of the previous call in its KV cache and only
    evaluates the part of the new prompt after the longest common token prefix. ``cached_tokens``
    reports that prefix: the tokens held before the call compared with the new prompt's tokens.
    ``n_ctx`` defaults to 8192: in the conversation layout a LookPlanGraph decision's prompt is the
    episode's whole chat so far, and a long office episode outgrows 4096.
    ``n_threads`` (also used for prompt processing) defaults to :func:`default_threads`: the CPUs
    not already busy. llama.cpp threads spin at barriers, so on an oversubscribed machine
    asking for more threads than idle CPUs is several times slower, not faster.
    ``n_gpu_layers`` defaults to :func:`default_gpu_layers` (0 unless ``$LOOKPLANGRAPH_GPU_LAYERS``).
    ``extra_buffers`` (llama.cpp's repacked weight layouts) defaults to
    :func:`default_extra_buffers`: off on CPUs with AMX, where llama.cpp's AMX kernels crash.

    A LoRA adapter goes on top of the unchanged base file with ``MODEL+ADAPTER``
    (``qwen2.5-coder-1.5b+lpg``, ``/models/base.gguf+/runs/d/adapter.gguf``): ADAPTER is a GGUF
    LoRA file (``lookplangraph distill train`` writes one) or the name of an adapter shipped for
    that model (:data:`lookplangraph.lm.embedded.ADAPTERS`); see :func:`resolve_adapter`. Grammars,
    refusal exclusion and the prompt cache work with it unchanged; ``lora_scale`` in ``lm_options``
    scales it (default 1). The adapter is checked against the base before llama.cpp sees it
    (:func:`lookplangraph.lm.lora.check_adapter`: a missing, corrupt or ill-fitting file, or one
    trained on another base, raises :class:`AdapterError`); :attr:`adapter` keeps what it records,
    the prompt it was trained with among it.

    llama.cpp's own log (loading, adapters, its warnings) goes to the file ``native_log`` when
    given, and to standard error too with ``verbose``; a backend given neither leaves the log where
    an earlier one sent it, else drops it (:func:`route_native_log`).

    Images need a multimodal model: the language GGUF as ``model``, its projector as ``mmproj``
    and the llama-cpp-python chat handler of that family as ``chat_handler`` (a key of
    :data:`VISION_HANDLERS`: ``qwen2.5-vl``, ``llava-1-5``, ``llava-1-6``, ``moondream``,
    ``nanollava``, ``llama-3-vision-alpha``, ``minicpm-v-2.6``, ``mtmd``, ``gemma4``; the names of
    ``llama_cpp.server``'s ``--chat_format``). Without ``mmproj`` an image request raises
    :class:`ImageError`. Image embeddings take context: use ``n_ctx`` >= 4096.
    """

    def __init__(self, model: str | os.PathLike = "qwen2.5-coder-1.5b", n_ctx: int = 8192, n_threads: int | None = None,
                 seed: int = 0, temperature: float = 0.0, max_tokens: int = 200, verbose: bool = False, mmproj: str | os.PathLike | None = None,
                 chat_handler: str | None = None, max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
                 extra_buffers: bool | None = None, jump_forward: bool = True,
                 native_log: str | os.PathLike | None = None, **llama_kwargs: Any):
        try:
            import llama_cpp
        except ImportError:
            raise LMError("the llamacpp backend needs llama-cpp-python (built from source): "
                          "pip install 'llama-cpp-python>=0.3.16'") from None
        self._llama_cpp = llama_cpp
        if native_log is not None or verbose or _NATIVE_LOG["callback"] is None:
            route_native_log(native_log, echo=verbose)
        model = str(model)
        adapter = None
        if "+" in model and not Path(model).expanduser().is_file():
            model, _, adapter = model.rpartition("+")
        try:
            path = models.model_file(model)
        except models.ModelError as exc:
            raise LMError(str(exc)) from None
        label = model if model in models.MODELS else str(path)
        if adapter is not None:
            if "lora_path" in llama_kwargs:
                raise AdapterError(f"{model}+{adapter}: the adapter is given twice (in the spec and as lora_path)")
            llama_kwargs["lora_path"] = str(resolve_adapter(model, adapter))
            label = f"{label}+{adapter}"
        #: the checked LoRA adapter, or the record of one merged into the model file
        #: (:class:`lookplangraph.lm.lora.AdapterInfo`); None for neither
        self.adapter = None if model in models.MODELS else merged_record(path)
        if llama_kwargs.get("lora_path"):
            spec = models.MODELS.get(model)
            self.adapter = check_adapter(llama_kwargs["lora_path"], path, spec.sha256 if spec else None)
        if n_threads is None:
            n_threads = default_threads()
        llama_kwargs.setdefault("n_threads_batch", n_threads)
        llama_kwargs.setdefault("n_gpu_layers", default_gpu_layers())
        self.path, self.name = path, f"llamacpp:{label}"
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self.max_image_bytes = int(max_image_bytes)
        self.vision = None
        if mmproj is not None or chat_handler is not None:
            llama_kwargs["chat_handler"] = self.vision = _vision_handler(llama_cpp, mmproj, chat_handler, verbose)
        try:
            self.llm = load_llama(path, extra_buffers=extra_buffers, n_ctx=n_ctx, n_threads=n_threads, seed=seed,
                                  verbose=verbose, **llama_kwargs)
        except Exception as exc:
            where = (f"llama.cpp's own log: {native_log}" if native_log is not None
                     else "verbose=True (--verbose) shows llama.cpp's own log")
            raise LMError(f"llama.cpp could not load {path}: {exc} ({where})") from None
        self._grammars: dict[str | None, Any] = {}
        #: greedy replies to flat schemas decoded with the text they fix evaluated in batches
        #: (:mod:`lookplangraph.lm.jump`); other requests go through the grammar
        self.jump_forward = bool(jump_forward)
        self._jump: JumpDecoder | None = None
        #: replies to other schemas whose free greedy decode the grammar would not give, so that
        #: they were decoded again with the grammar (:meth:`_complete_free`)
        self.grammar_fallbacks = 0
        self._formatter = None

    def _grammar(self, schema: dict[str, Any] | None, gbnf: str | None = None) -> Any:
        """The compiled grammar of a reply schema or of GBNF text (cached)."""
        key = json.dumps(schema, sort_keys=True) if gbnf is None else "gbnf:" + gbnf
        g = self._grammars.get(key)
        if g is None:
            try:
                if gbnf is None:
                    g = self._llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
                else:
                    g = self._llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)
            except Exception as exc:
                what = "the reply schema" if gbnf is None else "the GBNF grammar"
                raise LMError(f"llama.cpp cannot turn {what} into a grammar: {exc}") from None
            if len(self._grammars) > 64:
                self._grammars.clear()
            self._grammars[key] = g
        return g

    @property
    def constraints(self) -> frozenset[str]:
        """llama.cpp compiles every schema and GBNF text into a grammar (:attr:`LMBackend.constraints`)."""
        return frozenset({"grammar"})

    def close(self) -> None:
        """Free the model's memory now rather than at garbage collection."""
        close = getattr(self.llm, "close", None)
        if close is not None:
            close()

    def complete(self, messages: list[dict[str, Any]], *, images: Sequence[str | os.PathLike] | None = None,
                 schema: Any = None, stop: Sequence[str] | None = None, max_tokens: int | None = None,
                 grammar: str | None = None, relaxed: Relaxed | None = None, schema_name: str = "reply") -> Completion:
        """One chat completion (:meth:`LMBackend.complete`), constrained by the grammar of
        ``schema`` or by the GBNF ``grammar`` (every schema is enforced exactly, so ``relaxed`` is
        not used; nor is ``schema_name``); raises :class:`LMError` only if the prompt does not fit the context or
        llama.cpp fails, :class:`ImageError` for images without a vision model."""
        if images and self.vision is None:
            raise ImageError(f"{self.name} cannot see images: load a multimodal model with its projector "
                             f"(mmproj=PATH, chat_handler=one of {', '.join(VISION_HANDLERS)})")
        messages = with_images(messages, images, self.max_image_bytes)
        if grammar is not None and schema is not None:
            raise ValueError("complete() takes a schema or a grammar, not both")
        wire_schema = structured.json_schema(schema)
        greedy_json = (wire_schema is not None and self.jump_forward and grammar is None and not images
                       and self.temperature == 0 and self.vision is None
                       and "tokenizer.chat_template" in self.llm.metadata)
        flat = (flat_schema(wire_schema) or flat_chain(wire_schema)) if greedy_json else None
        if flat is not None:
            return self._complete_jump(messages, flat, schema, max_tokens)
        t0 = time.perf_counter()
        first_try = None
        if greedy_json:
            done, first_try = self._complete_free(messages, schema, wire_schema, max_tokens)
            if done is not None:
                return done
            self.grammar_fallbacks += 1
        if grammar is not None:
            grammar = self._grammar(None, grammar)
        elif wire_schema is not None:
            grammar = self._grammar(wire_schema)
        before = self.llm.input_ids[: self.llm.n_tokens].tolist()
        try:
            out = self.llm.create_chat_completion(
                messages=messages, temperature=self.temperature,
                max_tokens=self.max_tokens if max_tokens is None else max_tokens,
                seed=self.seed, grammar=grammar, stop=list(stop) if stop else [])
        except ValueError as exc:  # e.g. "Requested tokens (...) exceed context window"
            kind = ContextOverflow if "context" in str(exc).lower() else LMError
            raise kind(f"{self.name}: {exc} (raise n_ctx in lm_options)") from None
        seconds = time.perf_counter() - t0
        u = out.get("usage") or {}
        n_prompt = int(u.get("prompt_tokens", 0))
        prompt_ids = self.llm.input_ids[:n_prompt].tolist()
        common = 0
        for a, b in zip(before, prompt_ids):
            if a != b:
                break
            common += 1
        cached = min(common, max(n_prompt - 1, 0))  # a fully cached prompt replays its last token
        if first_try is not None:  # what the free decode found in the cache, and its tokens too
            cached = first_try.cached_tokens
        usage = Usage(prompt_tokens=n_prompt, cached_tokens=cached, completion_tokens=int(u.get("completion_tokens", 0))
                      + (first_try.completion_tokens if first_try is not None else 0))
        text = out["choices"][0]["message"].get("content") or ""
        return checked_completion(text, schema, usage, seconds)

    def prompt_tokens(self, messages: list[dict[str, Any]]) -> list[int]:
        """The tokens of ``messages`` as ``create_chat_completion`` makes them: the model's own
        chat template (from its GGUF), tokenized with special tokens."""
        if self._formatter is None:
            from llama_cpp import llama_chat_format

            llm = self.llm
            eos, bos = llm.token_eos(), llm.token_bos()
            self._formatter = llama_chat_format.Jinja2ChatFormatter(
                template=llm.metadata["tokenizer.chat_template"],
                eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
                bos_token=llm._model.token_get_text(bos) if bos != -1 else "", stop_token_ids=[eos])
        result = self._formatter(messages=messages)
        return self.llm.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)

    def _jump_start(self, messages: list[dict[str, Any]], max_tokens: int | None) -> tuple[list[int], int]:
        """The prompt's tokens and the reply's token budget for the jump decoder (made on first
        use); :class:`ContextOverflow` for a prompt the context cannot hold."""
        prompt = self.prompt_tokens(messages)
        if len(prompt) >= self.llm.n_ctx():
            raise ContextOverflow(f"{self.name}: Requested tokens ({len(prompt)}) exceed context window of "
                                  f"{self.llm.n_ctx()} (raise n_ctx in lm_options)")
        if self._jump is None:
            self._jump = JumpDecoder(self.llm)
        return prompt, min(self.max_tokens if max_tokens is None else max_tokens, self.llm.n_ctx() - len(prompt))

    def _complete_free(self, messages: list[dict[str, Any]], schema: Any, wire_schema: dict[str, Any],
                       max_tokens: int | None) -> tuple[Completion | None, Usage | None]:
        """A reply to a schema decoded greedily without the grammar, kept only when it is text the
        grammar allows (:func:`grammar_text`) and valid, hence the text a greedy grammar decode
        gives; ``(None, usage)`` otherwise, for the caller to decode again with the grammar. First
        by jump-forward decoding with every free token the model's first choice
        (``flat_schema(..., values=True)``, ``decode(strict=True)``), where the schema is an object
        or an ``anyOf`` of objects; then, or else, token by token
        (:meth:`~lookplangraph.lm.jump.JumpDecoder.free_object`)."""
        t0 = time.perf_counter()
        prompt, budget = self._jump_start(messages, max_tokens)

        def kept(text: str, usage: Usage) -> Completion | None:
            if not grammar_text(text, wire_schema):
                return None
            done = checked_completion(text, schema, usage, time.perf_counter() - t0)
            return done if done.error is None else None

        spent, cached = 0, None
        keyed = flat_schema(wire_schema, values=True)
        if keyed is not None:  # the schema's fixed text evaluated in batches, the rest the model's first choice
            try:
                text, cached, spent = self._jump.decode(prompt, keyed, budget, strict=True)
                usage = Usage(prompt_tokens=len(prompt), completion_tokens=spent, cached_tokens=cached)
                done = kept(text, usage)
                if done is not None:
                    return done, usage
            except Unsure:
                spent = self._jump.tokens_decoded
        raw, again, n, closed = self._jump.free_object(prompt, budget)
        usage = Usage(prompt_tokens=len(prompt), completion_tokens=spent + n,
                      cached_tokens=again if cached is None else cached)
        done = kept(raw.decode("utf-8", "replace"), usage) if closed else None
        return done, usage

    def _complete_jump(self, messages: list[dict[str, Any]], flat: "FlatSchema | ChainSchema", schema: Any,
                       max_tokens: int | None) -> Completion:
        """:meth:`complete` of a flat schema by :class:`~lookplangraph.lm.jump.JumpDecoder` (a model
        whose GGUF has a chat template; others take the grammar path)."""
        t0 = time.perf_counter()
        prompt, budget = self._jump_start(messages, max_tokens)
        text, cached, n = self._jump.decode(prompt, flat, budget)
        usage = Usage(prompt_tokens=len(prompt), completion_tokens=n, cached_tokens=cached)
        return checked_completion(text, schema, usage, time.perf_counter() - t0)


def grammar_text(text: str, schema: dict[str, Any]) -> bool:
    """Whether ``text`` is a reply the grammar of ``schema`` allows, as far as the free decode
    needs to know (:meth:`LlamaCppBackend._complete_free`): JSON written exactly as ``json.dumps``
    writes it (one space after ``:`` and ``,``, the only spacing the grammar's optional space and
    the trained replies agree on) with every object's keys in its schema's order. Whether the
    value fits the schema is :func:`~lookplangraph.lm.base.checked_completion`'s to say."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return json.dumps(value, ensure_ascii=False) == text and _in_order(value, schema, schema)


def _in_order(value: Any, schema: Any, root: dict[str, Any]) -> bool:
    if not isinstance(schema, dict):
        return True
    while "$ref" in schema:
        schema = structured.resolve_ref(schema["$ref"], root) or {}
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return any(_in_order(value, option, root) for option in options)
    if isinstance(value, dict):
        order = list(schema.get("properties") or {})
        if not order:
            return True
        if any(k not in order for k in value):
            return False
        places = [order.index(k) for k in value]
        return places == sorted(places) and all(_in_order(v, schema["properties"][k], root) for k, v in value.items())
    if isinstance(value, list):
        prefix = schema.get("prefixItems") or []
        return all(_in_order(v, prefix[i] if i < len(prefix) else schema.get("items"), root) for i, v in enumerate(value))
    return True


def resolve_adapter(model: str, adapter: str) -> Path:
    """The GGUF LoRA file of ``MODEL+ADAPTER``: ADAPTER as a path to an existing file, else as the
    name of an adapter of the embedded model ``model`` in the registry
    (:data:`lookplangraph.lm.embedded.ADAPTERS`); raises :class:`AdapterError` naming the adapters
    that exist, or saying how to restore one the package does not ship."""
    path = Path(adapter).expanduser()
    if path.is_file():
        return path
    registered = models.ADAPTERS.get(model, {})
    if adapter in registered:
        try:
            return registered[adapter].path()
        except models.ModelError as exc:
            raise AdapterError(str(exc)) from None
    shipped = ", ".join(f"{m}+{a}" for m, names in models.ADAPTERS.items() for a, s in names.items() if s.shipped)
    others = ", ".join(a for names in models.ADAPTERS.values() for a, s in names.items() if not s.shipped)
    raise AdapterError(f"no adapter file {path} and no adapter {adapter!r} shipped for {model!r} (shipped: "
                       f"{shipped or 'none'}; in the registry, restored on demand: {others or 'none'}); "
                       "train one with `lookplangraph distill train` and give its adapter.gguf path")


#: ``chat_handler`` names of :class:`LlamaCppBackend` (as ``llama_cpp.server --chat_format``) and
#: the llama-cpp-python 0.3.36 classes that put images into the prompt of each model family.
VISION_HANDLERS = {
    "qwen2.5-vl": "Qwen25VLChatHandler",
    "llava-1-5": "Llava15ChatHandler",
    "llava-1-6": "Llava16ChatHandler",
    "moondream": "MoondreamChatHandler",
    "nanollava": "NanoLlavaChatHandler",
    "llama-3-vision-alpha": "Llama3VisionAlphaChatHandler",
    "minicpm-v-2.6": "MiniCPMv26ChatHandler",
    "mtmd": "MTMDChatHandler",
    "gemma4": "Gemma4ChatHandler",
}


def _vision_handler(llama_cpp: Any, mmproj: str | os.PathLike | None, name: str | None, verbose: bool) -> Any:
    if mmproj is None or name is None:
        raise LMError("images in process need both mmproj=PATH (the model's projector GGUF) and chat_handler=NAME "
                      f"(one of {', '.join(VISION_HANDLERS)})")
    if name not in VISION_HANDLERS:
        raise LMError(f"unknown chat_handler {name!r}; known: {', '.join(VISION_HANDLERS)}")
    path = Path(mmproj).expanduser()
    if not path.is_file():
        raise LMError(f"no projector file {path} (mmproj)")
    from llama_cpp import llama_chat_format

    cls = getattr(llama_chat_format, VISION_HANDLERS[name], None)
    if cls is None:
        raise LMError(f"this llama-cpp-python has no {VISION_HANDLERS[name]} (chat_handler {name!r}); "
                      "install llama-cpp-python==0.3.36")
    try:
        return cls(clip_model_path=str(path), verbose=verbose)
    except Exception as exc:
        raise LMError(f"llama.cpp could not load the projector {path} with {cls.__name__}: {exc}") from None
