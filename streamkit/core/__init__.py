"""The engine: types, tags, events, blocks, graph, runtime. Pure Python + NumPy."""

from streamkit.core.block import (
    Block,
    ErrorPolicy,
    EventSink,
    GapPolicy,
    RateBlock,
    Sink,
    Source,
    SourceRead,
    SyncBlock,
    TagPolicy,
    WindowBlock,
)
from streamkit.core.clock import AnchorTrack, FreeRun, Paced, RealTime, parse_mode
from streamkit.core.context import Context
from streamkit.core.errors import BlockError, ConfigError, GraphFatal, ModelError, SourceError, StreamkitError
from streamkit.core.events import Event, event_to_dict, event_to_json
from streamkit.core.graph import Graph
from streamkit.core.registry import register
from streamkit.core.ring import SampleRing
from streamkit.core.runtime import Runner
from streamkit.core.tags import EndOfStream, FormatChange, Gap, GapCause, ParamChange, SpeechBoundary, TimeAnchor
from streamkit.core.types import Chunk, StreamSpec, Tag, as_fraction

__all__ = [
    "AnchorTrack", "Block", "BlockError", "Chunk", "ConfigError", "Context", "EndOfStream", "ErrorPolicy", "Event",
    "EventSink", "FormatChange", "FreeRun", "Gap", "GapCause", "GapPolicy", "Graph", "GraphFatal", "ModelError", "Paced",
    "ParamChange", "RateBlock", "RealTime", "Runner", "SampleRing", "Sink", "Source", "SourceError", "SourceRead",
    "SpeechBoundary", "StreamSpec", "StreamkitError", "SyncBlock", "Tag", "TagPolicy", "TimeAnchor", "WindowBlock",
    "as_fraction", "event_to_dict", "event_to_json", "parse_mode", "register",
]  # fmt: skip
