"""streamkit.train."""
