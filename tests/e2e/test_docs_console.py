"""The commands the docs show for machines this suite does not have, and the deploy/ files they
name, say nothing that is not there.

A ```console block (Docker Compose, Kubernetes, a Spark cluster, your own Kafka, ZooKeeper and
Redis) cannot run here, so it is checked instead: every repository file it names exists, and
every flag it gives ``brokergate``, ``deploy/cluster.py`` or a ``spark_jobs`` job is one that
command's ``--help`` lists. The deployment files themselves (Compose, Kubernetes, systemd, the
Dockerfile) name only settings that exist and ``brokergate`` flags that exist, and the
Kubernetes manifests render (where kubectl is installed).
"""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from service.settings import Settings
from tests.e2e.docs_blocks import ROOT, every_block

# the environment variables of the console tools, apart from the server's settings
CLIENT_VARIABLES = {"URL", "USER", "PASSWORD", "TOKEN", "TOKEN_FILE", "CACERT", "CERT", "KEY", "UI_ARTIFACTS"}
DEPLOY_FILES = [
    "compose.yaml",
    "Dockerfile",
    "brokergate.service",
    *(f"k8s/{p.name}" for p in (ROOT / "deploy/k8s").iterdir()),
]


@functools.cache
def help_of(*command: str) -> str:
    result = subprocess.run([*command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (command, result.stderr)
    return result.stdout


def flags(words: list[str]) -> list[str]:
    return [word.split("=")[0] for word in words if word.startswith("--")]


def check_command(words: list[str]) -> list[str]:
    """What is wrong with one command: files it names that are not there, flags not accepted."""
    wrong = [w for w in words if re.match(r"^(deploy|spark_jobs|service)/", w) and not (ROOT / w).exists()]
    if words[0] == "brokergate":
        sub = [w for w in words[1:3] if not w.startswith("-")][:2]
        text = help_of(sys.executable, "-m", "service", *sub[:1])
        if len(sub) > 1 and f" {sub[1]}" in text:  # a subcommand of its own (brokergate topics create)
            text = help_of(sys.executable, "-m", "service", *sub)
        wrong += [f"brokergate {' '.join(sub)} {f}" for f in flags(words) if f not in text]
    for script in ("deploy/cluster.py", "spark_jobs/__main__.py"):
        if script in words:
            at = words.index(script)
            job = words[at + 1]
            text = help_of(sys.executable, script, job)
            wrong += [f"{script} {job} {f}" for f in flags(words[at + 2 :]) if f not in text]
    return wrong


def test_console_blocks_name_real_files_and_flags():
    blocks = every_block("console")
    assert blocks, "no console block: the check has nothing to check"
    wrong: list[str] = []
    for block in blocks:
        for line in block.text.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                wrong += [f"{block.page}:{block.line}: {w}" for w in check_command(words)]
    assert not wrong, wrong


def test_deploy_files_name_real_settings_and_flags():
    """Every ``BROKERGATE_<NAME>`` of the deployment files is a setting (or a console tool's
    variable), and every ``brokergate serve`` there takes only real flags."""
    settings = {name.upper() for name in Settings.model_fields}
    wrong: list[str] = []
    for name in DEPLOY_FILES:
        text = (ROOT / "deploy" / name).read_text()
        for variable in re.findall(r"BROKERGATE_([A-Z0-9_]+)", text):
            if variable not in settings and variable not in CLIENT_VARIABLES:
                wrong.append(f"deploy/{name}: BROKERGATE_{variable}")
        for command in re.findall(r"brokergate (serve[^\n\"'`]*)", text):
            words = ["brokergate", *shlex.split(command, comments=True)]
            wrong += [f"deploy/{name}: {w}" for w in check_command(words)]
    assert not wrong, wrong


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_kubernetes_manifests_render():
    """What ``kubectl apply -k deploy/k8s`` would apply renders offline: the Deployment, its
    ConfigMap, Secret, Service and PodDisruptionBudget."""
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(ROOT / "deploy/k8s")], capture_output=True, text=True, timeout=120
    )
    assert rendered.returncode == 0, rendered.stderr
    kinds = set(re.findall(r"^kind: (\w+)$", rendered.stdout, re.M))
    assert {"Deployment", "ConfigMap", "Secret", "Service", "PodDisruptionBudget"} <= kinds, kinds
