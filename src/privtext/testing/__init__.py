"""Test helpers shipped with privtext, so users can test their own setups offline.

* :class:`OpenAIServer` — a real local HTTP server speaking the OpenAI wire format (chat, completions,
  embeddings) with injectable faults (:class:`Fault`);
* :func:`make_tiny_gpt2` — a randomly initialised 2-layer GPT-2 and a tokenizer trained on the spot, saved as a
  Hugging Face model folder (tests the ``transformers`` backend without downloading weights).
"""

from .openai_server import Fault, OpenAIServer, RecordedRequest, default_embedding, default_reply
from .tiny_lm import SIMPLE_CHAT_TEMPLATE, make_tiny_gpt2

__all__ = ["SIMPLE_CHAT_TEMPLATE", "Fault", "OpenAIServer", "RecordedRequest", "default_embedding", "default_reply",
           "make_tiny_gpt2"]
