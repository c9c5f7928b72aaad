"""Java programs from Maven Central, resolved once into a cache directory and run offline after.

Each set of jars is named by a ``pom.xml`` here, in ``NAME/``: ``kafka`` (the Apache
Kafka broker and its command-line tools) and ``spark-kafka`` (Spark's own Kafka source, which
the Spark tests compare the ``brokergate`` source with). ``jars("kafka")`` answers the
directory holding that pom's whole runtime closure, copying it there with Maven the first time
(``mvn dependency:copy-dependencies``); later calls, and later runs, find it and download
nothing. The directory is named by a digest of the pom, so a changed pin resolves again, and it
appears only complete (Maven copies into a temporary directory that is then renamed).

The cache is ``.cache/jars`` in the repository, or ``$BROKERGATE_JARS_DIR``.

    python -m deploy.jars kafka spark-kafka   # what `make jars` (and so `make test`) runs
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["NAMES", "cache_root", "class_path", "jars", "pinned_version", "spark_kafka_jars"]

POMS = Path(__file__).resolve().parent
REPOSITORY = POMS.parents[1]
NAMES = ("kafka", "spark-kafka")


def cache_root() -> Path:
    """Where resolved jar sets are kept."""
    configured = os.environ.get("BROKERGATE_JARS_DIR")
    return Path(configured) if configured else REPOSITORY / ".cache" / "jars"


def _pom(name: str) -> Path:
    pom = POMS / name / "pom.xml"
    if not pom.is_file():
        raise ValueError(f"no jar set {name!r}: the sets are {', '.join(NAMES)}")
    return pom


def pinned_version(name: str, prop: str) -> str:
    """A version the pom of ``name`` pins, by its property (``kafka.version``, ``spark.version``)."""
    found = re.search(rf"<{re.escape(prop)}>([^<]+)</{re.escape(prop)}>", _pom(name).read_text())
    if found is None:
        raise ValueError(f"{_pom(name)} pins no {prop}")
    return found.group(1).strip()


def jars(name: str) -> Path:
    """The directory of jar set ``name``, complete; resolved with Maven if it is not there yet."""
    pom = _pom(name)
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    target = cache_root() / f"{name}-{digest}"
    if target.is_dir():
        return target
    if shutil.which("mvn") is None:
        raise RuntimeError(f"resolving the {name} jars needs Maven (mvn) on the PATH, and Java 17")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    command = [
        "mvn",
        "-q",
        "-B",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={scratch}",
        "-DincludeScope=runtime",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise RuntimeError(f"Maven could not resolve {pom}:\n{done.stdout[-4000:]}{done.stderr[-2000:]}")
    try:
        scratch.rename(target)
    except OSError:  # another process finished first: its copy is as good
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def class_path(name: str) -> str:
    """``java -cp`` for jar set ``name``: every jar in its directory."""
    return f"{jars(name)}/*"


def _artifact(jar: Path) -> str:
    """``kafka-clients`` of ``kafka-clients-3.9.2.jar``."""
    return re.sub(r"-\d[^-]*(-[A-Za-z0-9.]+)?\.jar$", "", jar.name)


def spark_kafka_jars() -> list[Path]:
    """The jars Spark's Kafka source needs that pyspark does not ship (what ``spark.jars`` takes):
    the closure minus what pyspark's own ``jars/`` has, so nothing is on Spark's class path twice."""
    import pyspark

    shipped = {_artifact(jar) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(jar for jar in jars("spark-kafka").glob("*.jar") if _artifact(jar) not in shipped)
