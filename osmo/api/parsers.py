from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

# No document of this API nests more than a dozen levels; 200 leaves room and keeps every later
# recursive step (serializers, the spec parser, YAML dumping) far from Python's recursion limit.
JSON_MAX_DEPTH = 200
JSON_TOO_DEEP_MESSAGE = f"JSON parse error - nested deeper than {JSON_MAX_DEPTH} levels."


def json_depth_exceeds(data: Any, limit: int = JSON_MAX_DEPTH) -> bool:
    """True when ``data`` nests lists/objects more than ``limit`` levels (iterative: no recursion). One
    iterator per open container, so a list of 800,000 empty lists is not copied into a stack of pairs
    first (1.5 s of a 2.5 MB body's 2.8 s)."""
    if not isinstance(data, dict | list):
        return False
    stack: list[Iterator[Any]] = [iter(data.values() if isinstance(data, dict) else data)]
    while stack:
        for child in stack[-1]:
            if isinstance(child, dict | list):
                if len(stack) >= limit:
                    return True
                stack.append(iter(child.values() if isinstance(child, dict) else child))
                break
        else:
            stack.pop()
    return False


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser with a nesting limit. Python's decoder recurses per level and raises
    ``RecursionError`` (a 500) near 1,000 levels; deeper bodies are a ``ParseError`` (400) here."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(JSON_TOO_DEEP_MESSAGE) from exc
        if json_depth_exceeds(data):
            raise ParseError(JSON_TOO_DEEP_MESSAGE)
        return data


class YAMLTextParser(BaseParser):
    """Hands a raw YAML body through as text; the spec package parses it safely with limits.
    The body is read up to Django's upload limit (413 beyond) and must be UTF-8 (400 otherwise)."""

    media_type = "application/yaml"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if stream is not None else b""
        if limit is not None and len(raw) > limit:
            raise RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"The YAML body is not valid UTF-8 (byte {exc.start}).") from exc
        return {"spec": text}


class XYAMLTextParser(YAMLTextParser):
    media_type = "application/x-yaml"


class TextYAMLParser(YAMLTextParser):
    media_type = "text/yaml"
