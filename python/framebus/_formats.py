"""Pixel formats as the FrameBus wire carries them (docs/PROTOCOL.md §6)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def fourcc(name: str) -> int:
    """The u32 of a four-character code: the first character is the most significant byte."""
    raw = name.encode("ascii")
    if len(raw) != 4:
        raise ValueError(f"a FourCC has four characters, not {name!r}")
    return int.from_bytes(raw, "big")


def fourcc_name(code: int) -> str:
    raw = (code & 0xFFFFFFFF).to_bytes(4, "big")
    if all(0x20 <= b < 0x7F for b in raw):
        return raw.decode("ascii")
    return f"0x{code:08x}"


@dataclass(frozen=True)
class PlaneShape:
    """One plane: element size in bytes, sample dtype, samples per element, and 4:2:0 subsampling."""

    bytes_per_element: int
    dtype: np.dtype
    components: int
    subsampled: bool

    def dimensions(self, width: int, height: int) -> tuple[int, int]:
        if self.subsampled:
            return (width + 1) // 2, (height + 1) // 2
        return width, height


@dataclass(frozen=True)
class PixelFormat:
    name: str
    code: int
    planes: tuple[PlaneShape, ...]
    compressed_variant: str | None = None
    base: str | None = None

    @property
    def is_compressed(self) -> bool:
        return self.base is not None


_U8 = np.dtype(np.uint8)
_U16 = np.dtype("<u2")
_NV12 = (PlaneShape(1, _U8, 1, False), PlaneShape(2, _U8, 2, True))
_P010 = (PlaneShape(2, _U16, 1, False), PlaneShape(4, _U16, 2, True))
_BGRA = (PlaneShape(4, _U8, 4, False),)

FORMATS: dict[str, PixelFormat] = {}
for _name, _planes, _variant in (
    ("420v", _NV12, "&8v0"),
    ("420f", _NV12, "&8f0"),
    ("x420", _P010, "&xv0"),
    ("xf20", _P010, "&xf0"),
    ("BGRA", _BGRA, "&BGA"),
):
    FORMATS[_name] = PixelFormat(_name, fourcc(_name), _planes, compressed_variant=_variant)
    FORMATS[_variant] = PixelFormat(_variant, fourcc(_variant), (), base=_name)

BY_CODE: dict[int, PixelFormat] = {f.code: f for f in FORMATS.values()}


def pixel_format(name_or_code: str | int) -> PixelFormat:
    try:
        if isinstance(name_or_code, int):
            return BY_CODE[name_or_code]
        return FORMATS[name_or_code]
    except KeyError:
        raise ValueError(f"unknown pixel format {name_or_code!r}; known: {', '.join(FORMATS)}") from None
