"""Every op against every layer: each layer supports the op or lists it as unsupported
with a reason. An op added to a record file without what a layer needs fails here, by
name and layer, instead of silently taking a slower path.

Layers (what each needs of a record):
  reference  a numpy reference (every op)
  api        elementwise: a generated public function with a doctest example
  c          elementwise and reduce: a C-family expression for every compute dtype kind
             its domain admits (C++, CUDA C and MSL share it), or csource.UNSUPPORTED
  metal      the libm functions of its expression exist in MSL, or the Metal prelude
             defines the bz_ replacement
  mlx        elementwise: lowered to mx ops or bridged to the reference; reduce: lowered
  cost       elementwise: a cost; libm-calling ops cost at least a transcendental's
"""

from __future__ import annotations

import numpy as np
import pytest

import braze as bz
from braze.backends import csource
from braze.graph import dtypes as dt
from braze.graph.ops import OPS, elementwise_dtypes
from braze.graph.ops.elementwise import TRANSCENDENTAL

ELEMENTWISE = sorted(n for n, op in OPS.items() if op.kind == "elementwise")
REDUCE = sorted(n for n, op in OPS.items() if op.kind == "reduce")
REAL_DTYPES = [d for d in dt.ALL if not dt.is_complex(d)]


def _compute_names(name: str) -> list[str]:
    """Compute dtype names the op's kernels see (inputs cast per the record)."""
    op = OPS[name]
    out = set()
    for d in REAL_DTYPES:
        try:
            compute, _ = elementwise_dtypes(op, d)
        except TypeError:
            continue
        out.add(dt.name(compute))
    return sorted(out)


@pytest.mark.parametrize("name", sorted(OPS))
def test_reference(name: str) -> None:
    op = OPS[name]
    assert callable(op.reference), name
    assert op.kind in ("leaf", "elementwise", "reduce", "scan", "view", "library", "random")


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_api(name: str) -> None:
    from braze.arrays import elementwise as ew

    op = OPS[name]
    if name in ew.NOT_GENERATED:
        assert ew.NOT_GENERATED[name], f"{name}: no reason given"
        return
    assert op.summary and op.example, f"{name}: a public op needs a summary and an example"
    assert hasattr(bz, name) == op.public, f"{name}: exported iff the record is public"
    fn = getattr(ew, name)  # generated either way (braze's own modules call the internal ones)
    assert fn.__doc__ and op.summary in fn.__doc__ and op.example[1] in fn.__doc__


@pytest.mark.parametrize("name", ELEMENTWISE + REDUCE)
def test_c_family(name: str) -> None:
    op = OPS[name]
    if name in csource.UNSUPPORTED:
        assert csource.UNSUPPORTED[name], f"{name}: no reason given"
        return
    if name in ("cast", "bitcast"):
        return  # generated from the instruction's dtypes, not a template
    if op.kind == "reduce":
        assert name in csource.REDUCE_OPS, f"{name}: no C-family reduction"
        assert op.identity is not None and op.combine is not None, name
        return
    assert op.c, f"{name}: no C-family expression"
    for n in _compute_names(name):
        assert n in op.c or csource.dtype_kind(n) in op.c or "*" in op.c, (
            f"{name}: no C expression for compute dtype {n} (kinds {sorted(op.c)})")


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_metal(name: str) -> None:
    from braze.backends.metal.codegen import PRELUDE

    op = OPS[name]
    for fn, _ in op.libm:  # a libm function MSL lacks is an op record with msl_native=False
        if fn in OPS and not OPS[fn].msl_native:
            assert f"bz_{fn}(" in PRELUDE, f"{name}: MSL lacks {fn} and the prelude has no bz_{fn}"
    if not op.msl_native:
        assert f"bz_{name}(" in PRELUDE, f"{name}: msl_native=False but no bz_{name} in the prelude"


@pytest.mark.parametrize("name", ELEMENTWISE + REDUCE)
def test_mlx(name: str) -> None:
    lower = pytest.importorskip("braze.backends.mlx.lower")
    if name in lower.UNSUPPORTED:
        assert lower.UNSUPPORTED[name], f"{name}: no reason given"
        return
    if name in ("cast", "bitcast"):
        return  # the executor handles them itself
    if OPS[name].kind == "reduce":
        assert name in lower.REDUCTIONS, f"{name}: no MLX reduction"
        return
    assert name in lower.LOWERED or name in lower.BRIDGED, f"{name}: neither lowered nor bridged"


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_cost(name: str) -> None:
    op = OPS[name]
    assert op.cost >= 1
    if op.libm:
        assert op.cost >= TRANSCENDENTAL, f"{name} calls libm but costs {op.cost}"


def test_a_missing_layer_fails_by_name() -> None:
    """The enumeration catches a record without a C expression for a kind it admits."""
    from dataclasses import replace

    op = OPS["negative"]
    broken = replace(op, c={"f": op.c["*"]})  # no integer expression
    OPS["negative"] = broken
    try:
        with pytest.raises(AssertionError, match="no C expression for compute dtype u?int"):
            test_c_family("negative")
    finally:
        OPS["negative"] = op


def test_records_are_the_only_tables() -> None:
    """The layers' tables are derived from the records, not written beside them."""
    assert csource.CEXPR["hypot"] == dict(OPS["hypot"].c)
    assert "hypot" in csource.METAL_MISSING and not OPS["hypot"].msl_native
    assert np.all([csource.COST[n] == OPS[n].cost for n in ELEMENTWISE])
