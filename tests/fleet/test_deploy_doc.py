"""docs/deploy.md's Kubernetes example is valid: the manifests parse, the ConfigMap's
failover.yaml loads as `failover serve` would load it, and the shutdown timings fit."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from failover.gateway._serve import ServeOptions, check
from failover.gateway._settings import load_gateway_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


def manifests() -> dict[str, dict[str, Any]]:
    text = DOC.read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    k8s = [b for b in blocks if "apiVersion:" in b]
    assert len(k8s) == 1, "expected one Kubernetes example in docs/deploy.md"
    return {d["kind"]: d for d in yaml.safe_load_all(k8s[0])}


def test_the_configmap_loads_as_failover_serve_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = manifests()
    assert set(docs) == {"Secret", "ConfigMap", "Deployment", "Service"}
    env = dict(docs["Secret"]["stringData"])
    cfg = tmp_path / "failover.yaml"
    cfg.write_text(docs["ConfigMap"]["data"]["failover.yaml"])
    config, settings = load_gateway_config(cfg, env=env)
    assert config.state.backend == "redis" and config.state.url is not None
    assert settings.ledger is not None and settings.ledger.backend == "redis"
    assert not settings.open  # tenants: the gateway may bind 0.0.0.0
    args = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    host, workers = args[args.index("--host") + 1], int(args[args.index("--workers") + 1])
    for name, value in env.items():  # what envFrom: secretRef gives the container
        monkeypatch.setenv(name, value)
    check(ServeOptions(config=str(cfg), host=host, workers=workers))  # refuses an open gateway on 0.0.0.0
    replicas = docs["Deployment"]["spec"]["replicas"]
    assert config.state.local_share <= 1 / (replicas * workers) + 0.01, "local_share must hold the quota"


def test_probes_and_shutdown_timings_fit_the_drain(tmp_path: Path) -> None:
    docs = manifests()
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    cfg = tmp_path / "failover.yaml"
    cfg.write_text(docs["ConfigMap"]["data"]["failover.yaml"])
    _, settings = load_gateway_config(cfg, env=dict(docs["Secret"]["stringData"]))
    pre_stop = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    # preStop, then the drain, then uvicorn's own last 5 s: all before the kubelet's SIGKILL
    assert pod["terminationGracePeriodSeconds"] >= pre_stop + settings.drain_seconds + 5
    envs = {e["secretRef"]["name"] for e in container["envFrom"]}
    assert envs == {docs["Secret"]["metadata"]["name"]}
