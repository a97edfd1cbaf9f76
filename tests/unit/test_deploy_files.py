"""Static checks of docker/: the Dockerfile, compose.yaml and the KubeRay manifests.

No Docker engine or Kubernetes exists where the tests run, so these files are checked
for what can silently rot: they parse; the image pins the same Ray, Python, torch and
fairseq as pyproject.toml and `make install`; processes run as a non-root user; every
service docs/cluster.md promises is there with a health check; ports, addresses and the
environment variables sweeper reads agree across files; and nothing is published on
a public interface or carries a hard-coded secret.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD", re.IGNORECASE)
IN_IMAGE = "/home/ray/sweeper"
"""The Dockerfile's WORKDIR: the repository's layout inside the image."""


def pins() -> dict[str, str]:
    """name -> pinned version, from pyproject.toml's dependencies and the fairseq-fixed
    that `make install` builds (tools/fairseq_wheel.py)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = {}
    for dep in project["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^;\s]+)", dep)
        if match:
            found[match.group(1).lower()] = match.group(2)
    wheel_script = (REPO / "tools" / "fairseq_wheel.py").read_text(encoding="utf-8")
    found["fairseq-fixed"] = re.search(r'^VERSION = "([\w.]+)"', wheel_script, re.M).group(1)
    found["python"] = re.search(r">=(\d+\.\d+)", project["requires-python"]).group(1)
    found["sweeper"] = project["version"]
    return found


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction: comments dropped, `\\` lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending = f"{pending} {line}" if pending else line
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        word, _, rest = pending.partition(" ")
        assert word.isupper(), f"{path.name}: not an instruction: {pending!r}"
        instructions.append((word, rest.strip()))
        pending = ""
    assert not pending, f"{path.name}: ends inside a continued line"
    return instructions


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return dockerfile_instructions(DOCKER / "Dockerfile")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rayjob() -> dict[str, Any]:
    (doc,) = yaml.safe_load_all((DOCKER / "kuberay" / "rayjob.yaml").read_text(encoding="utf-8"))
    return doc


@pytest.fixture(scope="module")
def k8s_storage() -> dict[str, dict[str, Any]]:
    text = (DOCKER / "kuberay" / "storage.yaml").read_text(encoding="utf-8")
    return {doc["kind"]: doc for doc in yaml.safe_load_all(text)}


# --- Dockerfile


def test_dockerfile_base_image_is_the_official_ray_image_of_the_pinned_versions(dockerfile):
    (base,) = [args for word, args in dockerfile if word == "FROM"]
    match = re.fullmatch(r"rayproject/ray:(\d+\.\d+\.\d+)-py(\d)(\d+)-cu(\d{3})", base)
    assert match, f"FROM {base}: expected rayproject/ray:<ray>-py<ver>-cu<cuda>"
    want = pins()
    assert match.group(1) == want["ray"]
    assert f"{match.group(2)}.{match.group(3)}" == want["python"]


def test_dockerfile_installs_the_stack_the_way_the_makefile_does(dockerfile):
    runs = [args for word, args in dockerfile if word == "RUN"]
    want = pins()
    order = {}
    for i, command in enumerate(runs):
        words = shlex.split(command)
        if f"torch=={want['torch']}" in words:
            order["torch"] = i
        if "pip" in words and any(re.fullmatch(r"\.(\[[\w,]+\])?", w) for w in words):
            order["sweeper"] = i
            assert image_extras(words) == {"server"}, "the MLflow server's drivers"
        if f"fairseq-fixed=={want['fairseq-fixed']}" in words:
            order["fairseq"] = i
            assert "--no-deps" in words and "--no-build-isolation" in words
    assert list(order) == ["torch", "sweeper", "fairseq"], order
    copied = [args.split()[-2] for word, args in dockerfile if word == "COPY"]
    assert {"src", "sweeps"} <= set(copied)


def image_extras(words: list[str]) -> set[str]:
    """The extras of `pip install .[a,b]` among a RUN's words."""
    for word in words:
        match = re.fullmatch(r"\.(?:\[([\w,]+)\])?", word)
        if match:
            return set((match.group(1) or "").split(",")) - {""}
    return set()


