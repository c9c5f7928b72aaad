"""The deployment files say what they mean: every setting they set exists, probes and replicas are right.

No image registry is reachable here, so the compose file, the Kubernetes manifests and
the Dockerfile are not run. What can be checked without them is: they parse; each
``BROKERGATE_*`` variable they set is a field of ``Settings`` and its value passes the
settings' validation; the Deployment runs >= 3 replicas with readiness on /readyz?backend=log and
liveness on /healthz, fed by the ConfigMap and Secret that exist; compose runs KRaft
Kafka, ZooKeeper, Redis with persistence, three gateways and nginx over them. Where
``docker compose`` or ``nginx`` are installed, they check the files too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from service.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PREFIX = "BROKERGATE_"


def k8s_documents() -> dict[str, dict[str, Any]]:
    """Every manifest of deploy/k8s by kind (one object per kind there)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") != "Kustomization":
                assert doc["kind"] not in found, f"two {doc['kind']}s"
                found[doc["kind"]] = doc
    return found


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((DEPLOY / "compose.yaml").read_text()))


def env_map(environment: dict[str, Any] | list[str] | None) -> dict[str, str]:
    """A compose ``environment`` (mapping or NAME=value list) as a dict of strings."""
    if environment is None:
        return {}
    if isinstance(environment, list):
        return dict(item.split("=", 1) for item in environment)
    return {k: str(v) for k, v in environment.items()}


def dockerfile_env() -> dict[str, str]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            found.update(re.findall(r"(\w+)=(\S+)", line))
    return found


def systemd_env() -> dict[str, str]:
    text = (DEPLOY / "brokergate.service").read_text()
    return dict(re.findall(r"^#?\s*Environment=(\w+)=(\S+)", text, re.MULTILINE))


def gateway_settings_sources() -> dict[str, dict[str, str]]:
    docs = k8s_documents()
    container = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "from the pod") for e in container.get("env", [])}
    return {
        "k8s ConfigMap": {k: str(v) for k, v in docs["ConfigMap"]["data"].items()},
        "k8s Secret": {k: str(v) for k, v in docs["Secret"]["stringData"].items()},
        "k8s Deployment": env,
        "compose": {
            f"{service}: {k}": v
            for service, spec in compose()["services"].items()
            for k, v in env_map(spec.get("environment")).items()
        },
        "Dockerfile": dockerfile_env(),
        "systemd unit": systemd_env(),
    }


def field_of(variable: str) -> str:
    """``BROKERGATE_KAFKA_CLIENT_ID`` (or ``service: BROKERGATE_…``) -> ``kafka_client_id``."""
    return variable.split(": ")[-1].removeprefix(PREFIX).lower()


@pytest.mark.parametrize("source", list(gateway_settings_sources()))
def test_every_variable_set_is_a_setting_and_its_value_is_valid(source):
    variables = {
        name: value
        for name, value in gateway_settings_sources()[source].items()
        if name.split(": ")[-1].startswith(PREFIX)
    }
    assert variables, f"{source} sets no {PREFIX}* variable"
    unknown = [name for name in variables if field_of(name) not in Settings.model_fields]
    assert not unknown, f"{source} sets variables that are no setting: {unknown}"
    given = {field_of(name): value for name, value in variables.items() if value != "from the pod"}
    Settings(**given)  # type: ignore[arg-type]  # raises if a value does not validate


def test_the_deployment_runs_three_ready_checked_replicas_on_its_configmap_and_secret():
    docs = k8s_documents()
    deployment, service = docs["Deployment"], docs["Service"]
    assert deployment["spec"]["replicas"] >= 3
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    # Ready while Kafka answers: a Redis or ZooKeeper outage takes no replica out of the Service.
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz?backend=log"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["port"] in ports
    assert ports["http"] == int(docs["ConfigMap"]["data"]["BROKERGATE_PORT"])

    sources = {next(iter(ref)): ref[next(iter(ref))]["name"] for ref in container["envFrom"]}
    assert sources == {
        "configMapRef": docs["ConfigMap"]["metadata"]["name"],
        "secretRef": docs["Secret"]["metadata"]["name"],
    }
    # Backends in the ConfigMap, the credential-bearing Redis URL in the Secret.
    assert {"BROKERGATE_LOG", "BROKERGATE_COORDINATOR"} <= docs["ConfigMap"]["data"].keys()
    assert docs["Secret"]["stringData"]["BROKERGATE_SESSIONS"].startswith("redis://")
    assert "BROKERGATE_SESSIONS" not in docs["ConfigMap"]["data"]

    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert all(p["targetPort"] in ports for p in service["spec"]["ports"])
    assert "sessionAffinity" not in service["spec"]  # stateless replicas need none
    budget = docs["PodDisruptionBudget"]["spec"]
    assert budget["minAvailable"] < deployment["spec"]["replicas"]


