"""What an image costs a provider (docs/how-it-works.md, "How each kind of content is counted").

An image's width and height are read from its header (PNG, GIF, WebP, JPEG), decoding only
the few bytes of the base64 payload or data URL the header needs, never the whole image; a
JPEG's segments are hopped over by their lengths, each hop decoding a dozen bytes. The size
is then priced with the formula of the provider the model belongs to:

* OpenAI, tiles (gpt-4o, gpt-4.1, gpt-5, o1, o3, ...): ``detail="low"`` costs 85; otherwise
  the image is scaled to fit 2048x2048, then its shortest side down to 768, and costs 170 per
  512-pixel tile plus 85 (the highest of OpenAI's per-model rates, gpt-4o's).
* OpenAI, patches (gpt-4.1-mini/nano, gpt-5-mini/nano, o4-mini): one token per 32x32 patch,
  at most 1,536 patches (larger images scaled down to fit), times the model's multiplier.
* Anthropic: ``width * height / 750`` after scaling to fit a 1,568-pixel long edge, at most
  1,600 tokens an image (the size past which Anthropic scales an image down).
* Any other model, or none named: the largest of the OpenAI tile and Anthropic costs.

An image whose size cannot be read (a URL, a file id, a header that is not one of the four)
costs the provider's maximum. Sizes are remembered per payload (its length and hash, which a
str computes once), so counting a history again reads no header twice.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANTHROPIC",
    "LARGEST",
    "OPENAI",
    "ImagePricing",
    "image_size",
    "image_tokens",
    "is_image_block",
    "pricing_for",
    "pricing_of_model",
]

#: Block types that carry one image (OpenAI chat, langchain-core v1 / Anthropic, Responses).
IMAGE_TYPES = frozenset({"image_url", "image", "input_image"})

OPENAI_LOW = 85
OPENAI_TILE = 170
OPENAI_BASE = 85
OPENAI_FIT = 2048
OPENAI_SHORT_SIDE = 768
OPENAI_TILE_PX = 512
#: The most tiles an image can cover after OpenAI's scaling (768x2048: 2x4 tiles).
OPENAI_MAX_TILES = 8
PATCH_PX = 32
MAX_PATCHES = 1_536
ANTHROPIC_PIXELS_PER_TOKEN = 750
ANTHROPIC_LONG_EDGE = 1_568
ANTHROPIC_MAX_TOKENS = 1_600

#: Patch-priced OpenAI models and their multipliers (OpenAI, "Images and vision",
#: "Calculating costs"); the longest matching prefix wins.
PATCH_MULTIPLIERS = {
    "gpt-4.1-mini": 1.62,
    "gpt-4.1-nano": 2.46,
    "gpt-5-mini": 1.62,
    "gpt-5-nano": 2.46,
    "o4-mini": 1.72,
}
_OPENAI_PREFIXES = ("gpt-", "chatgpt-", "o1", "o3", "o4", "computer-use", "openai")
_ANTHROPIC_PREFIXES = ("claude", "anthropic")

#: Segments a JPEG scan hops over before it gives up (EXIF, ICC and XMP come first).
_JPEG_HOPS = 64
_SIZE_CACHE_LIMIT = 4_096
_SIZE_CACHE: dict[tuple[int, int], tuple[str, int, int] | None] = {}
_TOKENS_CACHE: dict[tuple[Any, ...], int] = {}


@dataclass(frozen=True, slots=True)
class ImagePricing:
    """How one provider prices an image.

    ``kind`` is ``"openai"`` (tiles), ``"openai-patch"`` (32-pixel patches times
    ``multiplier``), ``"anthropic"`` or ``"largest"`` (the most of ``"openai"`` and
    ``"anthropic"``: the model is unknown).
    """

    kind: str
    multiplier: float = 1.0

    def tokens(self, width: int | None, height: int | None, detail: str | None = None) -> int:
        """Tokens of an image of ``width`` x ``height`` (``None``: unknown, the maximum)."""
        known = width is not None and height is not None and width > 0 and height > 0
        if self.kind == "largest":
            return max(OPENAI.tokens(width, height, detail), ANTHROPIC.tokens(width, height))
        if self.kind == "anthropic":
            return anthropic_tokens(width, height) if known else ANTHROPIC_MAX_TOKENS  # type: ignore[arg-type]
        if self.kind == "openai-patch":
            patches = patch_count(width, height) if known else MAX_PATCHES  # type: ignore[arg-type]
            return math.ceil(patches * self.multiplier)
        if detail == "low":
            return OPENAI_LOW
        return openai_tile_tokens(width, height) if known else _openai_max()  # type: ignore[arg-type]


OPENAI = ImagePricing("openai")
ANTHROPIC = ImagePricing("anthropic")
LARGEST = ImagePricing("largest")


def _openai_max() -> int:
    return OPENAI_BASE + OPENAI_TILE * OPENAI_MAX_TILES


def openai_tile_tokens(width: int, height: int) -> int:
    """OpenAI's high-detail cost: fit 2048x2048, shortest side down to 768, 170 a 512 tile
    plus 85. ``openai_tile_tokens(1280, 800)`` is 1,105 (OpenAI's own examples: 1024x1024
    costs 765, 2048x4096 costs 1,105)."""
    w, h = float(width), float(height)
    if max(w, h) > OPENAI_FIT:
        scale = OPENAI_FIT / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > OPENAI_SHORT_SIDE:
        scale = OPENAI_SHORT_SIDE / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / OPENAI_TILE_PX) * math.ceil(h / OPENAI_TILE_PX)
    return OPENAI_BASE + OPENAI_TILE * tiles


def patch_count(width: int, height: int) -> int:
    """OpenAI's 32-pixel patches of an image, at most 1,536 (a larger image is scaled down
    so that a whole number of patches fits, as OpenAI's "Calculating costs" describes)."""
    raw = math.ceil(width / PATCH_PX) * math.ceil(height / PATCH_PX)
    if raw <= MAX_PATCHES:
        return raw
    shrink = math.sqrt(PATCH_PX * PATCH_PX * MAX_PATCHES / (width * height))
    w, h = width * shrink / PATCH_PX, height * shrink / PATCH_PX
    shrink *= min(math.floor(w) / w, math.floor(h) / h)
    w, h = width * shrink / PATCH_PX, height * shrink / PATCH_PX
    return min(MAX_PATCHES, math.ceil(w) * math.ceil(h))