def driver_module(scheme: str) -> str:
    """The top-level module of the DBAPI driver SQLAlchemy loads for `scheme://`
    (installed or not)."""
    from sqlalchemy.engine import make_url

    dialect = make_url(f"{scheme}://user@host/db").get_dialect()
    try:
        return dialect.import_dbapi().__name__.split(".")[0]
    except ImportError as exc:
        assert exc.name, exc
        return exc.name.split(".")[0]


def test_compose_backend_uri_and_the_image_agree_on_one_driver(dockerfile, compose):
    """The compose file's MLflow server opens `postgresql://...`; SQLAlchemy 2.1 loads
    psycopg 3 for that (`postgresql+psycopg2://` would need psycopg2). The image installs
    `.[server]`, whose packages must provide exactly that module, in this environment too
    (`make install` installs the same extra), and sweeper's missing-driver message
    (`sweeper.tracking.drivers`) must name that extra for it."""
    import importlib.metadata

    from sweeper.tracking.drivers import EXTRA_DRIVER

    uri = compose["services"]["mlflow"]["environment"]["MLFLOW_BACKEND_STORE_URI"]
    scheme = uri.split("://", 1)[0]
    assert scheme == "postgresql", uri  # the plain form docs/cluster.md shows
    module = driver_module(scheme)
    runs = [shlex.split(args) for word, args in dockerfile if word == "RUN"]
    (extras,) = [image_extras(w) for w in runs if "pip" in w and image_extras(w)]
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    installed = set()
    for extra in extras:
        for requirement in project["optional-dependencies"][extra]:
            installed.add(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower())
    providers = {d.lower() for d in importlib.metadata.packages_distributions().get(module, [])}
    assert providers & installed, f"{scheme}:// needs {module}; the image installs {installed}"
    assert module == EXTRA_DRIVER
    assert driver_module("postgresql+psycopg2") == "psycopg2" != module  # the other driver
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"-e '\.\[[\w,]*server[\w,]*\]'", makefile), "make install: the same extra"


def test_dockerfile_runs_as_a_non_root_user(dockerfile):
    users = [args for word, args in dockerfile if word == "USER"]
    assert users and users[-1] not in {"root", "0", "0:0"}
    workdir = [args for word, args in dockerfile if word == "WORKDIR"][-1]
    assert workdir == IN_IMAGE


