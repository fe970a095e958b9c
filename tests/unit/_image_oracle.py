"""Images for tests, built byte by byte, and what each provider charges for them, computed
here from the providers' documents independently of ``langchain_compact._images``.

* OpenAI, "Images and vision", "Calculating costs" (platform.openai.com/docs/guides/images-vision):
  ``detail: low`` is 85 tokens; high (and auto, taken as high): fit within 2048x2048, scale the
  shortest side to 768, then 170 per 512-pixel tile plus 85. Their examples: 1024x1024 high
  costs 765, 2048x4096 high 1,105, 4096x8192 low 85.
* Anthropic, "Vision", "Calculate image costs"
  (docs.anthropic.com/en/docs/build-with-claude/vision):
  ``tokens = (width * height) / 750``; an image whose long edge exceeds 1,568 pixels, or that
  would cost more than about 1,600 tokens, is scaled down first. Their table: 1092x1092 costs
  about 1,590.
* OpenAI's patch models (gpt-4.1-mini/nano, gpt-5-mini/nano, o4-mini), the same page: 32-pixel
  patches, at most 1,536, times the model's multiplier (:func:`patch_cost`).
"""

from __future__ import annotations

import base64
import math
import random
import struct
import zlib
from typing import Any

FORMATS = ("png", "gif", "webp-vp8", "webp-vp8l", "webp-vp8x", "jpeg")
MIME = {
    "png": "image/png",
    "gif": "image/gif",
    "webp-vp8": "image/webp",
    "webp-vp8l": "image/webp",
    "webp-vp8x": "image/webp",
    "jpeg": "image/jpeg",
}


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width: int, height: int, body: int | None = None) -> bytes:
    """A PNG of ``width`` x ``height`` whose image data is ``body`` random bytes (by default
    a tenth of a byte a pixel, 2 kB to 60 kB: a 1280x800 screenshot's payload is 80 kB of
    base64)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    size = body if body is not None else max(2_000, min(60_000, width * height // 10))
    idat = zlib.compress(random.Random(width * height).randbytes(size))
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", idat)
        + _png_chunk(b"IEND", b"")
    )


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00" + b"\x00" * 200 + b";"


def _riff(chunk: bytes, payload: bytes) -> bytes:
    body = b"WEBP" + chunk + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def webp_vp8(width: int, height: int) -> bytes:
    frame = b"\x00\x00\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\x00" * 300
    return _riff(b"VP8 ", frame)


def webp_vp8l(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    return _riff(b"VP8L", b"\x2f" + struct.pack("<I", bits) + b"\x00" * 300)


def webp_vp8x(width: int, height: int) -> bytes:
    payload = b"\x00\x00\x00\x00" + (width - 1).to_bytes(3, "little")
    payload += (height - 1).to_bytes(3, "little")
    return _riff(b"VP8X", payload + b"\x00" * 300)


def jpeg(width: int, height: int, exif: int = 0) -> bytes:
    """A JPEG header: SOI, an APP0 (JFIF), an APP1 of ``exif`` bytes, a DQT, then SOF0."""
    out = b"\xff\xd8"
    out += b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    while exif > 0:  # segments of at most 60,000 bytes (a length is 16 bits)
        part = min(exif, 60_000)
        out += b"\xff\xe1" + struct.pack(">H", part + 2) + b"E" * part
        exif -= part
    out += b"\xff\xdb" + struct.pack(">H", 67) + b"\x00" + bytes(range(64))
    out += b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00" * 3
    out += b"\xff\xda" + struct.pack(">H", 12) + b"\x03\x01\x00\x02\x11\x03\x11\x00\x3f\x00"
    return out + b"\x00" * 500 + b"\xff\xd9"


BUILDERS = {
    "png": png,
    "gif": gif,
    "webp-vp8": webp_vp8,
    "webp-vp8l": webp_vp8l,
    "webp-vp8x": webp_vp8x,
    "jpeg": jpeg,
}


def encoded(fmt: str, width: int, height: int) -> str:
    return base64.b64encode(BUILDERS[fmt](width, height)).decode()


def data_url(fmt: str, width: int, height: int) -> str:
    return f"data:{MIME[fmt]};base64,{encoded(fmt, width, height)}"


# ----------------------------------------------------------------------------- costs


def openai_cost(width: int | None, height: int | None, detail: str | None) -> int:
    if detail == "low":
        return 85
    if width is None or height is None:
        return 85 + 170 * 8  # the most tiles after scaling: 768x2048 is 2x4 tiles
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def anthropic_cost(width: int | None, height: int | None) -> int:
    if width is None or height is None:
        return 1_600
    w, h = float(width), float(height)
    if max(w, h) > 1568:
        w, h = w * 1568 / max(w, h), h * 1568 / max(w, h)
    return min(1_600, math.ceil(w * h / 750))


def patch_cost(width: int, height: int, multiplier: float) -> int:
    """OpenAI's patch formula, from "Images and vision", "Calculating costs" (gpt-4.1-mini,
    gpt-4.1-nano, o4-mini, gpt-5-mini/nano): 32-pixel patches covering the image; past 1,536
    the image is shrunk by sqrt(32*32*1536 / (w*h)), then again so that its width (or height)
    in patches is whole; the patches, at most 1,536, times the model's multiplier. Their
    example: 1800x2400 covers 1,452 patches."""
    patches = math.ceil(width / 32) * math.ceil(height / 32)
    if patches > 1_536:
        shrink = math.sqrt(32 * 32 * 1_536 / (width * height))
        w, h = width * shrink, height * shrink
        fix = min(math.floor(w / 32) / (w / 32), math.floor(h / 32) / (h / 32))
        w, h = w * fix, h * fix
        patches = min(1_536, math.ceil(w / 32) * math.ceil(h / 32))
    return math.ceil(patches * multiplier)


def costs(width: int | None, height: int | None, detail: str | None) -> dict[str, int]:
    """Each provider's cost of one image (``None`` sizes: unknown)."""
    return {
        "openai": openai_cost(width, height, detail),
        "anthropic": anthropic_cost(width, height),
    }


