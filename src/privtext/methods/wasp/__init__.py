"""WASP (``method: wasp``): several weighted generators, Top-Q votes, contrastive prompts; see :mod:`.method`."""

from .method import WASP, RoundInfo, WASPOptions, generator_configs
from .rounds import generator_counts, generator_weights, round_sizes, select_examples, select_output

__all__ = ["WASP", "RoundInfo", "WASPOptions", "generator_configs", "generator_counts", "generator_weights",
           "round_sizes", "select_examples", "select_output"]
