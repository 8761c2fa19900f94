"""The live view: a web page that shows every station's spectrogram, timeline and events, and plays its audio.

``streamkit monitor --web [HOST:]PORT`` (also ``mic --web`` and ``run GRAPH --web``) serves the page
while the graphs run. The parts, from the engine outwards:

- :mod:`streamkit.web.spectrogram`: waterfall rows (256 bins, 10 rows/s, one byte per bin) from audio.
- :mod:`streamkit.web.tap`: the ``web.tap`` sink block that feeds a station's audio and rows to the hub.
- :mod:`streamkit.web.hub`: :class:`LiveHub`, the bounded per-station history (rows, events, audio,
  status) that the engine writes to without ever waiting, and each viewer reads with its own cursor.
- :mod:`streamkit.web.frames`: the binary WebSocket frames (sans-I/O encode/decode).
- :mod:`streamkit.web.access`: bind addresses, the access token and the Origin check.
- :mod:`streamkit.web.server`: the aiohttp server (HTTP + WebSocket) on its own thread and loop.
- :mod:`streamkit.web.attach`: wiring a hub into graphs (used by the CLI).
- ``static/``: the page (plain ES modules, no build step, no third-party code).

aiohttp is imported only by :mod:`streamkit.web.server`.
"""