# ----------------------------------------------------------------------------- blocks


def block(
    form: str, fmt: str, width: int, height: int, detail: str | None = None
) -> dict[str, Any]:
    """An image content block in one of the four shapes the package counts."""
    if form == "image_url":
        inner: dict[str, Any] = {"url": data_url(fmt, width, height)}
        if detail:
            inner["detail"] = detail
        return {"type": "image_url", "image_url": inner}
    if form == "v1":
        out: dict[str, Any] = {
            "type": "image",
            "base64": encoded(fmt, width, height),
            "mime_type": MIME[fmt],
        }
        if detail:
            out["extras"] = {"detail": detail}
        return out
    if form == "anthropic":
        source = {"type": "base64", "media_type": MIME[fmt], "data": encoded(fmt, width, height)}
        return {"type": "image", "source": source}
    if form == "input_image":
        out = {"type": "input_image", "image_url": data_url(fmt, width, height)}
        if detail:
            out["detail"] = detail
        return out
    raise ValueError(form)


FORMS = ("image_url", "v1", "anthropic", "input_image")


def image_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return []
    return [
        b
        for b in content or []
        if isinstance(b, dict) and b.get("type") in ("image_url", "image", "input_image")
    ]


def size_of(b: dict[str, Any]) -> tuple[int, int] | None:
    """Width and height of a test image block, decoded whole (the oracle may read it all)."""
    if b.get("type") == "image_url":
        ref = b["image_url"]["url"] if isinstance(b["image_url"], dict) else b["image_url"]
    elif b.get("type") == "input_image":
        ref = b["image_url"]
    elif isinstance(b.get("source"), dict):
        ref = b["source"]["data"]
    else:
        ref = b.get("base64", "")
    if not isinstance(ref, str) or ref.startswith("http"):
        return None
    raw = base64.b64decode(ref.partition(",")[2] if ref.startswith("data:") else ref)
    if raw.startswith(b"\x89PNG"):
        return struct.unpack(">II", raw[16:24])  # type: ignore[return-value]
    if raw.startswith(b"GIF"):
        return struct.unpack("<HH", raw[6:10])  # type: ignore[return-value]
    if raw.startswith(b"RIFF"):
        kind = raw[12:16]
        if kind == b"VP8 ":
            w, h = struct.unpack("<HH", raw[26:30])
            return w & 0x3FFF, h & 0x3FFF
        if kind == b"VP8L":
            bits = int.from_bytes(raw[21:25], "little")
            return (bits & 0x3FFF) + 1, (bits >> 14 & 0x3FFF) + 1
        return int.from_bytes(raw[24:27], "little") + 1, int.from_bytes(raw[27:30], "little") + 1
    if raw.startswith(b"\xff\xd8"):
        i = raw.index(b"\xff\xc0")
        h, w = struct.unpack(">HH", raw[i + 5 : i + 9])
        return w, h
    return None


def detail_of(b: dict[str, Any]) -> str | None:
    if isinstance(b.get("image_url"), dict):
        return b["image_url"].get("detail")
    if "detail" in b:
        return b["detail"]
    extras = b.get("extras")
    return extras.get("detail") if isinstance(extras, dict) else None


def content_image_costs(content: Any) -> dict[str, int]:
    """Each provider's cost of every image in ``content``."""
    total = {"openai": 0, "anthropic": 0}
    for b in image_blocks(content):
        size = size_of(b)
        c = costs(*(size or (None, None)), detail_of(b))
        for k in total:
            total[k] += c[k]
    return total
