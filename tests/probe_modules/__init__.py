"""Small rotary modules for tests/test_probe.py, each in the shape of a real-world era.

They are written for the tests (no third-party code) and are loaded by path, the way
``ropelint probe FILE::SYMBOL`` loads user code.
"""
