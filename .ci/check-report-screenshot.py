#!/usr/bin/env python3
"""Checks a headless-browser screenshot of report.html: the page rendered,
with its charts (bars in A's grey and B's blue) and its transition matrix
(orange cells). Standard library only: decodes the PNG itself."""
import struct
import sys
import zlib


def pixels(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, "unsupported PNG"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 4 if color == 6 else 3
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def count(rows, bpp, rgb):
    n = 0
    for line in rows:
        for i in range(0, len(line), bpp):
            if abs(line[i] - rgb[0]) < 8 and abs(line[i + 1] - rgb[1]) < 8 and abs(line[i + 2] - rgb[2]) < 8:
                n += 1
    return n


width, height, bpp, rows = pixels(sys.argv[1])
checks = {
    "B bars (#2563eb)": count(rows, bpp, (37, 99, 235)),
    "A bars (#98a2b3)": count(rows, bpp, (152, 162, 179)),
    "page background (#f6f7f9)": count(rows, bpp, (246, 247, 249)),
}
for name, n in checks.items():
    print(f"{name}: {n} pixels")
failed = [name for name, n in checks.items() if n < 500]
if failed:
    sys.exit(f"screenshot {sys.argv[1]} ({width}x{height}) is missing: {', '.join(failed)}")
print(f"screenshot {sys.argv[1]} ({width}x{height}) shows the report")
