"""`flotilla image build --push`, as a user runs it: the Dockerfile built by buildah and pushed to
a registry, here a local one (Debian's docker-registry, the CNCF distribution server, on plain
HTTP on 127.0.0.1, hence --tls-verify false). The registry then serves the manifest of the tag
pushed, every blob it names, and the image configuration of the archive the build wrote (the
same image, not merely some image).

    .venv/bin/pytest tests/e2e/test_image_push.py -q

Needs root, buildah and debootstrap (scripts/setup.d/45-image.sh, which installs docker-registry
too); marked kube_node so that it shares the real-node worker and its buildah storage with the
image build of the real-node tests (seconds when that image is built already).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import urllib.request

import pytest

from flotilla.testenv.ports import free_port
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube_node, pytest.mark.flotilla_only("the Flotilla image"), pytest.mark.timeout(1200)]

MANIFEST_TYPES = ", ".join(["application/vnd.oci.image.manifest.v1+json",
                            "application/vnd.docker.distribution.manifest.v2+json"])


@pytest.fixture
def registry(tmp_path):
    missing = [b for b in ("buildah", "debootstrap", "docker-registry") if not shutil.which(b)]
    if os.geteuid() != 0 or missing:
        pytest.skip(f"image push: needs root and {', '.join(missing) or 'nothing more'} "
                    "(scripts/setup.d/45-image.sh installs them)")
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(json.dumps({"version": 0.1, "log": {"level": "info"},
                                  "storage": {"filesystem": {"rootdirectory": str(tmp_path / "data")}},
                                  "http": {"addr": f"127.0.0.1:{port}"}}))
    log = tmp_path / "registry.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def answers():
        """True once /v2/ answers 200, else what the registry logged so far (a timeout shows it)."""
        if proc.poll() is not None:
            raise AssertionError(f"docker-registry exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            return urllib.request.urlopen(f"{url}/v2/", timeout=2).status == 200 or log.read_text()[-2000:]
        except OSError:
            return log.read_text()[-2000:]
    try:
        wait_for("the local registry answering /v2/", answers, timeout=30, until=lambda r: r is True)
        yield url, log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def get(url: str, accept: str | None = None, method: str = "GET"):
    req = urllib.request.Request(url, method=method, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.status, resp.read()


def archive_config_digest(archive: str) -> str:
    """The image configuration's digest in the OCI archive the build wrote."""
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))
        digest = index["manifests"][0]["digest"]
        manifest = json.load(tar.extractfile(f"blobs/{digest.replace(':', '/')}"))
    return manifest["config"]["digest"]


def test_the_built_image_is_pushed_to_the_registry_the_user_names(registry):
    url, log = registry
    dest = f"{url.removeprefix('http://')}/team/flotilla:e2e"
    proc = subprocess.run([sys.executable, "-m", "flotilla.cli", "image", "build", "--push", dest,
                           "--tls-verify", "false"], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-4000:]}\nregistry:\n{log.read_text()[-3000:]}"
    built, pushed = proc.stdout.splitlines()
    name, archive = built.split()
    assert pushed == f"pushed docker://{dest}"
    status, body = get(f"{url}/v2/team/flotilla/manifests/e2e", accept=MANIFEST_TYPES)
    manifest = json.loads(body)
    assert status == 200 and manifest["layers"], manifest
    for blob in [manifest["config"], *manifest["layers"]]:
        assert get(f"{url}/v2/team/flotilla/blobs/{blob['digest']}", method="HEAD")[0] == 200, blob
    assert manifest["config"]["digest"] == archive_config_digest(archive), (name, archive)
    assert json.loads(get(f"{url}/v2/team/flotilla/tags/list")[1])["tags"] == ["e2e"]
