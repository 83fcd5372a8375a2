"""The deployment files cannot drift from the real configuration keys and topic names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamk.engine.config import DEFAULTS, load_config

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
YAML_FILES = [DEPLOY / "docker-compose.yml", *sorted((DEPLOY / "k8s").glob("*.yaml"))]


def _config(path: Path) -> dict:
    return load_config(path, environ={})


def _configmap_toml(tmp_path: Path) -> Path:
    """The ``streamk.toml: |`` block of the ConfigMap, de-indented (no YAML parser needed)."""
    lines = (DEPLOY / "k8s" / "configmap.yaml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "streamk.toml: |") + 1
    block = []
    for line in lines[start:]:
        if line.strip() and not line.startswith("    "):
            break
        block.append(line[4:])
    path = tmp_path / "configmap.toml"
    path.write_text("\n".join(block) + "\n")
    return path


def test_example_config_loads_with_only_real_keys() -> None:
    config = _config(DEPLOY / "streamk.toml")
    assert config["snapshot_dir"] == "/var/lib/streamk/snapshots"
    assert config["metrics_port"] > 0 and config["snapshot_topic"]


def test_configmap_config_loads_and_matches_the_example(tmp_path: Path) -> None:
    example = _config(DEPLOY / "streamk.toml")
    embedded = _config(_configmap_toml(tmp_path))
    differ = {k for k in DEFAULTS if example[k] != embedded[k]}
    assert differ == {"bootstrap_servers"}  # the only value that depends on where it runs


def test_environment_variables_in_deploy_files_name_real_keys() -> None:
    for path in [DEPLOY / "Dockerfile", *YAML_FILES]:
        for name in re.findall(r"STREAMK_([A-Z_]+)", path.read_text()):
            assert name.lower() in DEFAULTS, f"{path.name}: STREAMK_{name} is not a config key"


def test_dockerfile_runs_the_configured_engine_as_a_non_root_user() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert text.count("FROM python:3.11-slim") == 1
    assert 'ENTRYPOINT ["streamk", "run", "--config", "/etc/streamk/streamk.toml"]' in text
    assert re.search(r"^USER streamk", text, re.M)
    assert "HEALTHCHECK" in text and 'VOLUME ["/var/lib/streamk"]' in text
    port = int(re.search(r"STREAMK_METRICS_PORT=(\d+)", text)[1])
    assert port == _config(DEPLOY / "streamk.toml")["metrics_port"]


def test_compose_creates_the_topics_the_config_names() -> None:
    text = (DEPLOY / "docker-compose.yml").read_text()
    config = _config(DEPLOY / "streamk.toml")
    for key in ("topic", "snapshot_topic", "predictions_topic", "dead_letter_topic"):
        assert f"--topic {config[key]} " in text, key
    snapshot_line = text[text.index(f"--topic {config['snapshot_topic']} ") :].split("\n", 3)
    assert "cleanup.policy=compact" in "".join(snapshot_line[:2])
    assert "image: apache/kafka:" in text and "KAFKA_PROCESS_ROLES: broker,controller" in text
    assert "streamk produce" in text


def test_statefulset_gives_time_to_snapshot_and_commit_on_sigterm() -> None:
    text = (DEPLOY / "k8s" / "statefulset.yaml").read_text()
    grace = int(re.search(r"terminationGracePeriodSeconds: (\d+)", text)[1])
    assert grace >= 60
    config = _config(DEPLOY / "streamk.toml")
    assert f"containerPort: {config['metrics_port']}" in text
    # the probes use the engine's own health endpoints (tests/test_health.py serves them)
    assert "livenessProbe:" in text and "path: /healthz" in text
    assert "readinessProbe:" in text and "path: /ready" in text
    assert config["metrics_host"] == "0.0.0.0"  # probes and Prometheus come from outside
    assert "volumeClaimTemplates" in text and "fieldPath: metadata.name" in text


@pytest.mark.parametrize("path", YAML_FILES, ids=[p.name for p in YAML_FILES])
def test_yaml_parses(path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs
    if path.name == "docker-compose.yml":
        services = docs[0]["services"]
        assert {"kafka", "topics", "worker-1", "worker-2", "produce"} <= set(services)
        assert (
            services["worker-1"]["environment"]["STREAMK_MODEL_NAME"]
            != (services["worker-2"]["environment"]["STREAMK_MODEL_NAME"])
        )
    else:
        assert all("kind" in d and "apiVersion" in d for d in docs)
