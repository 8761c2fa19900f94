"""streamkit.data."""
