"""Strided views: how a kernel's iteration space indexes a contiguous buffer.

A :class:`View` maps an index ``(i0, i1, ...)`` of its ``shape`` to the element
``offset + sum(i_k * strides[k])`` of a flat buffer. Every view op of the graph
(broadcast, permute, slice, reshape) is a function from View to View, so chains of
views fold into one index map and never copy. ``reshape`` of a view that is not
expressible as strides (e.g. flattening a transpose) returns None: the input must be
materialized first.

>>> v = View.contiguous((2, 3)).permute((1, 0))
>>> v.strides, v.reshape((6,)) is None
((1, 3), True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class View:
    """Shape, element strides and element offset over a flat buffer."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @staticmethod
    def contiguous(shape: tuple[int, ...]) -> View:
        """Row-major layout of ``shape`` (size-1 dims get stride 0: they are never stepped)."""
        strides = []
        acc = 1
        for d in reversed(shape):
            strides.append(acc if d != 1 else 0)
            acc *= d
        return View(tuple(shape), tuple(reversed(strides)), 0)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def canonical(self) -> View:
        """Strides of size-1 and empty dims do not matter: zero them so equal maps compare equal."""
        if self.size == 0:
            return View(self.shape, (0,) * len(self.shape), 0)
        return View(self.shape, tuple(0 if d == 1 else s for d, s in zip(self.shape, self.strides)),
                    self.offset)

    def is_contiguous(self) -> bool:
        return self.canonical() == View.contiguous(self.shape)

    def broadcast(self, shape: tuple[int, ...]) -> View:
        """Right-aligned broadcast to ``shape`` (new and size-1 dims get stride 0)."""
        lead = len(shape) - len(self.shape)
        strides = [0] * lead
        for d, s, n in zip(self.shape, self.strides, shape[lead:]):
            strides.append(s if d == n else 0)
        return View(tuple(shape), tuple(strides), self.offset)

    def permute(self, axes: tuple[int, ...]) -> View:
        return View(tuple(self.shape[a] for a in axes), tuple(self.strides[a] for a in axes),
                    self.offset)

    def slice(self, slices: tuple[tuple[int, int, int], ...]) -> View:
        """Per-axis normalized (start, stop, step), as in the graph's ``slice`` op."""
        offset = self.offset
        shape, strides = [], []
        for (start, stop, step), s in zip(slices, self.strides):
            n = len(range(start, stop, step))
            if n:
                offset += start * s
            shape.append(n)
            strides.append(s * step)
        return View(tuple(shape), tuple(strides), offset).canonical()

    def reshape(self, shape: tuple[int, ...]) -> View | None:
        """The same elements in row-major order with a new shape, if strides can say it."""
        shape = tuple(shape)
        if self.size == 0:
            return View(shape, (0,) * len(shape), 0)
        if self.is_contiguous():
            c = View.contiguous(shape)
            return View(shape, c.strides, self.offset)
        # Drop size-1 dims, then match groups of old dims to groups of new dims; each old
        # group must be mergeable (strides nest) for the split to be expressible.
        old = [(d, s) for d, s in zip(self.shape, self.strides) if d != 1]
        new_dims = [d for d in shape if d != 1]
        new_strides: list[int] = []
        i = j = 0
        while i < len(old) and j < len(new_dims):
            oi, nj = i, j
            po, pn = old[i][0], new_dims[j]
            while po != pn:
                if po < pn:
                    i += 1
                    po *= old[i][0]
                else:
                    j += 1
                    pn *= new_dims[j]
            for k in range(oi, i):  # old dims k, k+1 must be mergeable
                if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                    return None
            stride = old[i][1]
            group = []
            for k in range(j, nj - 1, -1):
                group.append(stride)
                stride *= new_dims[k]
            new_strides.extend(reversed(group))
            i += 1
            j += 1
        it = iter(new_strides)
        return View(shape, tuple(0 if d == 1 else next(it) for d in shape), self.offset)


def merge_dims(sizes: tuple[int, ...] | list[int], strides: list[list[int]] | list[tuple[int, ...]]
               ) -> list[tuple[int, list[int]]]:
    """Neighbouring dims that every view steps through as one, merged (size-1 dims
    dropped): ``[(size, [stride of each view]), ...]``, outermost first. ``strides``
    holds one stride sequence per view, each as long as ``sizes``.

    >>> merge_dims((2, 3, 4), [(12, 4, 1), (0, 4, 1)])
    [(2, [12, 0]), (12, [1, 1])]
    """
    merged: list[tuple[int, list[int]]] = []
    for i, size in enumerate(sizes):
        if size == 1:
            continue
        st = [s[i] for s in strides]
        if merged and all(p == c * size for p, c in zip(merged[-1][1], st)):
            merged[-1] = (merged[-1][0] * size, st)
        else:
            merged.append((size, st))
    return merged
