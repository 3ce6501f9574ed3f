"""What this machine's CPU can do, read from ``/proc/cpuinfo`` (the ``flags`` lines on x86, the
``Features`` lines on Arm): the features that decide how a model is best run or trained here.
Where the file does not exist or cannot be read, every feature reads as absent.

* :func:`cpu_has_amx`: Intel AMX, whose llama.cpp buffer is kept off (``docs/guides/lm-backends.md``);
* :func:`cpu_has_native_bfloat16`: bfloat16 matrix instructions (AVX-512 BF16, AMX-BF16 or Arm's
  BF16). Without them PyTorch's bfloat16 matrix products fall back to a slow path, several times
  slower than float32, so training picks float32 there (``docs/guides/distillation.md``).
"""

from __future__ import annotations

from pathlib import Path

#: the flags (lowercase, as ``/proc/cpuinfo`` writes them) that give bfloat16 matrix products
BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def cpu_flags(cpuinfo: str | Path = "/proc/cpuinfo") -> frozenset[str]:
    """The feature flags named on the ``flags`` or ``Features`` lines of ``cpuinfo`` (empty where
    it cannot be read)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return frozenset()
    flags: set[str] = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return frozenset(flags)


def cpu_has_amx(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """Whether this CPU has Intel AMX (``amx_int8``)."""
    return "amx_int8" in cpu_flags(cpuinfo)


def cpu_has_native_bfloat16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (one of :data:`BFLOAT16_FLAGS`)."""
    return bool(BFLOAT16_FLAGS & cpu_flags(cpuinfo))
