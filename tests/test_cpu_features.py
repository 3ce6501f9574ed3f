"""The CPU features read from ``/proc/cpuinfo`` (files written here, in the layouts of an x86 and
an Arm kernel) and the training dtype they decide (:func:`sft.resolve_dtype`, no torch needed)."""

from __future__ import annotations

import pytest

from lookplangraph.distill.training.sft import TrainError, resolve_dtype
from lookplangraph.lm.cpu_features import cpu_flags, cpu_has_amx, cpu_has_native_bfloat16

X86 = """processor\t: 0
vendor_id\t: {vendor}
model name\t: {model}
flags\t\t: fpu vme sse sse2 avx avx2 fma {extra}
bugs\t\t: spectre_v1

processor\t: 1
flags\t\t: fpu vme sse sse2 avx avx2 fma {extra}
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_flags_are_read_from_x86_and_arm_layouts_and_a_missing_file_has_none(tmp_path):
    avx2 = write(tmp_path, "avx2", X86.format(vendor="AuthenticAMD", model="AMD EPYC", extra=""))
    zen4 = write(tmp_path, "zen4", X86.format(vendor="AuthenticAMD", model="AMD EPYC",
                                              extra="avx512f avx512bw avx512_bf16 avx512_vnni"))
    spr = write(tmp_path, "spr", X86.format(vendor="GenuineIntel", model="Xeon",
                                            extra="avx512f avx512_bf16 amx_bf16 amx_tile amx_int8"))
    arm = write(tmp_path, "arm", "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\nCPU part\t: 0xd4f\n")
    assert "avx2" in cpu_flags(avx2) and "spectre_v1" not in cpu_flags(avx2)  # the bugs line is not a feature
    assert [cpu_has_native_bfloat16(p) for p in (avx2, zen4, spr, arm)] == [False, True, True, True]
    assert [cpu_has_amx(p) for p in (avx2, zen4, spr, arm)] == [False, False, True, False]
    missing = tmp_path / "nowhere"
    assert cpu_flags(missing) == frozenset() and not cpu_has_native_bfloat16(missing) and not cpu_has_amx(missing)


def test_auto_picks_bfloat16_only_where_the_device_multiplies_it_and_an_explicit_choice_stays():
    assert resolve_dtype("auto", cuda=False, cuda_bfloat16=False, cpu_bfloat16=False) == ("float32", None)
    assert resolve_dtype("auto", cuda=False, cuda_bfloat16=False, cpu_bfloat16=True) == ("bfloat16", None)
    assert resolve_dtype("auto", cuda=True, cuda_bfloat16=True, cpu_bfloat16=False) == ("bfloat16", None)
    assert resolve_dtype("auto", cuda=True, cuda_bfloat16=False, cpu_bfloat16=True) == ("float32", None)
    dtype, note = resolve_dtype("bfloat16", cuda=False, cuda_bfloat16=False, cpu_bfloat16=False)
    assert dtype == "bfloat16" and "--dtype float32" in note
    assert resolve_dtype("bfloat16", cuda=False, cuda_bfloat16=False, cpu_bfloat16=True) == ("bfloat16", None)
    assert resolve_dtype("float32", cuda=False, cuda_bfloat16=False, cpu_bfloat16=True) == ("float32", None)
    assert resolve_dtype("float16", cuda=True, cuda_bfloat16=True, cpu_bfloat16=False) == ("float16", None)
    with pytest.raises(TrainError, match="float16 needs a GPU"):
        resolve_dtype("float16", cuda=False, cuda_bfloat16=False, cpu_bfloat16=True)
