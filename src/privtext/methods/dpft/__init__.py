"""``method: dpft``: DP-SGD fine-tuning of a causal language model (Opacus), then sampling (docs/dpft.md)."""

from .method import DPFT, DPFTOptions, DPFTPlan, LoRAOptions, dpft_plan

__all__ = ["DPFT", "DPFTOptions", "DPFTPlan", "LoRAOptions", "dpft_plan"]
