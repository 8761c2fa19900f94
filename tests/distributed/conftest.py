"""Fixtures shared by the cluster tests."""

import pytest


@pytest.fixture(scope="module")
def emulator():
    """A KiwiSDR emulator on loopback for the module's tests: its port."""
    from streamkit.io.kiwi_emulator import EmulatorThread

    emu = EmulatorThread()
    port = emu.start()
    yield port
    emu.stop()