def test_build_context_leaves_secrets_outputs_and_checkpoints_out():
    ignored = (DOCKER / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    for entry in (".git", ".venv", "runs", "mlruns", "**/*.pt", "**/.env"):
        assert entry in ignored
    assert ".env" in (DOCKER / ".gitignore").read_text(encoding="utf-8").split()


def test_the_dockerfile_parser_joins_continuations_and_rejects_garbage(tmp_path):
    good = tmp_path / "Dockerfile"
    good.write_text("# c\nFROM a:1\nRUN x \\\n    && y\n\nUSER ray\n", encoding="utf-8")
    assert dockerfile_instructions(good) == [("FROM", "a:1"), ("RUN", "x && y"), ("USER", "ray")]
    good.write_text("FROM a:1\nrun-this\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="not an instruction"):
        dockerfile_instructions(good)


# --- compose.yaml

LONG_RUNNING = ("ray-head", "ray-worker", "mlflow", "postgres", "minio")


def test_compose_has_every_service_with_a_health_check(compose):
    services = compose["services"]
    assert set(LONG_RUNNING) | {"minio-bucket", "sweeper"} <= set(services)
    for name in LONG_RUNNING:
        check = services[name].get("healthcheck", {})
        assert check.get("test"), f"{name} has no healthcheck"


def test_compose_sweeper_images_are_this_version_built_from_the_dockerfile(compose):
    want = pins()["sweeper"]
    for name in ("ray-head", "ray-worker", "sweeper", "mlflow"):
        service = compose["services"][name]
        assert service["image"].endswith(f"sweeper:{want}}}"), service["image"]
        assert service["build"]["dockerfile"] == "docker/Dockerfile"


def _published(service: dict[str, Any]) -> list[str]:
    return [str(p) for p in service.get("ports", [])]


def test_compose_publishes_only_on_the_hosts_loopback(compose):
    published = {}
    for name, service in compose["services"].items():
        for port in _published(service):
            host_ip, _, rest = port.partition(":")
            assert host_ip == "127.0.0.1", f"{name} publishes {port} beyond loopback"
            published[name] = rest
    assert published == {"ray-head": "8265:8265", "mlflow": "5000:5000"}


def _flag(command: list[str], name: str) -> str:
    values = [c.split("=", 1)[1] for c in command if c.startswith(f"{name}=")]
    assert len(values) == 1, f"{name} in {command}"
    return values[0]


WILDCARD_BINDS = {
    ("ray-head", "--dashboard-host=0.0.0.0"),  # inside the network; published on loopback
    ("mlflow", "--host=0.0.0.0"),  # idem: other containers must reach it
}
"""The only processes listening on every interface of their container (docs/cluster.md,
"Security")."""


def test_compose_binds_all_interfaces_only_where_documented(compose, rayjob):
    found = {
        (name, str(word))
        for name, service in compose["services"].items()
        for word in service.get("command", []) or []
        if "0.0.0.0" in str(word)
    }
    assert found == WILDCARD_BINDS
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]
    assert {k for k, v in head.items() if v == "0.0.0.0"} == {"dashboard-host"}


def test_compose_addresses_and_ports_agree(compose):
    services = compose["services"]
    head = services["ray-head"]["command"]
    gcs = _flag(head, "--port")
    assert {gcs, _flag(head, "--dashboard-port"), _flag(head, "--ray-client-server-port")} <= set(
        services["ray-head"]["expose"]
    )
    address = f"ray-head:{gcs}"
    assert _flag(services["ray-worker"]["command"], "--address") == address
    assert services["sweeper"]["environment"]["RAY_ADDRESS"] == address
    mlflow_port = _flag(services["mlflow"]["command"], "--port")
    uri = f"http://mlflow:{mlflow_port}"
    for name in ("ray-head", "ray-worker", "sweeper"):
        assert services[name]["environment"]["MLFLOW_TRACKING_URI"] == uri
    mlflow_env = services["mlflow"]["environment"]
    assert "mlflow" in mlflow_env["MLFLOW_SERVER_ALLOWED_HOSTS"].split(",")
    assert "@postgres:5432/" in mlflow_env["MLFLOW_BACKEND_STORE_URI"]
    assert mlflow_env["MLFLOW_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert _flag(services["mlflow"]["command"], "--artifacts-destination").startswith("s3://")


def test_compose_workers_scale_and_reserve_gpus(compose):
    deploy = compose["services"]["ray-worker"]["deploy"]
    assert deploy["replicas"] >= 1
    (device,) = deploy["resources"]["reservations"]["devices"]
    assert "gpu" in device["capabilities"]


def test_compose_keeps_output_dir_on_the_driver_and_workers_mount_nothing(compose):
    """No shared filesystem: the drivers (the `sweeper` service, the head for `ray job
    submit`) hold output_dir; workers reach inputs and checkpoints through the tracking
    server's artifact proxy, so they may run on other Docker hosts."""
    services = compose["services"]
    output_dir = yaml.safe_load((REPO / "sweeps" / "roberta.yaml").read_text())["output_dir"]
    runs_in_image = str(Path(IN_IMAGE, "sweeps", output_dir).resolve().parent)
    for name in ("ray-head", "sweeper"):
        assert f"runs:{runs_in_image}" in services[name]["volumes"], name
    assert "volumes" not in services["ray-worker"]
    assert "--no-serve-artifacts" not in services["mlflow"]["command"]  # the proxy workers use
    assert {"runs", "postgres", "minio"} <= set(compose["volumes"])


def _interpolated(value: str) -> list[tuple[str, str]]:
    return re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:\?|:-|-|\?)?[^}]*\}", value)


