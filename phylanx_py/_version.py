"""The version of phylanx-py (stdlib only: the runtime reads it without importing the frontend)."""
__version__ = "0.1.0"
