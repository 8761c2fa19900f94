"""Training recipes behind ``streamkit train ...`` (one module per model family: ``rnnt``, ``sed``)."""
