"""The two image recipes cannot drift: the Dockerfile and image/build.sh (no Docker engine) agree.

Fast and build-free: the Dockerfile is parsed, and build.sh prints its own contract
(``--print-config``: no root, nothing built). image/test.sh checks the built image against the
same contract, so all three agree on entrypoint, cmd, ports, user, Debian release and Python.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
BUILD_SH = ROOT / "image" / "build.sh"
DEBIAN_PYTHON = {"bookworm": "3.11", "trixie": "3.13"}  # each release's python3


@cache
def contract() -> dict[str, list[str]]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(
        ["bash", str(BUILD_SH), "--print-config"], env=env, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    parsed: dict[str, list[str]] = json.loads(run.stdout)
    return parsed


def one(key: str) -> str:
    values = contract()[key]
    assert len(values) == 1, (key, values)
    return values[0]


@cache
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per logical line: continuations joined, comments dropped."""
    lines, current = [], ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        if not current and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        current += raw.rstrip()
        if current.endswith("\\"):
            current = current[:-1]
            continue
        lines.append(current)
        current = ""
    assert not current, "the Dockerfile ends in a continuation"
    parsed = []
    for line in lines:
        instruction, _, args = line.strip().partition(" ")
        parsed.append((instruction.upper(), " ".join(args.split())))
    return parsed


def stages() -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for instruction, args in dockerfile():
        if instruction == "FROM":
            out.append([])
        out[-1].append((instruction, args))
    return out


def runtime(instruction: str) -> list[str]:
    """The arguments of every ``instruction`` in the last (runtime) stage."""
    return [args for ins, args in stages()[-1] if ins == instruction]


def exec_form(instruction: str) -> Any:
    (args,) = runtime(instruction)
    assert args.startswith("["), f"{instruction} must be in exec (JSON) form: {args}"
    return json.loads(args)


def test_entrypoint_and_cmd_agree() -> None:
    assert exec_form("ENTRYPOINT") == contract()["entrypoint"]
    assert exec_form("CMD") == contract()["cmd"]


def test_exposed_ports_agree() -> None:
    exposed = [port.split("/")[0] for args in runtime("EXPOSE") for port in args.split()]
    assert sorted(exposed) == sorted(contract()["ports"])


def test_user_and_its_creation_agree() -> None:
    assert runtime("USER") == [one("user")]
    assert one("user_setup") in runtime("RUN"), "the Dockerfile must create the user with build.sh's command"
    uid = re.search(r"useradd .*--uid (\d+)", one("user_setup"))
    gid = re.search(r"groupadd .*--gid (\d+)", one("user_setup"))
    assert uid and gid and one("user") == f"{uid.group(1)}:{gid.group(1)}"
    assert uid.group(1) != "0", "the image runs as a non-root user"


def test_debian_release_and_python_agree() -> None:
    suite, python = one("suite"), one("python_version")
    assert DEBIAN_PYTHON.get(suite) == python, f"Debian {suite}'s python3 is {DEBIAN_PYTHON.get(suite)}"
    bases = [args.split()[0] for args in (stage[0][1] for stage in stages())]
    assert bases, "no FROM in the Dockerfile"
    assert set(bases) == {f"python:{python}-slim-{suite}"}, bases
    minimum = re.fullmatch(r">=(\d+)\.(\d+)", requires_python())
    assert minimum, f"unexpected requires-python {requires_python()!r}"
    assert tuple(map(int, python.split("."))) >= tuple(map(int, minimum.groups()))


def requires_python() -> str:
    found = re.search(r'^requires-python = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert found
    return found.group(1)


def test_the_wheel_is_built_from_the_same_sources() -> None:
    copied = set()
    for args in (a for ins, a in stages()[0] if ins == "COPY"):
        *sources, _dest = args.split()
        copied |= {s.rstrip("/") for s in sources if not s.startswith("--")}
    assert copied == set(contract()["sources"])


def test_both_refuse_an_image_without_the_compiled_scorer() -> None:
    check = "import scorer; assert scorer.IMPLEMENTATION == 'compiled'"
    assert any(check in args for args in runtime("RUN"))
    assert check in BUILD_SH.read_text()


def test_the_deployment_runs_the_image_user_on_its_ports() -> None:
    deployment = yaml.safe_load((ROOT / "manifests" / "base" / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    uid, gid = one("user").split(":")
    assert (str(pod["securityContext"]["runAsUser"]), str(pod["securityContext"]["runAsGroup"])) == (uid, gid)
    (container,) = pod["containers"]
    assert {str(p["containerPort"]) for p in container["ports"]} <= set(contract()["ports"])


def test_image_scripts_are_valid_bash() -> None:
    for script in sorted((ROOT / "image").glob("*.sh")):
        run = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
        assert run.returncode == 0, f"{script.name}: {run.stderr}"


def test_the_image_is_tagged_with_the_project_version() -> None:
    """One version: pyproject.toml's, which the chart's appVersion and the kustomize newTag repeat."""
    found = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert found and one("tag") == f"tasgate:{found.group(1)}"


def test_print_digest_reads_the_layouts_index(tmp_path: Path) -> None:
    """``--print-digest`` prints the manifest digest of the tag in the OCI layout (no root, no build),
    and says what is missing when there is no layout."""
    layout = tmp_path / "image" / "oci"
    (layout / "blobs" / "sha256").mkdir(parents=True)
    config = json.dumps({"config": {}}).encode()
    config_digest = hashlib.sha256(config).hexdigest()
    (layout / "blobs" / "sha256" / config_digest).write_bytes(config)
    manifest = json.dumps({"config": {"digest": f"sha256:{config_digest}"}, "layers": []}).encode()
    digest = hashlib.sha256(manifest).hexdigest()
    (layout / "blobs" / "sha256" / digest).write_bytes(manifest)
    ref = {"org.opencontainers.image.ref.name": one("tag")}
    index = {"manifests": [{"digest": f"sha256:{digest}", "annotations": ref}]}
    (layout / "index.json").write_text(json.dumps(index))
    env = {**os.environ, "TASGATE_CACHE": str(tmp_path)}
    run = subprocess.run(
        ["bash", str(BUILD_SH), "--print-digest"], env=env, capture_output=True, text=True, check=False
    )
    assert (run.returncode, run.stdout) == (0, f"sha256:{digest}\n"), run.stderr
    env["TASGATE_CACHE"] = str(tmp_path / "empty")
    run = subprocess.run(
        ["bash", str(BUILD_SH), "--print-digest"], env=env, capture_output=True, text=True, check=False
    )
    assert run.returncode == 1 and "build it first" in run.stderr
