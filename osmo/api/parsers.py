from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser


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
