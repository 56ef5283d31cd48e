"""A small PNG decoder for screenshots (zlib + struct): 8-bit RGB or RGBA, not interlaced.

Enough to read what headless Chromium writes, and strict about the rest (an unexpected format
raises instead of being misread).
"""

from __future__ import annotations

import struct
import zlib
from collections import deque
from dataclasses import dataclass

SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    rows: tuple[bytes, ...]  # RGB, 3 bytes per pixel

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        r, g, b = self.rows[y][3 * x : 3 * x + 3]
        return r, g, b

    def regions(self, colour: tuple[int, int, int], min_area: int) -> list[tuple[int, int, int, int, int]]:
        """Connected (4-neighbour) areas of exactly ``colour``: (area, x0, y0, x1, y1) each, the
        ones of at least ``min_area`` pixels (glyph holes and antialiasing crumbs are smaller)."""
        want = bytes(colour)
        mask = [bytearray(self.width) for _ in range(self.height)]
        for y, row in enumerate(self.rows):
            start = row.find(want)
            while start >= 0:
                if start % 3 == 0:
                    mask[y][start // 3] = 1
                start = row.find(want, start + 1)
        found = []
        for y in range(self.height):
            for x in range(self.width):
                if mask[y][x]:
                    found.append(_flood(mask, x, y, self.width, self.height))
        return [r for r in found if r[0] >= min_area]


def _flood(mask: list[bytearray], x: int, y: int, width: int, height: int) -> tuple[int, int, int, int, int]:
    queue = deque([(x, y)])
    mask[y][x] = 0
    area, x0, y0, x1, y1 = 0, x, y, x, y
    while queue:
        cx, cy = queue.popleft()
        area += 1
        x0, y0, x1, y1 = min(x0, cx), min(y0, cy), max(x1, cx), max(y1, cy)
        for nx, ny in ((cx + 1, cy), (cx - 1, cy), (cx, cy + 1), (cx, cy - 1)):
            if 0 <= nx < width and 0 <= ny < height and mask[ny][nx]:
                mask[ny][nx] = 0
                queue.append((nx, ny))
    return area, x0, y0, x1, y1


def read_png(data: bytes) -> Image:
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG")
    pos, idat, header = len(SIGNATURE), bytearray(), None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError("PNG without IHDR")
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour_type}, interlace {interlace}")
    channels = 3 if colour_type == 2 else 4
    raw = zlib.decompress(bytes(idat))
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), previous, channels)
        previous = line
        rows.append(bytes(line) if channels == 3 else bytes(b for i, b in enumerate(line) if i % 4 != 3))
    return Image(width, height, tuple(rows))


def _unfilter(kind: int, line: bytearray, prev: bytearray, bpp: int) -> bytearray:
    if kind == 0:
        return line
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        up = prev[i]
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + up) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            corner = prev[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + _paeth(left, up, corner)) & 0xFF
        else:
            raise ValueError(f"bad PNG filter {kind}")
    return line


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c