def test_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    manifests = {p.name for p in (DEPLOY / "k8s").glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == manifests


def test_compose_runs_kraft_kafka_zookeeper_redis_three_gateways_and_nginx():
    services = compose()["services"]
    kafka = env_map(services["kafka"]["environment"])
    assert "controller" in kafka["KAFKA_PROCESS_ROLES"]  # KRaft: Kafka needs no ZooKeeper of its own
    assert not any(k.startswith("KAFKA_ZOOKEEPER") for k in kafka)
    assert "--appendonly" in services["redis"]["command"]
    assert services["redis"]["command"][services["redis"]["command"].index("--appendonly") + 1] == "yes"

    gateway = services["gateway"]
    assert gateway["deploy"]["replicas"] == 3
    assert "/readyz" in " ".join(gateway["healthcheck"]["test"])
    env = env_map(gateway["environment"])
    assert env["BROKERGATE_LOG"] == f"kafka://kafka:{kafka['KAFKA_ADVERTISED_LISTENERS'].rsplit(':', 1)[1]}"
    assert env["BROKERGATE_COORDINATOR"].startswith("zookeeper://zookeeper:2181")
    assert env["BROKERGATE_SESSIONS"].startswith("redis://redis:6379")
    assert {"kafka", "zookeeper", "redis"} <= set(gateway["depends_on"])

    lb = services["lb"]
    assert lb["depends_on"]["gateway"]["condition"] == "service_healthy"
    mount = next(v for v in lb["volumes"] if v.endswith(":/etc/nginx/nginx.conf:ro"))
    conf = (DEPLOY / mount.split(":")[0]).read_text()
    assert f"server gateway:{env['BROKERGATE_PORT']} resolve" in conf
    assert lb["ports"] == [f"8082:{env['BROKERGATE_PORT']}"]
    # The rule that keeps at-least-once through a balancer: a poll is never replayed elsewhere.
    records = re.search(r"location ~ \^/consumers/.*?/records\$ \{(.*?)\}", conf, re.DOTALL)
    assert records is not None and "proxy_next_upstream off;" in records.group(1)


def test_docker_compose_accepts_the_file():
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode:
        pytest.skip("docker compose is not installed here")
    result = subprocess.run(
        [docker, "compose", "-f", str(DEPLOY / "compose.yaml"), "config", "--quiet"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_nginx_accepts_the_compose_balancer_config(tmp_path):
    """``nginx -t`` on the compose config, with what only the container has swapped for local
    equivalents: the ``nginx`` user, Docker's DNS name ``gateway``, and ``resolve`` (nginx >= 1.27.3)."""
    from deploy.local.balancer import nginx_binary

    try:
        nginx = nginx_binary()
    except RuntimeError:
        pytest.skip("nginx is not installed here")
    conf = (DEPLOY / "nginx.conf").read_text()
    local = re.sub(r"^user .*;$", "", conf, flags=re.MULTILINE).replace(
        "server gateway:", "server 127.0.0.1:"
    )
    version = subprocess.run([nginx, "-v"], capture_output=True, text=True).stderr
    found = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", version)
    if found is None or tuple(map(int, found.groups())) < (1, 27, 3):
        local = local.replace(" resolve ", " ")
    (tmp_path / "nginx.conf").write_text(local)
    result = subprocess.run(
        [
            nginx,
            "-t",
            "-p",
            str(tmp_path),
            "-c",
            str(tmp_path / "nginx.conf"),
            "-e",
            str(tmp_path / "error.log"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
