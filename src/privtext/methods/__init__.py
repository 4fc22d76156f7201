"""Methods: the loops that compose generators, embedders, mechanisms and the ledger."""

from ..registry import Registry
from .base import Method, MethodRun

METHODS: Registry = Registry("method")
METHODS.register("augpe", "privtext.methods.augpe:AugPE", aliases=("aug-pe", "pe"))
METHODS.register("secpe", "privtext.methods.secpe:SecPE", aliases=("sec-pe",))
METHODS.register("dpkps", "privtext.methods.dpkps:DPKPS", aliases=("dp-kps",))
METHODS.register("wasp", "privtext.methods.wasp:WASP")
METHODS.register("dpft", "privtext.methods.dpft:DPFT", aliases=("dp-ft", "dpsgd"))

__all__ = ["METHODS", "Method", "MethodRun"]
