"""``python -m lookplangraph.lm.serve``: llama-cpp-python's OpenAI-compatible server
(``python -m llama_cpp.server``, the same arguments) with this project's model loading.

Two differences from running ``llama_cpp.server`` itself:

* ``--model`` may name an embedded model (``qwen2.5-coder-0.5b``, ``qwen2.5-coder-1.5b``:
  :mod:`lookplangraph.lm.embedded`, assembled on first use) as well as a ``.gguf`` path;
* models load with llama.cpp's extra buffer types as :func:`lookplangraph.lm.llamacpp.default_extra_buffers`
  decides: off on CPUs with Intel AMX, where the plain ``llama_cpp.server`` segfaults on the first
  request with the Q4_K models (reported upstream as ggml-org/llama.cpp#20824).

Example (the endpoints of ``lookplangraph eval --lm openai:qwen-0.5b --endpoints ...``)::

    python -m lookplangraph.lm.serve --model qwen2.5-coder-0.5b --model_alias qwen-0.5b --port 8001 --n_ctx 4096
"""

from __future__ import annotations

import sys

from lookplangraph.lm import embedded
from lookplangraph.lm.base import LMError
from lookplangraph.lm.llamacpp import default_extra_buffers, set_extra_buffers


def server_argv(argv: list[str]) -> list[str]:
    """``argv`` with the value of ``--model`` (``--model X`` or ``--model=X``) resolved to a file
    when it names an embedded model. Raises :class:`lookplangraph.lm.LMError` when that model
    cannot be assembled."""
    out = list(argv)
    for i, arg in enumerate(out):
        name = None
        if arg == "--model" and i + 1 < len(out):
            name, at = out[i + 1], i + 1
        elif arg.startswith("--model="):
            name, at = arg.split("=", 1)[1], i
        if name is not None and name in embedded.MODELS:
            try:
                path = str(embedded.model_file(name))
            except embedded.ModelError as exc:
                raise LMError(str(exc)) from None
            out[at] = path if at != i else f"--model={path}"
    return out


def main(argv: list[str] | None = None) -> int:
    try:
        args = server_argv(sys.argv[1:] if argv is None else argv)
        extra = default_extra_buffers()
    except LMError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        from llama_cpp.server.__main__ import main as serve
    except ImportError:
        print("error: the server needs llama-cpp-python[server]: pip install -e '.[lm]'", file=sys.stderr)
        return 3
    set_extra_buffers(extra)  # for the models this process loads; it serves nothing else
    sys.argv = ["llama_cpp.server", *args]
    serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
