"""streamkit.models."""
