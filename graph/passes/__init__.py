"""Graph passes: named, separately testable transformers of the optimizer's
:class:`~braze.graph.ir.Graph`, then the lowering to a schedule.

==================  =====  =====================================================
module              level  what
==================  =====  =====================================================
``registry``               :class:`Pass`, levels, :class:`PassConfig`, switches
``rewrite``                the pattern rewriter (:class:`Pat`, :class:`Rule`)
``fold``            1      ``constant_folding``
``identities``      1      ``identities``: exact identities, constant powers
``cse``             1      ``cse``: common-subexpression elimination
``small_reductions`` 2     reductions of <= 7 elements as elementwise chains
``layout``          3      transposes sunk until they cancel (convolution chains)
``conv_epilogue``   2      a convolution's bias, residual add and activation fused
``conv_concat``     2      convolutions concatenated along channels: one node
``dce``             1      ``dce``: dead-code elimination (runs last)
``simplify``               ``simplify()``: the level-1 passes (compatibility)
``fuse``            --     lowering: kernels and library steps (always runs)
``memory``          --     lowering: buffer lifetimes, in-place reuse (always runs)
==================  =====  =====================================================

A new pass (a level-2 pattern fusion, a level-3 layout pass) is a module that
registers a :class:`Pass` with its level and place (``order``), imported below. The
pipeline itself is in :mod:`braze.graph.compiler`: ``PassConfig.run`` -> fuse ->
plan_memory.

>>> list(PASSES)
['constant_folding', 'identities', 'cse', 'layout', 'small_reductions', 'conv_epilogue',
 'conv_concat', 'conv_pool', 'dce']
"""

# each pass module registers its pass (the pipeline order is each pass's ``order``)
from . import (
    conv_concat,
    conv_epilogue,
    conv_pool,
    cse,
    dce,
    fold,
    identities,
    layout,
    registry,
    rewrite,
    small_reductions,
)
from .registry import (
    LEVELS,
    LOWERING,
    MAX_LEVEL,
    PASSES,
    Pass,
    PassConfig,
    config_from_env,
    make_config,
    register,
)
from .rewrite import Const, Match, Pat, Rule, RuleSet

__all__ = ["LEVELS", "LOWERING", "MAX_LEVEL", "PASSES", "Const", "Match", "Pass", "PassConfig",
           "Pat", "Rule", "RuleSet", "config_from_env", "cse", "dce", "fold", "identities",
           "make_config", "register", "registry", "rewrite", "small_reductions", "conv_epilogue",
           "conv_concat", "conv_pool", "layout"]
