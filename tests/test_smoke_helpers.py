"""The shared strategies themselves produce what the other tests rely on."""

import numpy as np
from hypothesis import given

from braze.graph import dtypes as dt

from .helpers import arrays


@given(arrays(dt.bfloat16))
def test_bfloat16_arrays_have_bfloat16_dtype(a: np.ndarray) -> None:
    assert a.dtype == dt.bfloat16
