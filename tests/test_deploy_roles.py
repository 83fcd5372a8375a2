"""deploy/ runs the scale-out roles: one merger and one scorer beside the workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamk.engine.config import load_config

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
yaml = pytest.importorskip("yaml")


def test_compose_runs_one_merger_and_one_scorer_on_created_topics():
    text = (DEPLOY / "docker-compose.yml").read_text()
    services = yaml.safe_load(text)["services"]
    config = load_config(DEPLOY / "streamk.toml", environ={})
    assert services["merger"]["entrypoint"][:2] == ["streamk", "merge"]
    assert services["scorer"]["entrypoint"][:2] == ["streamk", "score"]
    scores = services["scorer"]["environment"]["STREAMK_PREDICTIONS_TOPIC"]
    for topic in (config["score_topic"], scores):
        assert f"--topic {topic} " in text, topic
    assert scores != config["predictions_topic"]  # the merged model's predictions apart
    assert config["score_group"] != config["group"]  # scorers take no worker partitions


def test_kubernetes_runs_exactly_one_merger_and_a_scorer():
    kustomization = (DEPLOY / "k8s" / "kustomization.yaml").read_text()
    merger = yaml.safe_load((DEPLOY / "k8s" / "merger.yaml").read_text())
    scorer = yaml.safe_load((DEPLOY / "k8s" / "scorer.yaml").read_text())
    assert "merger.yaml" in kustomization and "scorer.yaml" in kustomization
    assert merger["spec"]["replicas"] == 1 and merger["spec"]["strategy"]["type"] == "Recreate"
    container = merger["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["streamk", "merge"]
    assert scorer["spec"]["template"]["spec"]["containers"][0]["command"][:2] == [
        "streamk",
        "score",
    ]
