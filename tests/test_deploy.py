"""The deployment files cannot drift from the real configuration keys and topic names."""

from __future__ import annotations

import fnmatch
import re
import shlex
from pathlib import Path

import pytest

from streamk.engine.config import DEFAULTS, load_config

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
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


def dockerfile_stages(path: Path = DEPLOY / "Dockerfile") -> list[dict]:
    """The Dockerfile as stages: ``{"name", "image", "steps": [(INSTRUCTION, args)]}``.

    Comments dropped, ``\\``-continued lines joined; enough of the format for these checks.
    """
    lines, joined = [], ""
    for raw in path.read_text().splitlines():
        if not joined and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.rstrip().endswith("\\"):
            joined += raw.rstrip()[:-1]
            continue
        lines.append(joined + raw)
        joined = ""
    stages: list[dict] = []
    for line in lines:
        word, _, args = line.strip().partition(" ")
        word = word.upper()
        if word == "FROM":
            parts = args.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append({"name": name, "image": parts[0], "steps": []})
        else:
            stages[-1]["steps"].append((word, args.strip()))
    return stages


def copies(stage: dict) -> list[tuple[str | None, list[str], str]]:
    """``(from_stage, sources, destination)`` of each COPY in ``stage``."""
    out = []
    for word, args in stage["steps"]:
        if word == "COPY":
            parts = shlex.split(args)
            source_stage = next(
                (p.split("=", 1)[1] for p in parts if p.startswith("--from=")), None
            )
            paths = [p for p in parts if not p.startswith("--")]
            out.append((source_stage, paths[:-1], paths[-1]))
    return out


def excluded(relpath: str, patterns: list[str]) -> bool:
    """Whether the build context leaves ``relpath`` out (patterns as in the .dockerignore;
    none of ours uses ``!`` exceptions). A pattern matching a parent folder excludes it."""
    parts = relpath.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        if pattern.startswith("**/"):
            tail = pattern[3:]
            if any(fnmatch.fnmatchcase(p, tail) for p in parts):
                return True
        elif any(fnmatch.fnmatchcase(p, pattern) for p in prefixes):
            return True
    return False


def context_ignores() -> list[str]:
    text = (DEPLOY / "Dockerfile.dockerignore").read_text()
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def _runs(stage: dict) -> str:
    return "\n".join(args for word, args in stage["steps"] if word == "RUN")


def test_dockerfile_builds_the_core_in_a_builder_stage_and_runs_it_compiled() -> None:
    builder, runtime = dockerfile_stages()
    # the same Python on both sides: the wheel's cp311 module must load in the runtime
    assert builder["image"] == runtime["image"] == "python:3.11-slim"
    assert builder["name"] and runtime["name"] is None
    install = re.search(r"apt-get install[^&]*", _runs(builder))[0].split()
    assert {"gcc", "libc6-dev"} <= set(install)
    assert "apt-get" not in _runs(runtime)  # no compiler in the image that runs
    # the builder copies what the build reads and makes a wheel of it
    copied = {src for _, sources, _ in copies(builder) for src in sources}
    assert {"pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "streamk"} <= copied
    wheel_dir = re.search(r"pip wheel .*--wheel-dir (\S+) \.", _runs(builder))[1]
    # ... and accepts only a platform wheel: a pure one means the core did not compile
    assert re.search(
        rf"ls {re.escape(wheel_dir)}/streamk-\*-cp311-cp311-linux_\*\.whl", _runs(builder)
    )
    # the runtime installs that wheel (not the sources) and checks it runs compiled
    (copy,) = [c for c in copies(runtime) if c[0] == builder["name"]]
    assert copy[1] == [wheel_dir]
    assert re.search(rf"pip install {re.escape(copy[2])}/streamk-\*\.whl", _runs(runtime))
    assert not any(src in ("streamk", "setup.py") for _, srcs, _ in copies(runtime) for src in srcs)
    assert "a.available()" in _runs(runtime) and "a.describe()" in _runs(runtime)


def test_every_copy_source_is_in_the_repository_and_the_build_context() -> None:
    ignored = context_ignores()
    for stage in dockerfile_stages():
        for from_stage, sources, _ in copies(stage):
            if from_stage is not None:
                continue
            for src in sources:
                assert (ROOT / src).exists(), f"COPY {src}: not in the repository"
                assert not excluded(src, ignored), f"COPY {src}: excluded by the .dockerignore"
    # the core's sources reach the builder; local build products do not
    for needed in ("streamk/_core.pyx", "streamk/_fastexp.h", "streamk/accel.py"):
        assert not excluded(needed, ignored), needed
    for product in ("streamk/_core.c", "streamk/_core.cpython-311-x86_64-linux-gnu.so", "build"):
        assert excluded(product, ignored), product


def test_dockerignore_matcher_follows_the_patterns() -> None:
    # the matcher above is itself checked against cases written out by hand
    patterns = ["build", "**/*.so", "**/__pycache__", "streamk/_core.c"]
    for path in ["build/lib/x.py", "a/b/m.so", "streamk/__pycache__/x.pyc", "streamk/_core.c"]:
        assert excluded(path, patterns), path
    for path in ["streamk/build.py", "setup.py", "streamk/_core.pyx"]:
        assert not excluded(path, patterns), path


def test_dockerfile_runs_the_configured_engine_as_a_non_root_user() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
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
