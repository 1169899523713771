"""Invariants of the deployment files in deploy/.

Each test states one property a production deployment relies on (probes,
resources, no root, graceful drain, migration ordering, load-balancing wiring)
and fails when a manifest breaks it. Schema validation against the Kubernetes
OpenAPI schemas and the Compose specification runs when the validators are
installed, and `kubectl kustomize` / `docker compose config` run when those
tools are on the machine.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from wfj_testing import missing_tool, require_module

yaml = require_module("yaml", "PyYAML is needed to read the manifests")

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "kubernetes"
COMPOSE = DEPLOY / "compose.yaml"

COORDINATOR = "wfjobs-coordinator"
HEADLESS = "wfjobs-coordinator-headless"
WORKER = "wfjobs-worker"
MIGRATE = "wfjobs-migrate"
# Seconds between the end of the drain timeout and SIGKILL, at the least.
DRAIN_MARGIN_SECONDS = 5
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"}


# --- loading -----------------------------------------------------------------


def load_yaml_documents(path: Path) -> list[dict[str, Any]]:
    with path.open() as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc is not None]


def yaml_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in {".yaml", ".yml"})


@pytest.fixture(scope="module")
def kustomization() -> dict[str, Any]:
    return load_yaml_documents(K8S / "kustomization.yaml")[0]


@pytest.fixture(scope="module")
def resources(kustomization: dict[str, Any]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        docs.extend(load_yaml_documents(K8S / name))
    return docs


def find(resources: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [r for r in resources if r["kind"] == kind and r["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected exactly one {kind} {name!r}, found {len(matches)}"
    return matches[0]


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def pod_labels(workload: dict[str, Any]) -> dict[str, str]:
    return workload["spec"]["template"]["metadata"].get("labels", {})


def all_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec.get("initContainers", []) + spec["containers"]


def workloads(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in resources if r["kind"] in WORKLOAD_KINDS]


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """matchLabels semantics (matchExpressions are not used in our manifests)."""
    assert "matchExpressions" not in selector, "extend selects() for matchExpressions"
    match = selector.get("matchLabels", selector)
    return bool(match) and all(labels.get(k) == v for k, v in match.items())


def configmap_value(resources: list[dict[str, Any]], key: str) -> str:
    return find(resources, "ConfigMap", COORDINATOR)["data"][key]


def parse_cpu_millis(quantity: str | int | float) -> float:
    text = str(quantity)
    return float(text[:-1]) if text.endswith("m") else float(text) * 1000


_MEMORY_UNITS = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}


def parse_memory_bytes(quantity: str | int) -> float:
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(quantity))
    assert match, f"unreadable memory quantity {quantity!r}"
    number, unit = match.groups()
    return float(number) * (_MEMORY_UNITS[unit] if unit else 1)


def parse_duration_seconds(text: str | int) -> float:
    """Compose durations such as '45s', '1m30s'."""
    if isinstance(text, int | float):
        return float(text)
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"([0-9.]+)(ms|h|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"unreadable duration {text!r}"
    return sum(float(n) * units[u] for n, u in parts)


# --- every YAML file ---------------------------------------------------------


@pytest.mark.parametrize("path", yaml_files(DEPLOY), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_yaml_file_parses_to_mappings(path: Path) -> None:
    docs = load_yaml_documents(path)
    assert docs, f"{path} holds no document"
    assert all(isinstance(doc, dict) for doc in docs)


def test_kustomization_lists_every_manifest_and_nothing_missing(
    kustomization: dict[str, Any],
) -> None:
    listed = set(kustomization["resources"])
    # Overlays (deploy/keda, deploy/keda-mtls) list their own files.
    on_disk = {p.name for p in K8S.glob("*.y*ml")} - {"kustomization.yaml"}
    assert listed == on_disk, (
        f"not in kustomization: {sorted(on_disk - listed)}; missing on disk: "
        f"{sorted(listed - on_disk)}"
    )


def test_every_resource_is_named_and_typed(resources: list[dict[str, Any]]) -> None:
    for resource in resources:
        assert resource.get("apiVersion") and resource.get("kind"), resource
        assert resource.get("metadata", {}).get("name"), resource


# --- every workload ----------------------------------------------------------


def test_every_container_sets_requests_and_limits(resources: list[dict[str, Any]]) -> None:
    for workload in workloads(resources):
        for container in all_containers(pod_spec(workload)):
            where = f"{workload['metadata']['name']}/{container['name']}"
            res = container.get("resources", {})
            for bound in ("requests", "limits"):
                for name in ("cpu", "memory"):
                    assert name in res.get(bound, {}), f"{where}: no {bound}.{name}"
            assert parse_cpu_millis(res["requests"]["cpu"]) <= parse_cpu_millis(
                res["limits"]["cpu"]
            ), f"{where}: cpu request above limit"
            assert parse_memory_bytes(res["requests"]["memory"]) <= parse_memory_bytes(
                res["limits"]["memory"]
            ), f"{where}: memory request above limit"


def test_no_container_runs_as_root(resources: list[dict[str, Any]]) -> None:
    for workload in workloads(resources):
        spec = pod_spec(workload)
        pod_ctx = spec.get("securityContext", {})
        for container in all_containers(spec):
            where = f"{workload['metadata']['name']}/{container['name']}"
            ctx = {**pod_ctx, **container.get("securityContext", {})}
            assert ctx.get("runAsNonRoot") is True, f"{where}: runAsNonRoot is not true"
            assert ctx.get("runAsUser", 1) != 0, f"{where}: runs as UID 0"
            assert ctx.get("runAsGroup", 1) != 0, f"{where}: runs as GID 0"
            container_ctx = container.get("securityContext", {})
            assert container_ctx.get("allowPrivilegeEscalation") is False, where
            assert container_ctx.get("readOnlyRootFilesystem") is True, where
            assert "ALL" in container_ctx.get("capabilities", {}).get("drop", []), where
            assert not container_ctx.get("privileged", False), where


def test_every_referenced_configmap_and_secret_exists(resources: list[dict[str, Any]]) -> None:
    defined = {(r["kind"], r["metadata"]["name"]) for r in resources}
    for workload in workloads(resources):
        spec = pod_spec(workload)
        wanted: list[tuple[str, str]] = []
        for container in all_containers(spec):
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    wanted.append(("ConfigMap", source["configMapRef"]["name"]))
                if "secretRef" in source:
                    wanted.append(("Secret", source["secretRef"]["name"]))
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                wanted.append(("Secret", volume["secret"]["secretName"]))
            if "configMap" in volume:
                wanted.append(("ConfigMap", volume["configMap"]["name"]))
        mounted = {v["name"] for v in spec.get("volumes", [])}
        for container in all_containers(spec):
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in mounted, f"mount of undefined volume {mount['name']}"
        for ref in wanted:
            assert ref in defined, f"{workload['metadata']['name']} references missing {ref}"


# --- the coordinator ---------------------------------------------------------


def coordinator_container(resources: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = find(resources, "Deployment", COORDINATOR)
    return pod_spec(deployment)["containers"][0]


def test_coordinator_runs_at_least_two_replicas(resources: list[dict[str, Any]]) -> None:
    deployment = find(resources, "Deployment", COORDINATOR)
    assert deployment["spec"]["replicas"] >= 2
    rolling = deployment["spec"].get("strategy", {}).get("rollingUpdate", {})
    assert rolling.get("maxUnavailable", 1) == 0, "a rollout should never drop below full capacity"


def test_coordinator_deployment_selects_its_own_pods(resources: list[dict[str, Any]]) -> None:
    deployment = find(resources, "Deployment", COORDINATOR)
    assert selects(deployment["spec"]["selector"], pod_labels(deployment))


def test_coordinator_probes_use_grpc_health_on_the_listen_port(
    resources: list[dict[str, Any]],
) -> None:
    container = coordinator_container(resources)
    listen_port = int(configmap_value(resources, "WFJOBS_LISTEN").rsplit(":", 1)[1])
    container_ports = {p["containerPort"] for p in container["ports"]}
    assert listen_port in container_ports
    for probe_name in ("readinessProbe", "livenessProbe"):
        probe = container.get(probe_name)
        assert probe, f"coordinator has no {probe_name}"
        assert "grpc" in probe, f"{probe_name} is not a gRPC health probe: {probe}"
        assert probe["grpc"]["port"] == listen_port, f"{probe_name} asks the wrong port"


def test_coordinator_is_started_with_serve(resources: list[dict[str, Any]]) -> None:
    container = coordinator_container(resources)
    assert "serve" in container.get("command", []) + container.get("args", [])


def test_termination_grace_exceeds_drain_timeout(resources: list[dict[str, Any]]) -> None:
    drain = float(configmap_value(resources, "WFJOBS_DRAIN_TIMEOUT"))
    grace = pod_spec(find(resources, "Deployment", COORDINATOR))["terminationGracePeriodSeconds"]
    assert grace >= drain + DRAIN_MARGIN_SECONDS, (
        f"terminationGracePeriodSeconds {grace} leaves no margin over a {drain}s drain"
    )


def test_coordinator_reads_the_drain_timeout_from_the_configmap(
    resources: list[dict[str, Any]],
) -> None:
    # Otherwise the grace check above compares against a value nobody uses.
    container = coordinator_container(resources)
    refs = [s["configMapRef"]["name"] for s in container.get("envFrom", []) if "configMapRef" in s]
    assert COORDINATOR in refs
    overrides = {e["name"] for e in container.get("env", [])}
    assert "WFJOBS_DRAIN_TIMEOUT" not in overrides


def test_coordinator_gets_the_database_url_from_a_secret(resources: list[dict[str, Any]]) -> None:
    container = coordinator_container(resources)
    secret_names = [
        s["secretRef"]["name"] for s in container.get("envFrom", []) if "secretRef" in s
    ]
    assert any(
        "WFJOBS_DATABASE_URL" in find(resources, "Secret", name).get("stringData", {})
        or "WFJOBS_DATABASE_URL" in find(resources, "Secret", name).get("data", {})
        for name in secret_names
    )
    assert "WFJOBS_DATABASE_URL" not in find(resources, "ConfigMap", COORDINATOR)["data"]


def test_pdb_selects_the_coordinator_pods_and_allows_a_drain(
    resources: list[dict[str, Any]],
) -> None:
    pdbs = [r for r in resources if r["kind"] == "PodDisruptionBudget"]
    coordinator = find(resources, "Deployment", COORDINATOR)
    worker = find(resources, "Deployment", WORKER)
    covering = [p for p in pdbs if selects(p["spec"]["selector"], pod_labels(coordinator))]
    assert len(covering) == 1, "exactly one PodDisruptionBudget must cover the coordinator"
    pdb = covering[0]
    assert not selects(pdb["spec"]["selector"], pod_labels(worker))
    min_available = pdb["spec"].get("minAvailable")
    assert isinstance(min_available, int), "use an integer minAvailable"
    # Below the replica count, or a node drain could never evict a replica.
    assert 1 <= min_available < coordinator["spec"]["replicas"]


def test_services_select_coordinators_and_headless_has_no_cluster_ip(
    resources: list[dict[str, Any]],
) -> None:
    coordinator = find(resources, "Deployment", COORDINATOR)
    container_port_names = {p["name"] for p in coordinator_container(resources)["ports"]}
    normal = find(resources, "Service", COORDINATOR)
    headless = find(resources, "Service", HEADLESS)
    assert headless["spec"].get("clusterIP") == "None"
    assert normal["spec"].get("clusterIP") != "None"
    for service in (normal, headless):
        assert selects(service["spec"]["selector"], pod_labels(coordinator))
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            assert isinstance(target, int) or target in container_port_names


def test_workers_dial_the_headless_service(resources: list[dict[str, Any]]) -> None:
    worker = find(resources, "Deployment", WORKER)
    container = pod_spec(worker)["containers"][0]
    argv = container.get("command", []) + container.get("args", [])
    target = argv[argv.index("--target") + 1]
    port = find(resources, "Service", HEADLESS)["spec"]["ports"][0]["port"]
    assert target == f"dns:///{HEADLESS}:{port}", target
    # Round robin over the replicas DNS answers with: pick_first would use one.
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert env.get("WFJOBS_LOAD_BALANCING") == "round_robin", env


def test_worker_grace_lets_handlers_drain(resources: list[dict[str, Any]]) -> None:
    worker = find(resources, "Deployment", WORKER)
    assert pod_spec(worker).get("terminationGracePeriodSeconds", 30) >= 30


def test_hpa_targets_the_worker_deployment(resources: list[dict[str, Any]]) -> None:
    hpas = [r for r in resources if r["kind"] == "HorizontalPodAutoscaler"]
    assert hpas, "no HorizontalPodAutoscaler"
    for hpa in hpas:
        assert hpa["apiVersion"] == "autoscaling/v2"
        ref = hpa["spec"]["scaleTargetRef"]
        assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("apps/v1", "Deployment", WORKER)
        target = find(resources, "Deployment", ref["name"])
        assert target["apiVersion"] == ref["apiVersion"]
        assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
        assert hpa["spec"]["metrics"], "an HPA with no metric does nothing"


def test_migration_job_runs_migrate_with_the_coordinator_image(
    resources: list[dict[str, Any]],
) -> None:
    job = find(resources, "Job", MIGRATE)
    spec = pod_spec(job)
    assert spec["restartPolicy"] in {"Never", "OnFailure"}
    (container,) = spec["containers"]
    argv = container.get("command", []) + container.get("args", [])
    assert "migrate" in argv and "serve" not in argv
    image = container["image"].split(":")[0]
    assert image == coordinator_container(resources)["image"].split(":")[0]
    # Same settings as the replicas it prepares the schema for.
    assert container["envFrom"] == coordinator_container(resources)["envFrom"]


def test_kubernetes_manifests_match_the_openapi_schemas(resources: list[dict[str, Any]]) -> None:
    validator = require_module("kubernetes_validate", "kubernetes-validate is not installed")
    version = validator.latest_version()
    for resource in resources:
        try:
            validator.validate(resource, version, strict=True)
        except validator.ValidationError as error:
            name = f"{resource['kind']}/{resource['metadata']['name']}"
            pytest.fail(f"{name}: {error.message} at {list(error.path)}")


def test_kustomize_builds_the_manifests(resources: list[dict[str, Any]]) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        missing_tool("kubectl is not installed")
    built = subprocess.run(
        [kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=60, check=False
    )
    assert built.returncode == 0, built.stderr
    docs = [d for d in yaml.safe_load_all(built.stdout) if d]
    assert len(docs) == len(resources)
    assert all(
        d["metadata"].get("namespace") == "workflow-jobs" for d in docs if d["kind"] != "Namespace"
    )


# --- compose -----------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_yaml_documents(COMPOSE)[0]


def service_argv(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else list(command)


def coordinator_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: s
        for name, s in compose["services"].items()
        if "Dockerfile.coordinator" in str(s.get("build", {}).get("dockerfile", ""))
        and "serve" in service_argv(s)
    }


def replicas(service: dict[str, Any]) -> int:
    return int(service.get("deploy", {}).get("replicas", 1))


def test_compose_runs_at_least_two_coordinator_replicas(compose: dict[str, Any]) -> None:
    servers = coordinator_services(compose)
    assert sum(replicas(s) for s in servers.values()) >= 2, sorted(servers)


def test_compose_coordinators_wait_for_a_successful_migration(compose: dict[str, Any]) -> None:
    migrators = {name: s for name, s in compose["services"].items() if "migrate" in service_argv(s)}
    assert len(migrators) == 1, "exactly one migrate step"
    ((name, migrate),) = migrators.items()
    assert replicas(migrate) == 1
    assert migrate.get("restart", "no") == "no", "a one-shot step must not restart"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    servers = coordinator_services(compose)
    assert servers
    for server_name, server in servers.items():
        condition = server["depends_on"][name]["condition"]
        assert condition == "service_completed_successfully", server_name
        assert (
            server["environment"]["WFJOBS_DATABASE_URL"]
            == (migrate["environment"]["WFJOBS_DATABASE_URL"])
        ), "migrate and the coordinators must share one database"


def test_compose_database_url_points_at_the_postgres_service(compose: dict[str, Any]) -> None:
    postgres = compose["services"]["postgres"]
    env = postgres["environment"]
    expected = (
        f"postgresql+psycopg://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}"
        f"@postgres:5432/{env['POSTGRES_DB']}"
    )
    for server in coordinator_services(compose).values():
        assert server["environment"]["WFJOBS_DATABASE_URL"] == expected
    assert "healthcheck" in postgres


def test_compose_stop_grace_exceeds_drain_timeout(compose: dict[str, Any]) -> None:
    for name, server in coordinator_services(compose).items():
        drain = float(server["environment"]["WFJOBS_DRAIN_TIMEOUT"])
        grace = parse_duration_seconds(server.get("stop_grace_period", "10s"))
        assert grace >= drain + DRAIN_MARGIN_SECONDS, name
        assert server.get("stop_signal", "SIGTERM") == "SIGTERM"


def test_compose_coordinators_have_a_grpc_health_check(compose: dict[str, Any]) -> None:
    for name, server in coordinator_services(compose).items():
        test = server["healthcheck"]["test"]
        assert "/opt/wfjobs/healthcheck.py" in test, name


def test_compose_runs_two_workers_through_the_load_balancer(compose: dict[str, Any]) -> None:
    services = compose["services"]
    workers = {
        n: s
        for n, s in services.items()
        if "Dockerfile.worker" in str(s.get("build", {}).get("dockerfile", ""))
    }
    assert sum(replicas(s) for s in workers.values()) >= 2
    envoy = load_yaml_documents(DEPLOY / "envoy.yaml")[0]
    listen_port = envoy["static_resources"]["listeners"][0]["address"]["socket_address"][
        "port_value"
    ]
    for name, worker in workers.items():
        argv = service_argv(worker)
        host, port = argv[argv.index("--target") + 1].removeprefix("dns:///").rsplit(":", 1)
        assert host in services, f"{name} dials {host}, which is no compose service"
        if host == "envoy":
            assert int(port) == listen_port
        assert parse_duration_seconds(worker.get("stop_grace_period", "10s")) >= 30


def test_compose_bind_mounts_exist(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume["source"]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in compose.get("volumes", {}), f"{name}: undeclared volume {source}"


def test_compose_dependencies_name_real_services(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"


def test_compose_matches_the_compose_specification(compose: dict[str, Any]) -> None:
    require_module("check_jsonschema", "check-jsonschema is not installed")
    jsonschema = require_module("jsonschema", "jsonschema (with check-jsonschema) is not installed")
    spec = importlib.util.find_spec("check_jsonschema.builtin_schemas.vendor")
    assert spec and spec.submodule_search_locations
    schema_path = Path(next(iter(spec.submodule_search_locations))) / "compose-spec.json"
    schema = json.loads(schema_path.read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    errors = sorted(validator_class(schema).iter_errors(compose), key=str)
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_docker_compose_config_accepts_the_file() -> None:
    for argv in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(argv[0]) is None:
            continue
        probe = subprocess.run(
            [*argv, "version"], capture_output=True, text=True, timeout=30, check=False
        )
        if probe.returncode != 0:
            continue
        result = subprocess.run(
            [*argv, "-f", str(COMPOSE), "config", "--quiet"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return
    pytest.skip("neither `docker compose` nor docker-compose is installed")


# --- envoy and the collector -------------------------------------------------


def test_envoy_balances_grpc_streams_across_coordinators(compose: dict[str, Any]) -> None:
    envoy = load_yaml_documents(DEPLOY / "envoy.yaml")[0]
    (listener,) = envoy["static_resources"]["listeners"]
    manager = listener["filter_chains"][0]["filters"][0]["typed_config"]
    # Idle AcquireJobs streams must not be cut, nor long-lived streams timed out.
    assert manager["stream_idle_timeout"] == "0s"
    routes = manager["route_config"]["virtual_hosts"][0]["routes"]
    assert all(r["route"]["timeout"] == "0s" for r in routes)
    clusters = {c["name"]: c for c in envoy["static_resources"]["clusters"]}
    for route in routes:
        cluster = clusters[route["route"]["cluster"]]
        assert cluster["type"] == "STRICT_DNS"
        options = cluster["typed_extension_protocol_options"][
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
        ]
        assert "http2_protocol_options" in options["explicit_http_config"], "gRPC needs HTTP/2"
        assert any("grpc_health_check" in h for h in cluster["health_checks"])
        for group in cluster["load_assignment"]["endpoints"]:
            for endpoint in group["lb_endpoints"]:
                address = endpoint["endpoint"]["address"]["socket_address"]
                assert address["address"] in coordinator_services(compose)
                assert address["port_value"] == 50051


def test_collector_pipelines_use_defined_components_and_reach_jaeger(
    compose: dict[str, Any],
) -> None:
    collector = load_yaml_documents(DEPLOY / "otel-collector.yaml")[0]
    pipelines = collector["service"]["pipelines"]
    for pipeline in pipelines.values():
        for section in ("receivers", "processors", "exporters"):
            for component in pipeline.get(section, []):
                assert component in collector[section], f"undefined {section[:-1]} {component}"
    trace_exporters = [collector["exporters"][e] for e in pipelines["traces"]["exporters"]]
    hosts = {
        e["endpoint"].split("://")[-1].split(":")[0] for e in trace_exporters if "endpoint" in e
    }
    assert "jaeger" in hosts and "jaeger" in compose["services"]
    for server in coordinator_services(compose).values():
        endpoint = server["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
        assert endpoint.split("://")[-1].split(":")[0] in compose["services"]


# --- Dockerfiles -------------------------------------------------------------


@dataclass
class Stage:
    """One FROM … stage of a Dockerfile, with its instructions in order."""

    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)


def parse_dockerfile(path: Path) -> list[Stage]:
    text = re.sub(r"\\\n", " ", path.read_text())
    stages: list[Stage] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = rest.split()
            words = [w for w in words if not w.startswith("--")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=words[0], name=name))
        elif stages:
            stages[-1].instructions.append((keyword, rest.strip()))
    return stages


def effective(stages: list[Stage], stage: Stage, keyword: str) -> str | None:
    """The last value of `keyword` in `stage`, inherited from a parent stage."""
    values = [rest for kw, rest in stage.instructions if kw == keyword]
    if values:
        return values[-1]
    parent = next((s for s in stages if s.name == stage.base), None)
    return effective(stages, parent, keyword) if parent else None


def runtime_stages(stages: list[Stage]) -> list[Stage]:
    """Every stage someone runs: all but the build stages."""
    return [s for s in stages if s.name != "build"]


DOCKERFILES = ["Dockerfile.coordinator", "Dockerfile.worker"]


@pytest.mark.parametrize("name", DOCKERFILES)
def test_dockerfile_runtime_stages_run_as_a_numeric_non_root_user(name: str) -> None:
    stages = parse_dockerfile(DEPLOY / name)
    assert len(stages) >= 2, "expected a multi-stage build"
    for stage in runtime_stages(stages):
        user = effective(stages, stage, "USER")
        assert user, f"{name} stage {stage.name}: no USER, so it runs as root"
        uid = user.split(":")[0]
        # Numeric, so Kubernetes can verify runAsNonRoot against the image.
        assert uid.isdigit() and int(uid) != 0, f"{name} stage {stage.name}: USER {user}"


@pytest.mark.parametrize("name", DOCKERFILES)
def test_dockerfile_runtime_stages_declare_a_healthcheck(name: str) -> None:
    stages = parse_dockerfile(DEPLOY / name)
    for stage in runtime_stages(stages):
        assert effective(stages, stage, "HEALTHCHECK"), f"{name} stage {stage.name}"


def test_coordinator_image_checks_grpc_health() -> None:
    stages = parse_dockerfile(DEPLOY / "Dockerfile.coordinator")
    final = stages[-1]
    healthcheck = effective(stages, final, "HEALTHCHECK") or ""
    assert healthcheck.split()[0] != "NONE"
    assert "/opt/wfjobs/healthcheck.py" in healthcheck
    copies = [rest for kw, rest in final.instructions if kw == "COPY"]
    assert any("deploy/healthcheck.py /opt/wfjobs/healthcheck.py" in c for c in copies)
    assert "50051" in (effective(stages, final, "EXPOSE") or "")
    assert '"-m", "coordinator"' in (effective(stages, final, "ENTRYPOINT") or "")


def test_images_install_the_right_extras() -> None:
    coordinator_runs = [
        rest
        for stage in parse_dockerfile(DEPLOY / "Dockerfile.coordinator")
        for kw, rest in stage.instructions
        if kw == "RUN"
    ]
    assert any("pip install '.[coordinator]'" in r for r in coordinator_runs)
    worker_runs = [
        rest
        for stage in parse_dockerfile(DEPLOY / "Dockerfile.worker")
        for kw, rest in stage.instructions
        if kw == "RUN"
    ]
    installs = [r for r in worker_runs if "pip install" in r]
    assert installs and not any("[" in r for r in installs), "the worker image stays light"


@pytest.mark.parametrize("name", DOCKERFILES)
def test_dockerfile_sources_are_not_excluded_by_dockerignore(name: str) -> None:
    ignored = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for stage in parse_dockerfile(DEPLOY / name):
        for kw, rest in stage.instructions:
            if kw != "COPY" or "--from=" in rest:
                continue
            sources = [w for w in rest.split() if not w.startswith("--")][:-1]
            for source in sources:
                top = source.split("/")[0]
                assert top not in ignored, f"{name} copies {source}, which .dockerignore drops"
                if source.startswith("deploy/"):
                    assert (REPO / source).exists(), f"{name} copies missing {source}"


# --- the health check script -------------------------------------------------


@pytest.fixture(scope="module")
def healthcheck():
    require_module("grpc_health", "grpcio-health-checking (coordinator extra) is not installed")
    spec = importlib.util.spec_from_file_location("wfjobs_healthcheck", DEPLOY / "healthcheck.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def health_server():
    from concurrent import futures

    import grpc
    from grpc_health.v1 import health, health_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(grace=None).wait()


def test_healthcheck_default_target_follows_the_listen_port(healthcheck) -> None:
    assert healthcheck.default_target(None) == "127.0.0.1:50051"
    assert healthcheck.default_target("0.0.0.0:6000") == "127.0.0.1:6000"
    assert healthcheck.default_target("[::]:7000") == "127.0.0.1:7000"


def test_healthcheck_passes_only_while_serving(healthcheck, health_server) -> None:
    from grpc_health.v1 import health_pb2

    servicer, target = health_server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert healthcheck.main(["--target", target, "--timeout", "2"]) == 0
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert healthcheck.main(["--target", target, "--timeout", "2"]) == 1
    # An unknown service name is NOT_FOUND, which is unhealthy.
    assert healthcheck.main(["--target", target, "--service", "nope", "--timeout", "2"]) == 1


def test_healthcheck_fails_when_nothing_listens(healthcheck) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        unused = f"127.0.0.1:{probe.getsockname()[1]}"
    assert healthcheck.main(["--target", unused, "--timeout", "0.5"]) == 1


# --- the KEDA overlays (deploy/keda, deploy/keda-mtls) ------------------------------

KEDA = DEPLOY / "keda"
KEDA_MTLS = DEPLOY / "keda-mtls"


def test_the_keda_overlay_scales_the_workers_on_the_coordinators_scaler(
    resources: list[dict[str, Any]],
) -> None:
    overlay = load_yaml_documents(KEDA / "kustomization.yaml")[0]
    assert set(overlay["resources"]) == {"../kubernetes", "worker-scaledobject.yaml"}
    # KEDA makes its own HPA for the Deployment: the base's CPU one is deleted.
    [patch] = overlay["patches"]
    assert patch["target"] == {"kind": "HorizontalPodAutoscaler", "name": WORKER}
    assert "$patch: delete" in patch["patch"]
    [scaled] = load_yaml_documents(KEDA / "worker-scaledobject.yaml")
    assert (scaled["apiVersion"], scaled["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    ref = scaled["spec"]["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("apps/v1", "Deployment", WORKER)
    find(resources, "Deployment", WORKER)
    [trigger] = scaled["spec"]["triggers"]
    assert trigger["type"] in ("external", "external-push")
    meta = trigger["metadata"]
    host, _, port = meta["scalerAddress"].rpartition(":")
    service = find(resources, "Service", COORDINATOR)
    assert host.split(".")[0] == COORDINATOR
    assert int(port) in {p["port"] for p in service["spec"]["ports"]}
    assert host.split(".")[1] == scaled["metadata"]["namespace"]
    # The job types are those the example worker serves.
    served = set(
        re.findall(r'@worker\.handler\("([^"]+)"\)', (REPO / "examples" / "worker.py").read_text())
    )
    assert set(meta["jobTypes"].split(",")) <= served and meta["jobTypes"]
    assert float(meta["targetPerReplica"]) > 0
    # Scaling to zero is safe: running jobs count (docs/autoscaling.md).
    assert scaled["spec"]["minReplicaCount"] == 0 < scaled["spec"]["maxReplicaCount"]


def test_the_mtls_overlay_makes_keda_present_a_client_certificate() -> None:
    overlay = load_yaml_documents(KEDA_MTLS / "kustomization.yaml")[0]
    assert set(overlay["resources"]) == {"../keda", "scaler-trigger-authentication.yaml"}
    [auth] = load_yaml_documents(KEDA_MTLS / "scaler-trigger-authentication.yaml")
    assert (auth["apiVersion"], auth["kind"]) == ("keda.sh/v1alpha1", "TriggerAuthentication")
    [scaled] = load_yaml_documents(KEDA / "worker-scaledobject.yaml")
    assert auth["metadata"]["namespace"] == scaled["metadata"]["namespace"]
    # KEDA's external scalers take exactly these three TLS parameters, here
    # from one Secret's keys (the layout of a kubernetes.io/tls Secret plus ca.crt).
    refs = auth["spec"]["secretTargetRef"]
    assert {r["parameter"]: r["key"] for r in refs} == {
        "caCert": "ca.crt",
        "tlsClientCert": "tls.crt",
        "tlsClientKey": "tls.key",
    }
    assert len({r["name"] for r in refs}) == 1
    # The ScaledObject's trigger names the TriggerAuthentication.
    [patch] = overlay["patches"]
    assert patch["target"]["kind"] == "ScaledObject"
    assert patch["target"]["name"] == scaled["metadata"]["name"]
    [op] = yaml.safe_load(patch["patch"])
    assert (op["op"], op["path"]) == ("add", "/spec/triggers/0/authenticationRef")
    assert op["value"] == {"name": auth["metadata"]["name"]}


@pytest.mark.parametrize("overlay", [KEDA, KEDA_MTLS], ids=lambda p: p.name)
def test_kustomize_builds_the_keda_overlays(overlay: Path, resources: list[dict[str, Any]]) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        missing_tool("kubectl is not installed")
    built = subprocess.run(
        [kubectl, "kustomize", str(overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    docs = [d for d in yaml.safe_load_all(built.stdout) if d]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("HorizontalPodAutoscaler", WORKER) not in kinds
    assert ("ScaledObject", WORKER) in kinds
    [scaled] = [d for d in docs if d["kind"] == "ScaledObject"]
    [trigger] = scaled["spec"]["triggers"]
    if overlay == KEDA_MTLS:
        assert trigger["authenticationRef"] == {"name": "wfjobs-scaler-mtls"}
        assert ("TriggerAuthentication", "wfjobs-scaler-mtls") in kinds
    else:
        assert "authenticationRef" not in trigger
