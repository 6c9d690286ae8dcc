"""The problem spec (spec/): every algorithm's and baseline's sharding, shards per rank, output, bytes moved, family
and peers; the modes, datatypes and schedules; the targets. What the other layers restated before now comes from
here, so these are the facts themselves, checked against torch on small matrices."""

from __future__ import annotations

import pytest
import torch

from streamk_pgas import spec
from streamk_pgas.stream_k.dtypes import TORCH_DTYPES as GEMM_DTYPES
from streamk_pgas.stream_k.plan import SCHEDULE_CHOICES as GEMM_SCHEDULES


def part(t: torch.Tensor, where: spec.sharding.Slice) -> torch.Tensor:
    (r0, r1), (c0, c1) = where
    return t[r0:r1, c0:c1]


@pytest.mark.parametrize("family", sorted(spec.FAMILIES))
@pytest.mark.parametrize("world", [1, 2, 4])
def test_shards_multiply_to_each_ranks_output(family: str, world: int) -> None:
    """For every family and rank: the rank's A and B shards (gathered A where A is row-sharded; summed over the
    ranks where K is split) give exactly its part of the whole product, in the shapes the family names."""
    fam = spec.FAMILIES[family]
    m, n, k = 8, 12, 16
    a, b = torch.randn(m, k, dtype=torch.float64), torch.randn(k, n, dtype=torch.float64)
    full = a @ b
    for r in range(world):
        sa, sb = part(a, fam.a_slice(r, m, k, world)), part(b, fam.b_slice(r, k, n, world))
        assert tuple(sa.shape) == fam.a_shape(m, k, world) and tuple(sb.shape) == fam.b_shape(k, n, world)
        gm, gn, gk = fam.gemm_shape(m, n, k, world)
        assert (sb.shape[1], sb.shape[0]) == (gn, gk) and gm == m
        if fam.a == "rows":  # the GEMM multiplies the gathered A
            local = a @ sb
        elif fam.a == "cols":  # a partial sum: every rank's adds up to the whole
            local = sum(part(a, fam.a_slice(q, m, k, world)) @ part(b, fam.b_slice(q, k, n, world))
                        for q in range(world))
            assert torch.allclose(sa @ sb, part(a, fam.a_slice(r, m, k, world)) @ sb)
        else:
            local = sa @ sb
        want = part(full, fam.c_slice(r, m, n, world))
        assert tuple(want.shape) == fam.c_shape(m, n, world)
        if fam.output == "full" and fam.b == "cols":  # gather: the rank computes its block, C is every rank's
            assert torch.allclose(local, part(full, ((0, m), fam.b_slice(r, k, n, world)[1])))
        elif fam.output == "rows":
            assert torch.allclose(part(local, fam.c_slice(r, m, n, world)), want)
        else:
            assert torch.allclose(local, want)


def test_split_dims_and_unsplittable() -> None:
    dims = {name: alg.family.split_dims() for name, alg in spec.ALGORITHMS.items()}
    assert dims == {"all_reduce": ("k",), "one_shot": ("k",), "all_scatter": ("n",), "all_gather_gemm": ("m", "n"),
                    "gemm_reduce_scatter": ("m", "k")}
    assert spec.FAMILIES["gemm"].split_dims() == ()
    assert spec.FAMILIES["ag_gemm"].unsplittable(47, 32, 33, 2) == "m"
    assert spec.FAMILIES["gemm_rs"].unsplittable(48, 31, 33, 2) == "k"
    assert spec.FAMILIES["reduce"].unsplittable(47, 31, 32, 2) is None


def test_bytes_moved() -> None:
    m, n, k, w = 64, 32, 128, 4
    fam = spec.FAMILIES
    assert fam["reduce"].bytes_moved(m, n, k, w, 2, 2) == (3 * m * n * 2, m * n * 2)
    assert fam["gather"].bytes_moved(m, n, k, w, 2, 2) == (3 * m * (n // w) * 2, 0.0)
    assert fam["ag_gemm"].bytes_moved(m, n, k, w, 1, 4) == (3 * (m // w) * k, (m // w) * k)
    assert fam["gemm_rs"].bytes_moved(m, n, k, w, 2, 2) == (3 * m * n * 2 / w, m * n * 2 / w)
    assert fam["gemm"].bytes_moved(m, n, k, w, 2, 2) == (0.0, 0.0)
    assert all(f.bytes_moved(m, n, k, 1, 2, 2)[0] == 0 for f in fam.values())  # one rank: nothing to a peer


def test_families_peers_and_vendor_pairs() -> None:
    """Every algorithm's family has equal-output peers among the baselines, and exactly one vendor pair."""
    for alg in spec.ALGORITHMS.values():
        peers = spec.peers(alg.family.name)
        assert peers and all(spec.BASELINES[p].family is alg.family for p in peers)
        pair = spec.vendor_pair(alg.family.name)
        assert pair is not None and pair.key in peers
    assert spec.peers("reduce") == ("all_reduce", "symm_mem_one_shot", "symm_mem_two_shot")
    assert spec.vendor_pair("ag_gemm").collective == "all_gather_gemm"


def test_modes_datatypes_schedules() -> None:
    assert tuple(spec.MODES) == ("bulk_sync", "two_streams", "fused", "fused_sequential", "copy_engine")
    assert {a for a, alg in spec.ALGORITHMS.items() if alg.has_mode("copy_engine")} == {
        "all_scatter", "all_gather_gemm", "gemm_reduce_scatter"}
    fused, ce = spec.MODES["fused"], spec.MODES["copy_engine"]
    assert (fused.gemm_programs(132, 116, 2), fused.comm_programs(132, 116, 2)) == (116, 16)
    assert (fused.gemm_programs(132, 116, 1), fused.comm_programs(132, 116, 1)) == (132, 0)  # one rank
    assert (ce.gemm_programs(132, 132, 2), ce.comm_programs(132, 132, 2)) == (132, 0)
    assert spec.MODES["bulk_sync"].comm_programs(132, 116, 2) == 132
    with pytest.raises(ValueError, match=r"mode must be one of .*'overlapped'"):
        spec.mode("overlapped")
    # stream_k keeps its own tables for now: they must agree with the spec's
    assert {n: str(t).removeprefix("torch.") for n, t in GEMM_DTYPES.items()} == {
        n: d.torch_name for n, d in spec.DATATYPES.items()}
    assert tuple(GEMM_SCHEDULES) == spec.GEMM_SCHEDULE_CHOICES
    assert spec.datatype("int8").output == "int32" and spec.datatype("int8").output_bytes == 4


def test_targets() -> None:
    h200 = spec.known_target("h200")
    assert (h200.tma, h200.capability, h200.max_programs) == (True, 90, 132)
    mi = spec.known_target("mi300x")
    assert (mi.backend, mi.arch, mi.sms, mi.tma, mi.capability) == ("hip", "gfx942", 304, False, 0)
    m355 = spec.known_target("mi355x")
    assert (m355.backend, m355.arch, m355.sms, m355.shared_mem, m355.tma) == ("hip", "gfx950", 256, 160 << 10, False)
    b200 = spec.known_target("b200")
    assert (b200.arch, b200.capability, b200.max_programs, b200.tma) == ("sm100", 100, 148, True)
    assert spec.INTERPRETER.interpreted and spec.INTERPRETER.max_programs == 1024
    t = spec.target_from_properties("AMD Instinct MI300X", hip=True, gcn_arch="gfx942:sramecc+:xnack-", sms=304)
    assert t.arch == "gfx942"
    assert spec.target_from_properties("NVIDIA A100", hip=False, major=8, minor=0, sms=108).arch == "sm80"
