"""log: why fusion realized a value or kept two kernels apart.

Every stage records its decisions as :class:`FusionDecision` records: ``realize`` (a
value gets its own buffer, and the rule that said so), ``no_merge`` (two kernels stay
two, and what forbade the merge) and ``merge`` (two kernels became one). They enter
through a :class:`Decisions` collector that the stages share and leave as a list:
``fuse(g, decisions=[])`` fills the list it is given, and the logger ``braze.fusion``
prints them at DEBUG level -- ``BRAZE_LOG=fusion`` turns that logger on (to stderr).
Nothing is recorded, and no text is built, when neither asks.

>>> d = FusionDecision("realize", "output", (3,), "#3 exp (4, 8) float32")
>>> str(d)
'realize #3 exp (4, 8) float32: output'
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

    from ...ir import Graph

LOGGER_NAME = "braze.fusion"
if "fusion" in os.environ.get("BRAZE_LOG", "").split(","):
    import logging

    _logger = logging.getLogger(LOGGER_NAME)
    if not _logger.handlers:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        _logger.addHandler(_handler)
    _logger.setLevel(logging.DEBUG)


def _listening() -> logging.Logger | None:
    """The ``braze.fusion`` logger when it prints DEBUG records. :mod:`logging` is not
    imported for this (``import braze`` stays lighter): a program that never imported it
    cannot have configured the logger."""
    logging = sys.modules.get("logging")
    if logging is None:
        return None
    logger = logging.getLogger(LOGGER_NAME)
    return logger if logger.isEnabledFor(logging.DEBUG) else None


@dataclass(frozen=True)
class FusionDecision:
    """One decision: ``action`` is realize | no_merge | merge; ``reason`` a short code
    (realize: output, reduction, library op, library input, reshape source, transposed
    matmul operand, inline width, inexpressible view, view copy, recompute cost,
    recompute (stencil), broadcast costly; merge and no_merge:
    row, stored value, sibling, then for refusals dependent, cycle, iteration spaces,
    cross read); ``nodes`` the graph node ids concerned (the value realized; the roots
    of the two kernels); ``subject`` names them with op and shape; ``detail`` gives the
    numbers."""

    action: str
    reason: str
    nodes: tuple[int, ...]
    subject: str
    detail: str = ""

    def __str__(self) -> str:
        tail = f" ({self.detail})" if self.detail else ""
        return f"{self.action} {self.subject}: {self.reason}{tail}"


class Decisions:
    """The collector the stages share: ``on`` is False when no one listens."""

    def __init__(self, g: Graph, into: list[FusionDecision] | None) -> None:
        self.g = g
        self.items = into
        self.on = into is not None

    def node(self, i: int) -> str:
        n = self.g.nodes[i]
        return f"#{i} {n.op} {n.shape} {n.dtype.name}"

    def add(self, action: str, reason: str, nodes: tuple[int, ...], subject: str,
            detail: str = "") -> None:
        if self.items is not None:
            self.items.append(FusionDecision(action, reason, nodes, subject, detail))

    def realize(self, i: int, reason: str, detail: str = "") -> None:
        if self.items is not None:
            self.add("realize", reason, (i,), self.node(i), detail)


def collector(g: Graph, into: list[FusionDecision] | None) -> Decisions:
    """A collector for ``fuse``: into the caller's list, else a fresh one when the logger
    listens, else none."""
    if into is None and _listening() is not None:
        into = []
    return Decisions(g, into)


def emit(d: Decisions, summary: str) -> None:
    """Print the decisions of one ``fuse`` call to the logger (when it listens)."""
    if d.items is None:
        return
    logger = _listening()
    if logger is not None:
        logger.debug("%s", "\n  ".join([summary, *map(str, d.items)]))
