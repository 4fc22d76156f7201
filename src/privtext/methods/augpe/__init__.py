"""Aug-PE (``method: augpe``): Private Evolution with DP nearest-neighbour votes; see :mod:`.method`."""

from .method import AugPE, AugPEOptions, label_sigma_ratio
from .scorers import DPVoteScorer, FederatedVoteScorer
from .vocabulary import VocabularyPrompts

__all__ = ["AugPE", "AugPEOptions", "DPVoteScorer", "FederatedVoteScorer", "VocabularyPrompts", "label_sigma_ratio"]
