"""``magnetar tokens`` in-process (outputs as ``pulsar tokens`` prints them) and the client-side
``authPlugin``/``authParams`` parsing the admin CLI and magnetar.client use."""

from __future__ import annotations

import base64
import json
import pickle
from pathlib import Path

import pytest

from magnetar.cli import main
from magnetar.cli.tokens import relative_seconds
from magnetar.client.auth import AuthenticationToken, from_plugin
from magnetar.client.errors import InvalidConfiguration

PLUGIN = "org.apache.pulsar.client.impl.auth."


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["tokens", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_secret_key_token_show_and_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "secret.key"
    assert run(capsys, "create-secret-key", "-o", str(key))[0] == 0
    assert len(key.read_bytes()) == 32
    code, token, _ = run(capsys, "create", "--secret-key", f"file://{key}", "--subject", "test-user",
                         "--expiry-time", "1y", "-c", "tenant=acme")
    assert code == 0
    code, shown, _ = run(capsys, "show", "-i", token.strip())
    header, sep, claims = shown.strip().partition("\n---\n")
    assert sep and json.loads(header)["alg"] == "HS256"
    assert json.loads(claims)["sub"] == "test-user" and json.loads(claims)["tenant"] == "acme"
    code, valid, _ = run(capsys, "validate", "-sk", f"file://{key}", "-i", token.strip())
    assert code == 0 and valid.startswith("{sub=test-user, tenant=acme, exp=")
    other = "data:;base64," + base64.b64encode(b"o" * 32).decode()
    code, _, err = run(capsys, "validate", "-sk", other, "-i", token.strip())
    assert code == 1 and "invalid token" in err


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_key_pair_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str], alg: str) -> None:
    private, public = tmp_path / "private.der", tmp_path / "public.der"
    assert run(capsys, "create-key-pair", "-a", alg, "--output-private-key", str(private),
               "--output-public-key", str(public))[0] == 0
    code, token, _ = run(capsys, "create", "--private-key", f"file://{private}", "--subject", "svc")
    assert code == 0
    token_file = tmp_path / "token"
    token_file.write_text(token)
    code, valid, _ = run(capsys, "validate", "-pk", f"file://{public}", "-f", str(token_file))
    assert (code, valid.strip()) == (0, "{sub=svc}")
    assert json.loads(run(capsys, "show", "-f", str(token_file))[1].split("---")[0])["alg"] == alg


def test_base64_secret_key_and_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "create-secret-key", "-b", "-a", "HS512")
    assert code == 0 and len(base64.b64decode(out)) == 64
    assert run(capsys, "show", "-i", "not-a-token")[0] == 1
    assert run(capsys, "show")[0] == 1
    assert relative_seconds("2d") == 172_800 and relative_seconds("30") == 30


def test_auth_plugins_and_params(tmp_path: Path) -> None:
    token_file = tmp_path / "t"
    token_file.write_text("abc\n")
    assert from_plugin(PLUGIN + "AuthenticationToken", "token:xyz").http_headers() == {"Authorization": "Bearer xyz"}
    assert from_plugin("token", f"file://{token_file}").auth_data() == b"abc"
    assert from_plugin(PLUGIN + "AuthenticationToken", '{"token": "j"}').auth_data() == b"j"
    basic = from_plugin(PLUGIN + "AuthenticationBasic", '{"userId": "u", "password": "p"}')
    assert basic.http_headers() == {"Authorization": "Basic " + base64.b64encode(b"u:p").decode()}
    tls = from_plugin(PLUGIN + "AuthenticationTls", "tlsCertFile:/c.pem,tlsKeyFile:/k.pem")
    assert (tls.method, tls.tls_cert_file, tls.tls_key_file) == ("tls", "/c.pem", "/k.pem")
    assert from_plugin("", "") is None
    with pytest.raises(InvalidConfiguration):
        from_plugin("com.example.Oauth", "")
    with pytest.raises(InvalidConfiguration):
        from_plugin(PLUGIN + "AuthenticationTls", "tlsCertFile:/c.pem")


def _supplier() -> str:
    return "fresh"


def test_token_supplier_is_asked_each_time_and_pickles() -> None:
    auth = AuthenticationToken(_supplier)
    assert auth.auth_data() == b"fresh"
    assert pickle.loads(pickle.dumps(auth)).auth_data() == b"fresh"
