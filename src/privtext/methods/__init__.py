"""Methods: the loops that compose generators, embedders, mechanisms and the ledger."""

from collections.abc import Mapping
from typing import Any

from ..registry import Registry
from .base import Method, MethodDescription, MethodRun

METHODS: Registry = Registry("method")
METHODS.register("augpe", "privtext.methods.augpe:AugPE", aliases=("aug-pe", "pe"))
METHODS.register("secpe", "privtext.methods.secpe:SecPE", aliases=("sec-pe",))
METHODS.register("dpkps", "privtext.methods.dpkps:DPKPS", aliases=("dp-kps",))
METHODS.register("wasp", "privtext.methods.wasp:WASP")
METHODS.register("dpft", "privtext.methods.dpft:DPFT", aliases=("dp-ft", "dpsgd"))


def describe(method: str, statement: Mapping[str, Any] | None = None) -> MethodDescription:
    """What the shared code needs to know of ``method`` (:class:`~privtext.methods.base.MethodDescription`): the
    description a run's ``privacy.json`` (``statement``) recorded, else the registered method's, else what is
    assumed of an unknown method (:meth:`MethodDescription.unknown`: a run of a method not installed here)."""
    if statement:
        recorded = MethodDescription.from_dict(statement.get("method_description"))
        if recorded is not None:
            return recorded
    if method in METHODS:
        return METHODS.get(method).description  # type: ignore[no-any-return]
    return MethodDescription.unknown(str(method))


__all__ = ["METHODS", "Method", "MethodDescription", "MethodRun", "describe"]