def anthropic_tokens(width: int, height: int) -> int:
    """Anthropic's cost: ``width * height / 750`` after fitting a 1,568-pixel long edge, at
    most 1,600 (Anthropic, "Vision", "Calculate image costs")."""
    w, h = float(width), float(height)
    if max(w, h) > ANTHROPIC_LONG_EDGE:
        scale = ANTHROPIC_LONG_EDGE / max(w, h)
        w, h = w * scale, h * scale
    return min(ANTHROPIC_MAX_TOKENS, math.ceil(w * h / ANTHROPIC_PIXELS_PER_TOKEN))


def pricing_for(model: str | None) -> ImagePricing:
    """The image pricing of a model name (``"claude-sonnet-4-5"``, ``"openai:gpt-4o"``,
    ``"gpt-4.1-mini"``); :data:`LARGEST` for an unknown model or none.

    Example:
        >>> pricing_for("anthropic:claude-3-5-sonnet").kind, pricing_for("gpt-4o").kind
        ('anthropic', 'openai')
        >>> pricing_for("o4-mini").multiplier, pricing_for("llama3").kind
        (1.72, 'largest')
    """
    if not model:
        return LARGEST
    name = model.strip().lower()
    if any(p in name for p in _ANTHROPIC_PREFIXES):  # "claude-...", "anthropic.claude-..."
        return ANTHROPIC
    provider, sep, rest = name.partition(":")
    if sep and provider.replace("_", "").isalnum():  # init_chat_model's "openai:gpt-4o"
        name = rest
    name = name.rsplit("/", 1)[-1]  # "openai/gpt-4o" (routers)
    patch = max((p for p in PATCH_MULTIPLIERS if name.startswith(p)), key=len, default=None)
    if patch is not None:
        return ImagePricing("openai-patch", PATCH_MULTIPLIERS[patch])
    if name.startswith(_OPENAI_PREFIXES) or provider in ("openai", "azure", "azure_openai"):
        return OPENAI
    return LARGEST


