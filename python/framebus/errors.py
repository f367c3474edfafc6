"""FrameBus errors: one exception type with a code, as the Swift library's FrameBusError."""

from __future__ import annotations


class FrameBusError(Exception):
    """A FrameBus failure. ``code`` names it (the wire protocol's ERROR names where one applies):

    ``malformedMessage``, ``invalidSurface``, ``unsupportedVersion``, ``noCommonFormat``, ``tooManySubscribers``,
    ``notPermitted``, ``tooSlow``, ``timedOut``, ``closed``, ``publisherNotPermitted``, ``codecUnavailable``,
    ``systemCall``.
    """

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