def test_compose_secrets_come_from_the_env_file_never_from_the_file(compose):
    required = set()
    for name, service in compose["services"].items():
        env = service.get("environment", {})
        for key, value in env.items():
            value = str(value)
            for var, how in _interpolated(value):
                if how == ":?":
                    required.add(var)
            if SECRET_NAME.search(key) or "PASSWORD" in value:
                refs = _interpolated(value)
                assert refs and all(how == ":?" for _, how in refs), f"{name}.{key}: {value}"
    example = (DOCKER / ".env.example").read_text(encoding="utf-8")
    given = set(re.findall(r"^([A-Z_]+)=", example, re.MULTILINE))
    assert required and required <= given, required - given


# --- KubeRay


def test_rayjob_runs_the_lab_sweep_on_the_pinned_ray(rayjob):
    assert rayjob["apiVersion"] == "ray.io/v1" and rayjob["kind"] == "RayJob"
    words = shlex.split(rayjob["spec"]["entrypoint"])
    assert words[:2] == ["sweeper", "run"]
    assert words[2].endswith("sweeps/roberta.yaml")
    assert (REPO / Path(words[2]).relative_to(IN_IMAGE)).is_file()
    assert rayjob["spec"]["rayClusterSpec"]["rayVersion"] == pins()["ray"]


def _pods(rayjob: dict[str, Any]) -> dict[str, dict[str, Any]]:
    cluster = rayjob["spec"]["rayClusterSpec"]
    pods = {"head": cluster["headGroupSpec"]["template"]["spec"]}
    for group in cluster["workerGroupSpecs"]:
        pods[group["groupName"]] = group["template"]["spec"]
    return pods


def test_rayjob_pods_run_this_image_as_non_root_with_tracking_and_head_only_storage(
    rayjob, k8s_storage, compose
):
    image = compose["services"]["ray-head"]["image"]
    image = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", image)
    config = k8s_storage["ConfigMap"]
    claim = k8s_storage["PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]  # no shared filesystem
    assert set(config["data"]) == {"MLFLOW_TRACKING_URI"}  # the one name sweeper reads
    assert config["data"]["MLFLOW_TRACKING_URI"].startswith("http")
    runs_in_image = f"{IN_IMAGE}/runs"
    for name, pod in _pods(rayjob).items():
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        (container,) = pod["containers"]
        assert container["image"] == image, name
        refs = {ref.get("configMapRef", {}).get("name") for ref in container["envFrom"]}
        assert config["metadata"]["name"] in refs
        secrets = [r["secretRef"] for r in container["envFrom"] if "secretRef" in r]
        assert all(s.get("optional") for s in secrets)
        if name != "head":  # workers: inputs and checkpoints through MLflow artifacts
            assert "volumes" not in pod and "volumeMounts" not in container, name
            continue
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
        assert claims == {claim["metadata"]["name"]}
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert runs_in_image in mounts and not mounts[runs_in_image].get("readOnly")
        for value in container.get("env", []):
            assert not SECRET_NAME.search(value["name"]), "secrets belong in a Secret"


def test_rayjob_has_a_gpu_worker_group(rayjob):
    workers = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    limits = [g["template"]["spec"]["containers"][0]["resources"]["limits"] for g in workers]
    assert any(int(limit.get("nvidia.com/gpu", 0)) >= 1 for limit in limits)


def test_deployment_env_names_are_the_ones_sweeper_reads(compose):
    """RAY_ADDRESS and MLFLOW_TRACKING_URI are read by sweeper (and the lab's spec);
    a rename on either side would leave the cluster silently running locally."""
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "src").rglob("*.py"))
    assert 'os.environ.get("RAY_ADDRESS")' in sources
    assert "${MLFLOW_TRACKING_URI:-}" in (REPO / "sweeps" / "roberta.yaml").read_text()
    set_for_sweeper = set()
    for name in ("ray-head", "ray-worker", "sweeper"):
        set_for_sweeper |= set(compose["services"][name]["environment"])
    assert set_for_sweeper == {"RAY_ADDRESS", "MLFLOW_TRACKING_URI"}


def test_cluster_guide_walks_through_compose_and_kuberay():
    guide = (REPO / "docs" / "cluster.md").read_text(encoding="utf-8")
    section = guide.split("## 7. Docker, Compose and Kubernetes", 1)[1].split("\n## ", 1)[0]
    for needle in ("docker/compose.yaml", "docker/kuberay/rayjob.yaml", ".env", "--scale"):
        assert needle in section, needle
