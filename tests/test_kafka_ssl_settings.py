"""Client-certificate TLS (mTLS) settings reach both transports, and a certificate file that
is not there is refused at start-up, naming the key (session 26).

The configuration had ``ssl_cafile`` alone: a cluster that authenticates clients by
certificate (mutual TLS, the default of several managed Kafka services) could not be
reached at all. ``ssl_certfile``, ``ssl_keyfile`` and ``ssl_password`` now pass to every
client, in kafka-python's names and translated for librdkafka. (No TLS listener is started
here: the tests' broker speaks plaintext, so the handshake itself is not exercised.)
"""

from __future__ import annotations

import pytest
from streamk_run import streamk

from streamk.engine.config import load_config
from streamk.engine.runner import kafka_settings
from streamk.errors import ConfigError
from streamk.sources.kafka_confluent import SETTING_NAMES


def _files(tmp_path) -> dict[str, str]:
    out = {}
    for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        path = tmp_path / f"{key}.pem"
        path.write_text("-----BEGIN CERTIFICATE-----\n")
        out[key] = str(path)
    return out


def test_every_security_setting_reaches_both_transports(tmp_path):
    overrides = {
        **_files(tmp_path),
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "u",
        "sasl_password": "p",
        "ssl_password": "k",
    }
    settings = kafka_settings(load_config(overrides=overrides, environ={}))
    assert settings == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
        "ssl_cafile": overrides["ssl_cafile"],
        "ssl_certfile": overrides["ssl_certfile"],
        "ssl_keyfile": overrides["ssl_keyfile"],
        "ssl_password": "k",
    }
    assert set(settings) <= set(SETTING_NAMES)  # each one translated for librdkafka
    assert SETTING_NAMES["ssl_password"] == "ssl.key.password"


@pytest.mark.parametrize("key", ["ssl_cafile", "ssl_certfile", "ssl_keyfile"])
def test_a_missing_certificate_file_is_refused_naming_the_key(tmp_path, key):
    with pytest.raises(ConfigError, match=f"{key} = .* is not a file streamk can read"):
        kafka_settings(load_config(overrides={key: str(tmp_path / "absent.pem")}, environ={}))


def test_the_engine_refuses_a_missing_client_certificate_before_connecting(tmp_path):
    done = streamk(
        "run", "--bootstrap-servers", "127.0.0.1:9", "--topic", "t", "--security-protocol",
        "SSL", "--ssl-certfile", str(tmp_path / "client.pem"), "--snapshot-dir",
        str(tmp_path / "s"), "--quiet",
    )  # fmt: skip
    assert done.returncode == 2
    assert "ssl_certfile = " in done.stderr and "--ssl-certfile" in done.stderr
    assert "cannot connect" not in done.stderr  # refused before any connection attempt