#: How deep :func:`pricing_of_model` unwraps a model (``bind_tools``, ``with_retry``,
#: ``with_fallbacks``, ``with_config`` each wrap it once).
_UNWRAP_DEPTH = 8


def pricing_of_model(model: object) -> ImagePricing:
    """The image pricing of a chat model object: its provider and model name as LangSmith
    traces them (``BaseChatModel._get_ls_params``: ``ls_provider``, ``ls_model_name``),
    through the wrappers a model is often handed in (``bind_tools``, ``with_retry``,
    ``with_config``: ``.bound``; ``with_fallbacks``: ``.runnable``); else its ``model_name``
    or ``model`` attribute; :data:`LARGEST` when nothing names a known provider.

    Example:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> pricing_of_model(FakeListChatModel(responses=["ok"])).kind
        'largest'
        >>> pricing_of_model(None).kind
        'largest'
    """
    model = _unwrapped(model)
    if model is None:
        return LARGEST
    provider, name = _traced_names(model)
    if not name:
        name = str(getattr(model, "model_name", "") or getattr(model, "model", "") or "")
    if not name and not provider:
        return LARGEST
    return pricing_for(f"{provider}:{name}" if provider and ":" not in name else name or provider)


def _unwrapped(model: object) -> object:
    """The chat model inside ``bind_tools``/``with_retry``/``with_config`` (``.bound``) and
    ``with_fallbacks`` (``.runnable``) wrappers."""
    for _ in range(_UNWRAP_DEPTH):
        inner = getattr(model, "bound", None) or getattr(model, "runnable", None)
        if inner is None or inner is model:
            break
        model = inner
    return model


def _traced_names(model: object) -> tuple[str, str]:
    """``(ls_provider, ls_model_name)`` of a chat model (``("", "")`` when it has none)."""
    params = getattr(model, "_get_ls_params", None)
    if not callable(params):
        return "", ""
    try:
        found = params()
    except Exception:  # a third-party model's params may need call-time arguments
        return "", ""
    if not isinstance(found, dict):
        return "", ""
    return str(found.get("ls_provider") or ""), str(found.get("ls_model_name") or "")


def is_image_block(block: dict[str, Any]) -> bool:
    """Whether a content block carries one image (any of the four shapes)."""
    kind = block.get("type")
    return kind in IMAGE_TYPES or (kind is None and "image_url" in block)


