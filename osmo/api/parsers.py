from rest_framework.parsers import BaseParser


class YAMLTextParser(BaseParser):
    """Hands a raw YAML body through as text; the spec package parses it safely with limits."""

    media_type = "application/yaml"

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read()
        return {"spec": raw.decode("utf-8", errors="replace")}


class XYAMLTextParser(YAMLTextParser):
    media_type = "application/x-yaml"


class TextYAMLParser(YAMLTextParser):
    media_type = "text/yaml"
