"""kubectl's kubeconfig rules for `check`, `map` and `status`: ``--kubeconfig``, else ``$KUBECONFIG``
(a list: the files that exist, merged, the first ``current-context`` winning), else
``~/.kube/config``; ``--context``; ``-n`` defaulting to the context's namespace; "no such file".

The live runs go through the installed CLI against the in-process fake API server, holding the
sample cluster's objects, so the verdicts are the sample's.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.webhook.conftest import REPO, TASGATE, Run, tasgate
from tests.webhook.fakeapi import FakeApi
from webhook.files.kubeconfig import Kubeconfig, default_kubeconfig, first_existing, locate
from webhook.files.loader import LoadError
from webhook.files.sample import sample_objects

JOB = REPO / "examples" / "job-rack.yaml"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def kubeconfig(path: Path, current: str | None, contexts: Mapping[str, tuple[str, str]]) -> Path:
    """A kubeconfig with one cluster and context per ``contexts`` entry (name -> server, namespace)."""
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": f"{n}-cluster", "cluster": {"server": s}} for n, (s, _) in contexts.items()],
        "users": [{"name": "user", "user": {"token": "t"}}],
        "contexts": [
            {"name": n, "context": {"cluster": f"{n}-cluster", "user": "user", "namespace": ns}}
            for n, (_, ns) in contexts.items()
        ],
    }
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


# --- which files, which context ------------------------------------------------------------------


def test_the_default_is_kubeconfig_else_the_home_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/u")
    assert default_kubeconfig({"KUBECONFIG": "/a:/b"}) == "/a:/b"
    assert default_kubeconfig({"KUBECONFIG": ""}) == "/home/u/.kube/config"
    assert default_kubeconfig({}) == "/home/u/.kube/config"


def test_a_list_merges_the_files_that_exist_and_the_first_current_context_wins(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "a", "ctx-a", {"ctx-a": ("http://a", "team"), "shared": ("http://a", "x")})
    second = kubeconfig(tmp_path / "b", "ctx-b", {"ctx-b": ("http://b", ""), "shared": ("http://b", "y")})
    (tmp_path / "empty").write_text("")
    found = locate(os.pathsep.join(map(str, [tmp_path / "missing", first, tmp_path / "empty", second])))
    assert found.files == (str(first), str(second)), "missing and empty files merge as nothing"
    assert found.config_file == f"{first}{os.pathsep}{second}"
    assert found.current_context == "ctx-a"
    assert (found.use(None), found.use("ctx-b")) == ("ctx-a", "ctx-b")
    assert (found.namespace(None), found.namespace("ctx-b"), found.namespace("shared")) == (
        "team",
        "default",
        "x",
    ), "the first file to name a context wins; no namespace is default"


def test_none_of_the_files_is_no_such_file(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"^kubeconfig /nonexistent: no such file$"):
        locate("/nonexistent")
    with pytest.raises(LoadError, match="no such file"):
        locate(f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")
    (tmp_path / "list").write_text("- 1\n")
    with pytest.raises(LoadError, match="not a kubeconfig"):
        locate(str(tmp_path / "list"))


def test_an_unknown_or_missing_context_names_the_ones_there_are(tmp_path: Path) -> None:
    found = locate(str(kubeconfig(tmp_path / "k", None, {"a": ("http://a", ""), "b": ("http://b", "")})))
    with pytest.raises(LoadError, match=r"no current-context; give --context \(contexts: a, b\)"):
        found.use(None)
    with pytest.raises(LoadError, match=r'no context "zz" \(contexts: a, b\)'):
        found.use("zz")
    assert Kubeconfig(("f",)).namespace(None) == "default"


def test_the_server_takes_the_first_file_that_exists(tmp_path: Path) -> None:
    there = kubeconfig(tmp_path / "k", "a", {"a": ("http://a", "")})
    assert first_existing(f"{tmp_path / 'missing'}{os.pathsep}{there}") == str(there)
    assert first_existing(str(tmp_path / "missing")) == str(tmp_path / "missing")


# --- through the CLI -----------------------------------------------------------------------------


async def cli(env: Mapping[str, str], *args: str, stdin: str | None = None) -> Run:
    proc = await asyncio.create_subprocess_exec(
        str(TASGATE), *args, env={**os.environ, **env}, cwd=REPO,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 120)
    return Run(proc.returncode or 0, out.decode(), err.decode())


def collection(obj: Mapping[str, Any]) -> str:
    namespace = obj["metadata"].get("namespace")
    if obj["kind"] in ("Node", "Namespace", "Pod"):
        plural = f"{obj['kind'].lower()}s"
        return f"/api/v1/namespaces/{namespace}/{plural}" if namespace else f"/api/v1/{plural}"
    plural = {"Topology": "topologies"}.get(obj["kind"], f"{obj['kind'].lower()}s")
    return f"{KUEUE}/namespaces/{namespace}/{plural}" if namespace else f"{KUEUE}/{plural}"


@pytest.fixture
async def live(tmp_path: Path) -> Any:
    """The fake API server holding the sample cluster, and a $KUBECONFIG list reaching it: a missing
    file, one whose current-context is the fake's, one whose current-context points nowhere."""
    api = await FakeApi().start()
    for obj in sample_objects():
        api.put(collection(obj), obj)
    assert api.server is not None
    url = str(api.server.make_url("")).rstrip("/")
    near = kubeconfig(tmp_path / "near", "fake", {"fake": (url, "team")})
    far = kubeconfig(tmp_path / "far", "nowhere", {"nowhere": ("http://127.0.0.1:9", "")})
    env = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "missing"), str(near), str(far)])}
    yield api, env
    await api.close()


