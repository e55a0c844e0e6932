"""A server URL the CLI cannot parse is a usage error said in one line (docs/cli.md, "Errors and exit
codes"), never a traceback: ``http://[::1`` (an IPv6 address without its closing bracket) made
``urllib`` raise ``ValueError`` out of ``osmo login`` and, through ``OSMO_URL``, every command."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cli.main import app


@pytest.mark.parametrize("args", [
    pytest.param(["login", "http://[::1", "--token", "t", "--no-verify"], id="_case_login"),
    pytest.param(["pool", "list"], id="_case_a_command_with_OSMO_URL"),
])
def test_an_unparsable_url_is_a_usage_error(tmp_path, args):
    env = {"OSMO_CONFIG": str(tmp_path / "config.json"), "OSMO_URL": "http://[::1", "OSMO_TOKEN": "t"}
    result = CliRunner().invoke(app, args, env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: 'http://[::1' is not a valid URL (Invalid IPv6 URL); example: http://localhost:8000"]
    assert not (tmp_path / "config.json").exists()
