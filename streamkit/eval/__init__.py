"""streamkit.eval."""