def _image_fields(block: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(payload or URL, detail)`` of an image block."""
    detail = block.get("detail")
    ref: Any = None
    inner = block.get("image_url")
    if isinstance(inner, dict):
        ref = inner.get("url")
        detail = inner.get("detail", detail)
    elif isinstance(inner, str):
        ref = inner
    source = block.get("source")
    if ref is None and isinstance(source, dict):
        ref = source.get("data") or source.get("url")
    if ref is None:
        ref = block.get("base64") or block.get("data") or block.get("url")
    extras = block.get("extras")
    if detail is None and isinstance(extras, dict):
        detail = extras.get("detail")
    return (ref if isinstance(ref, str) else None), (detail if isinstance(detail, str) else None)


def image_size(block: dict[str, Any]) -> tuple[str, int, int] | None:
    """``(format, width, height)`` of an inline image block, read from its header; ``None``
    for a URL, a file id, or a payload whose header is not PNG, GIF, WebP or JPEG.

    Example:
        >>> png = base64.b64encode(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(4) + b"IHDR"
        ...     + struct.pack(">II", 1280, 800)).decode()
        >>> image_size({"type": "image", "base64": png, "mime_type": "image/png"})
        ('png', 1280, 800)
    """
    return _size_of(_image_fields(block)[0])


def _size_of(ref: str | None) -> tuple[str, int, int] | None:
    if not ref:
        return None
    # A str caches its hash: the same payload counted again costs one lookup, no slice.
    key = (len(ref), hash(ref))
    if key in _SIZE_CACHE:
        return _SIZE_CACHE[key]
    size = None
    if ref.startswith("data:"):
        header, _, payload = ref.partition(",")
        if ";base64" not in header:
            payload = ""
    elif ref.startswith(("http://", "https://", "gs://", "s3://", "file:")):
        payload = ""
    else:
        payload = ref
    if payload:
        try:
            size = _read_size(_Base64(payload))
        except (ValueError, struct.error, binascii.Error):
            size = None
    if len(_SIZE_CACHE) >= _SIZE_CACHE_LIMIT:
        _SIZE_CACHE.clear()
    _SIZE_CACHE[key] = size
    return size


def image_tokens(block: dict[str, Any], pricing: ImagePricing = LARGEST) -> int:
    """Tokens of one image block under ``pricing`` (the maximum when its size is unknown).

    Example:
        >>> image_tokens({"type": "image_url", "image_url": {"url": "https://x.org/a.png"}},
        ...              OPENAI)
        1445
    """
    ref, detail = _image_fields(block)
    key = (len(ref), hash(ref), pricing.kind, pricing.multiplier, detail) if ref else None
    cached = _TOKENS_CACHE.get(key) if key else None
    if cached is not None:
        return cached
    size = _size_of(ref)
    n = pricing.tokens(size[1], size[2], detail) if size else pricing.tokens(None, None, detail)
    if key:
        if len(_TOKENS_CACHE) >= _SIZE_CACHE_LIMIT:
            _TOKENS_CACHE.clear()
        _TOKENS_CACHE[key] = n
    return n


def describe_image(block: dict[str, Any]) -> str:
    """``"image 1280x800 png"`` (or ``"image of unknown size"``): what a placeholder names."""
    size = image_size(block)
    if size is None:
        return "image of unknown size"
    fmt, w, h = size
    return f"image {w}x{h} {fmt}"


class _Base64:
    """Random access to the bytes of a base64 text, decoding only the 4-character groups a
    read covers."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def read(self, offset: int, size: int) -> bytes:
        start = (offset // 3) * 4
        end = ((offset + size + 2) // 3) * 4
        chunk = self.text[start:end]
        chunk += "=" * (-len(chunk) % 4)
        data = base64.b64decode(chunk)
        skip = offset - (offset // 3) * 3
        return data[skip : skip + size]


def _read_size(data: _Base64) -> tuple[str, int, int] | None:
    head = data.read(0, 32)
    if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR":
        w, h = struct.unpack(">II", head[16:24])
        return "png", w, h
    if head[:6] in (b"GIF87a", b"GIF89a"):
        w, h = struct.unpack("<HH", head[6:10])
        return "gif", w, h
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _webp_size(head)
    if head[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _webp_size(head: bytes) -> tuple[str, int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", head[26:30])
        return "webp", w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return "webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        w = int.from_bytes(head[24:27], "little") + 1
        h = int.from_bytes(head[27:30], "little") + 1
        return "webp", w, h
    return None


#: JPEG start-of-frame markers (baseline, progressive, lossless...; not DHT, JPG or DAC).
_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def _jpeg_size(data: _Base64) -> tuple[str, int, int] | None:
    offset = 2
    for _ in range(_JPEG_HOPS):
        seg = data.read(offset, 9)
        if len(seg) < 4 or seg[0] != 0xFF:
            return None
        marker = seg[1]
        if marker == 0xFF:  # fill byte
            offset += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            offset += 2
            continue
        (length,) = struct.unpack(">H", seg[2:4])
        if marker in _SOF:
            if len(seg) < 9:
                return None
            h, w = struct.unpack(">HH", seg[5:9])
            return "jpeg", w, h
        if marker == 0xDA or length < 2:  # the scan starts: no frame header before it
            return None
        offset += 2 + length
    return None
