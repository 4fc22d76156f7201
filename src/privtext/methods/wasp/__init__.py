"""WASP (``method: wasp``): several weighted generators, Top-Q votes, contrastive prompts; see :mod:`.method`.

The round helpers are re-exported from :mod:`.rounds` as its ``__all__`` lists them (one list, kept there)."""

from . import rounds
from .calibration import wasp_noise_multiplier
from .method import WASP, RoundInfo, WASPOptions, generator_configs
from .rounds import *  # noqa: F403

__all__ = ["WASP", "RoundInfo", "WASPOptions", "generator_configs", "wasp_noise_multiplier", *rounds.__all__]
