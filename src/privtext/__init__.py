"""privtext: private synthetic text from foundation models (Aug-PE, SecPE, WASP, DP-KPS)."""

__version__ = "0.1.0"
