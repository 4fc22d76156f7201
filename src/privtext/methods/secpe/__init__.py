"""SecPE (``method: secpe``): Secret-Protected Evolution; see :mod:`.method`."""

from .method import SecPE, SecPEOptions, _NoSecrets, replicate_clusters
from .scorer import ClusterScorer, auto_clusters

__all__ = ["ClusterScorer", "SecPE", "SecPEOptions", "_NoSecrets", "auto_clusters", "replicate_clusters"]
