"""The deployment files say what they mean: every setting they set exists, probes and replicas are right.

No image registry is reachable here, so the compose file, the Kubernetes manifests and
the Dockerfile are not run. What can be checked without them is: they parse; each
``BROKERGATE_*`` variable they set is a field of ``Settings`` and its value passes the
settings' validation; the Deployment runs >= 3 replicas with readiness on /readyz?backend=log and
liveness on /healthz, fed by the ConfigMap that exists; compose runs KRaft Kafka, ZooKeeper,
Redis with persistence, three gateways and nginx over them. Both are secure: HTTPS, HTTP Basic
against a users file, ACLs with a super user, an audit trail, and the gateway's passwords to
ZooKeeper and Redis; every file a setting names is one a Secret (or a compose secret) provides
where the setting says, and no secret is in a ConfigMap or an environment variable. Where
``docker compose``, ``kubectl`` or ``nginx`` are installed, they check the files too.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import typing
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

import pytest
import trustme
import yaml
from pydantic import SecretStr

from service.security.users import read_users
from service.settings import Settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PREFIX = "BROKERGATE_"


def k8s_documents() -> list[dict[str, Any]]:
    """Every object of deploy/k8s but the Kustomization."""
    return [
        doc
        for path in sorted((DEPLOY / "k8s").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") != "Kustomization"
    ]


def k8s_object(kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of ``kind`` (of that ``name``, where there are several)."""
    found = [
        doc
        for doc in k8s_documents()
        if doc["kind"] == kind and (name is None or doc["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"{len(found)} {kind} objects named {name or 'anything'}"
    return found[0]


def gateway_container() -> dict[str, Any]:
    (container,) = k8s_object("Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(container)


def configmap_settings() -> dict[str, str]:
    return {k: str(v) for k, v in k8s_object("ConfigMap")["data"].items()}


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
    env = {e["name"]: e.get("value", "from the pod") for e in gateway_container().get("env", [])}
    return {
        "k8s ConfigMap": configmap_settings(),
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


def fields_of_type(kind: type) -> frozenset[str]:
    """The settings whose type is ``kind`` (or ``kind | None``)."""
    return frozenset(
        name
        for name, info in Settings.model_fields.items()
        if kind in (typing.get_args(info.annotation) or (info.annotation,))
    )


SECRET_FIELDS = fields_of_type(SecretStr)  # redis_password, ...: only ever in a file
FILE_FIELDS = fields_of_type(Path)  # tls_cert, users_file, redis_password_file, ...
WRITTEN_FIELDS = frozenset({"data_dir", "audit_log"})  # the files the gateway writes, not reads


def settings_of(variables: dict[str, str]) -> Settings:
    """The ``Settings`` the ``BROKERGATE_*`` variables of ``variables`` make."""
    given = {field_of(k): v for k, v in variables.items() if k.startswith(PREFIX)}
    return Settings(**given)  # type: ignore[arg-type]


def files_named(variables: dict[str, str]) -> dict[str, PurePosixPath]:
    """The files ``variables`` name, by setting: every one of them must exist in the container."""
    return {
        field_of(k): PurePosixPath(v)
        for k, v in variables.items()
        if k.startswith(PREFIX) and field_of(k) in FILE_FIELDS
    }


def secret_keys(secret: dict[str, Any]) -> set[str]:
    return set(secret.get("stringData", {})) | set(secret.get("data", {}))


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


def test_every_container_names_the_address_it_listens_on():
    """A container's loopback is its own, and a gateway without authentication listens on loopback
    unless told otherwise: the image, compose's gateways and the k8s pods set BROKERGATE_HOST. The
    systemd unit, on the machine itself, keeps to loopback until authentication is turned on."""
    gateways = env_map(compose()["services"]["gateway"]["environment"])
    for variables in (dockerfile_env(), gateways, configmap_settings()):
        assert variables["BROKERGATE_HOST"] == "0.0.0.0"
        assert settings_of(variables).bind_host == "0.0.0.0"
    assert settings_of(systemd_env()).bind_host == "127.0.0.1"


def test_the_deployment_runs_three_ready_checked_replicas_on_its_configmap():
    deployment, service = k8s_object("Deployment"), k8s_object("Service")
    assert deployment["spec"]["replicas"] >= 3
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    container = gateway_container()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    # Ready while Kafka answers: a Redis or ZooKeeper outage takes no replica out of the Service.
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz?backend=log"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    settings = settings_of(configmap_settings())
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["port"] in ports
        # A replica with a certificate speaks HTTPS only: an HTTP probe would never see it ready.
        assert container[probe]["httpGet"].get("scheme", "HTTP") == ("HTTPS" if settings.tls_cert else "HTTP")
    assert ports == {"https" if settings.tls_cert else "http": settings.port}

    sources = {next(iter(ref)): ref[next(iter(ref))]["name"] for ref in container["envFrom"]}
    assert sources == {"configMapRef": k8s_object("ConfigMap")["metadata"]["name"]}
    assert {"BROKERGATE_LOG", "BROKERGATE_COORDINATOR", "BROKERGATE_SESSIONS"} <= configmap_settings().keys()

    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert all(p["targetPort"] in ports for p in service["spec"]["ports"])
    assert "sessionAffinity" not in service["spec"]  # stateless replicas need none
    budget = k8s_object("PodDisruptionBudget")["spec"]
    assert budget["minAvailable"] < deployment["spec"]["replicas"]


def test_the_k8s_replicas_serve_https_and_let_in_only_signed_in_allowed_principals():
    settings = settings_of(configmap_settings())
    assert settings.tls_cert is not None and settings.tls_key is not None
    assert "basic" in settings.auth_methods and settings.users_file is not None
    assert settings.authorize and settings.super_user_names
    assert settings.audit_log is not None
    # The gateway's own credentials to ZooKeeper and Redis, from files.
    assert settings.zookeeper_username and settings.zookeeper_password_file
    assert settings.redis_password_file is not None


def mounted(container: dict[str, Any], path: PurePosixPath) -> tuple[dict[str, Any], dict[str, Any]]:
    """The volume mount of ``container`` that ``path`` is in, and its volume."""
    volumes = {v["name"]: v for v in k8s_object("Deployment")["spec"]["template"]["spec"]["volumes"]}
    mounts = [m for m in container["volumeMounts"] if path.is_relative_to(m["mountPath"])]
    assert mounts, f"{path} is in no volume of {container['name']}"
    mount = max(mounts, key=lambda m: len(m["mountPath"]))
    assert "subPath" not in mount, "a subPath mount never sees a changed Secret"
    return mount, volumes[mount["name"]]


def test_every_file_a_k8s_setting_names_is_where_a_mounted_secret_or_volume_puts_it():
    container = gateway_container()
    files = files_named(configmap_settings())
    assert files
    for setting, path in files.items():
        mount, volume = mounted(container, path)
        if setting in WRITTEN_FIELDS:
            assert "emptyDir" in volume and not mount.get("readOnly"), f"{setting}: {path} is not writable"
            continue
        assert "secret" in volume, f"{setting}: {path} is not in a Secret"
        assert mount.get("readOnly"), f"{setting}: the Secret of {path} is mounted writable"
        secret = k8s_object("Secret", volume["secret"]["secretName"])
        key = str(path.relative_to(mount["mountPath"]))
        assert key in secret_keys(secret), f"{setting}: Secret {secret['metadata']['name']} has no {key}"
        # Readable by the gateway's group (fsGroup), by no one else.
        assert volume["secret"]["defaultMode"] & 0o007 == 0


def test_no_secret_is_in_the_configmap_or_an_environment_variable():
    for source, variables in gateway_settings_sources().items():
        named = {field_of(k) for k in variables if k.split(": ")[-1].startswith(PREFIX)}
        assert not named & SECRET_FIELDS, f"{source} sets {sorted(named & SECRET_FIELDS)}: use the *_file"
        with_password = [k for k, v in variables.items() if re.search(r"://[^/@\s]*:[^/@\s]*@", v)]
        assert not with_password, f"{source}: URLs with a password in {with_password}"


def test_the_users_in_the_secret_are_a_file_the_gateway_reads(tmp_path):
    path = files_named(configmap_settings())["users_file"]
    container = gateway_container()
    mount, volume = mounted(container, path)
    secret = k8s_object("Secret", volume["secret"]["secretName"])
    users = tmp_path / "users"
    users.write_text(secret["stringData"][str(path.relative_to(mount["mountPath"]))])
    read_users(users)  # raises on a line that is not `name:$argon2id$...` (or a comment)


def test_the_audit_sidecar_streams_the_audit_log_the_gateway_writes():
    pod = k8s_object("Deployment")["spec"]["template"]["spec"]
    audit_log = PurePosixPath(str(settings_of(configmap_settings()).audit_log))
    (sidecar,) = [c for c in pod["initContainers"] if c["name"] == "audit"]
    assert sidecar["restartPolicy"] == "Always"  # a sidecar: up before the gateway, down after it
    assert sidecar["command"][0] == "tail" and sidecar["command"][-1] == str(audit_log)
    assert "-F" in sidecar["command"]  # follows the file by name: it may not exist yet
    writer, _ = mounted(gateway_container(), audit_log)
    reader, _ = mounted(sidecar, audit_log)
    assert writer["name"] == reader["name"] and reader.get("readOnly")
    assert sidecar["image"] == gateway_container()["image"]


def test_kustomize_builds_the_manifests_with_every_image_set():
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed here")
    result = subprocess.run([kubectl, "kustomize", str(DEPLOY / "k8s")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    built = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    (deployment,) = [doc for doc in built if doc["kind"] == "Deployment"]
    image = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())["images"][0]
    pod = deployment["spec"]["template"]["spec"]
    for container in pod["containers"] + pod.get("initContainers", []):
        assert container["image"] == f"{image['newName']}:{image['newTag']}", container["name"]


def test_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    manifests = {p.name for p in (DEPLOY / "k8s").glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == manifests


def redis_server_args(command: list[str]) -> list[str]:
    """What ``redis-server`` runs with: a plain command, or the ``exec`` line of a ``sh -c`` script."""
    if command[:2] == ["sh", "-c"]:
        line = next(line for line in command[2].splitlines() if "redis-server" in line)
        command = shlex.split(line.split("<<")[0])
    return command[command.index("redis-server") + 1 :]


def test_compose_runs_kraft_kafka_zookeeper_redis_three_gateways_and_nginx():
    services = compose()["services"]
    kafka = env_map(services["kafka"]["environment"])
    assert "controller" in kafka["KAFKA_PROCESS_ROLES"]  # KRaft: Kafka needs no ZooKeeper of its own
    assert not any(k.startswith("KAFKA_ZOOKEEPER") for k in kafka)
    redis_args = redis_server_args(services["redis"]["command"])
    assert redis_args[redis_args.index("--appendonly") + 1] == "yes"

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


def secret_file(path: PurePath) -> str:
    """The compose secret mounted at ``path`` (``/run/secrets/<name>``)."""
    assert path.parent == PurePosixPath("/run/secrets"), f"{path} is no compose secret"
    return path.name


def test_compose_serves_https_and_lets_in_only_signed_in_allowed_principals():
    spec = compose()
    services, declared = spec["services"], set(spec["secrets"])
    gateway, lb = services["gateway"], services["lb"]
    env = env_map(gateway["environment"])
    settings = settings_of(env)
    assert settings.tls_cert is not None and settings.tls_key is not None
    assert "basic" in settings.auth_methods and settings.authorize and settings.super_user_names
    assert settings.audit_log is not None
    assert settings.zookeeper_username and settings.zookeeper_password_file and settings.redis_password_file

    # Every file a setting names is a secret given to the gateway, but what it writes.
    for setting, path in files_named(env).items():
        if setting in WRITTEN_FIELDS:
            # The image's data dir, a volume of its own per container, owned by the gateway's user.
            assert path.is_relative_to("/var/lib/brokergate"), f"{setting}: {path} is not writable"
            continue
        name = secret_file(path)
        assert name in gateway["secrets"] and name in declared, f"{setting}: no secret {name}"

    # Redis requires the password the gateway reads.
    script = services["redis"]["command"][2]
    required = re.search(r"^requirepass \$\$\(cat (\S+)\)$", script, re.MULTILINE)
    assert required is not None and PurePosixPath(required.group(1)) == settings.redis_password_file
    assert secret_file(settings.redis_password_file) in services["redis"]["secrets"]
    assert "redis-password" in " ".join(services["redis"]["healthcheck"]["test"])
    assert "https://127.0.0.1:" in " ".join(gateway["healthcheck"]["test"])

    # nginx: HTTPS to clients and to the replicas, whose certificate it checks.
    conf = (DEPLOY / "nginx.conf").read_text()
    assert re.search(rf"listen {settings.port} ssl;", conf)
    assert "proxy_pass https://brokergate;" in conf and "proxy_pass http://" not in conf
    assert "proxy_ssl_verify on;" in conf
    for path in re.findall(r"(/run/secrets/\S+);", conf):
        assert secret_file(PurePosixPath(path)) in lb["secrets"], f"nginx reads {path}, not given to it"
    assert secret_file(settings.tls_cert) in lb["secrets"]


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
    equivalents: the ``nginx`` user, Docker's DNS name ``gateway``, ``resolve`` (nginx >= 1.27.3),
    and the secrets, which are a test CA's certificate, key and CA certificate here."""
    from deploy.local.balancer import nginx_binary

    try:
        nginx = nginx_binary()
    except RuntimeError:
        pytest.skip("nginx is not installed here")
    ca = trustme.CA()
    server = ca.issue_cert("gateway", "localhost")
    server.cert_chain_pems[0].write_to_path(str(tmp_path / "tls-cert"))
    server.private_key_pem.write_to_path(str(tmp_path / "tls-key"))
    ca.cert_pem.write_to_path(str(tmp_path / "tls-ca"))
    conf = (DEPLOY / "nginx.conf").read_text()
    local = (
        re.sub(r"^user .*;$", "", conf, flags=re.MULTILINE)
        .replace("server gateway:", "server 127.0.0.1:")
        .replace("/run/secrets/", f"{tmp_path}/")
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
