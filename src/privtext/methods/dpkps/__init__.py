"""DP-KPS (``method: dpkps``): DP keyphrase sequences, one prompt each; the run is :mod:`.method`, the pipeline
as a library :mod:`.core`."""

from .core import (
           DPKPSOptions,
           DPKPSResult,
           KeyphraseSequences,
           dpkps_event,
           dpkps_plan,
           dpkps_sequences,
           run_dpkps,
)
from .method import DPKPS, split_epsilon

__all__ = ["DPKPS", "DPKPSOptions", "DPKPSResult", "KeyphraseSequences", "dpkps_event", "dpkps_plan",
           "dpkps_sequences", "run_dpkps", "split_epsilon"]
