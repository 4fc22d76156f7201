"""WASP (``method: wasp``): several weighted generators, Top-Q votes, contrastive prompts; see :mod:`.method`."""

from .calibration import wasp_noise_multiplier
from .method import WASP, RoundInfo, WASPOptions, generator_configs
from .rounds import (
    assign_shared,
    copy_weights,
    generator_counts,
    generator_weights,
    round_sizes,
    select_examples,
    select_output,
    shared_keys,
)

__all__ = ["WASP", "RoundInfo", "WASPOptions", "assign_shared", "copy_weights", "generator_configs",
           "generator_counts", "generator_weights", "round_sizes", "select_examples", "select_output", "shared_keys",
           "wasp_noise_multiplier"]
