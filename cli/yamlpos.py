"""Line numbers for the server's error paths in the user's own YAML file (:mod:`parsing.yamlpos`),
templates included (:func:`yaml_shape`)."""

from __future__ import annotations

from parsing.yamlpos import line_of, path_segments, yaml_shape

__all__ = ["line_of", "path_segments", "yaml_shape"]