async def test_live_is_asked_for_and_reads_kubectls_merged_kubeconfig(live: Any) -> None:
    api, env = live
    offline = await cli(env, "check", "-f", str(JOB))
    assert offline.code == 0 and "ADMITTED (fits)" in offline.out
    assert api.requests == [], "$KUBECONFIG alone leaves check on the sample cluster"
    run = await cli(env, "check", "-f", str(JOB), "--live")
    assert (run.code, run.err) == (0, ""), run.err
    assert "Job default/resnet-rack: ADMITTED (fits)" in run.out
    assert ("GET", "/api/v1/nodes") in api.requests, "the first file's current-context, not the last's"
    elsewhere = await cli(env, "check", "-f", str(JOB), "--context", "nowhere")
    assert elsewhere.code == 2 and "listing nodes" in elsewhere.err, "--context reads the same list"


async def test_namespace_defaults_to_the_contexts(live: Any) -> None:
    _, env = live
    obj = yaml.safe_load(JOB.read_text())
    del obj["metadata"]["namespace"]
    run = await cli(env, "check", "-f", "-", "--live", "-o", "json", stdin=yaml.safe_dump(obj))
    (result,) = orjson.loads(run.out)["results"]
    assert (result["namespace"], result["reason"]) == ("team", "kueue-config")
    assert result["warnings"] == ['not checked: LocalQueue "team/tas-user-queue" not found']
    given = await cli(env, "check", "-f", "-", "--live", "-n", "default", stdin=yaml.safe_dump(obj))
    assert "ADMITTED (fits)" in given.out


async def test_status_and_map_read_it_too(live: Any) -> None:
    _, env = live
    status = await cli(env, "status")
    assert (status.code, status.out) == (0, "No gangs found.\n"), status.err
    assert await cli(env, "status", "-A") == status
    picture = await cli(env, "map", "--live")
    assert picture.code == 0, picture.err
    assert picture.out == (await cli({}, "map")).out, "the fake holds the sample cluster"


@pytest.mark.parametrize("command", [("status",), ("check", "-f", str(JOB)), ("map",)])
def test_a_missing_kubeconfig_is_no_such_file(tmp_path: Path, command: tuple[str, ...]) -> None:
    run = tasgate(*command, "--kubeconfig", "/nonexistent")
    assert (run.code, run.err) == (2, "tasgate: error: kubeconfig /nonexistent: no such file\n")
    home = tmp_path / "home"
    env = {**os.environ, "HOME": str(home), "KUBECONFIG": ""}
    live = () if command == ("status",) else ("--live",)
    done = subprocess.run(
        [str(TASGATE), *command, *live], env=env, capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stderr) == (
        2,
        f"tasgate: error: kubeconfig {home}/.kube/config: no such file\n",
    )
