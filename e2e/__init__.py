"""e2e: prove what a change to an LLM serving engine does, end to end."""

__version__ = "0.1.0"
