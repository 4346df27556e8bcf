"""The generated go.mod files: which staging modules get replaced, and with what."""

from flotilla.testenv import gomod
from flotilla.testenv.versions import staging_version

UPSTREAM = """\
// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.24.0

godebug default=go1.24

require (
\tgithub.com/blang/semver/v4 v4.0.0
\tk8s.io/api v0.0.0
\tk8s.io/apiserver v0.0.0 // a comment
\tk8s.io/kube-openapi v0.0.0-20250710124328-f3f2b991d03b
)

require k8s.io/kubectl v0.0.0

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver
\tk8s.io/kubectl => ./staging/src/k8s.io/kubectl
\tk8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
\tgithub.com/example/fork => github.com/example/fork v1.2.3
)
"""


def test_staging_modules_are_required_and_replaced_with_staging_dirs():
    # sample-controller is replaced but never required (and not published for every release);
    # github.com/example/fork is replaced but not with a staging directory.
    assert gomod.staging_modules(UPSTREAM) == ["k8s.io/api", "k8s.io/apiserver", "k8s.io/kubectl"]


def test_kubernetes_go_mod_pins_staging_to_v0_release():
    text = gomod.kubernetes_go_mod(UPSTREAM, "v1.34.4")
    assert "require k8s.io/kubernetes v1.34.4" in text
    assert "\tk8s.io/api => k8s.io/api v0.34.4" in text
    assert "\tk8s.io/kubectl => k8s.io/kubectl v0.34.4" in text
    assert "sample-controller" not in text
    assert "github.com/example/fork" not in text


def test_kubernetes_go_mod_copies_go_and_godebug_directives():
    text = gomod.kubernetes_go_mod(UPSTREAM, "v1.34.4")
    assert "\ngo 1.24.0\n" in text
    assert "\ngodebug default=go1.24\n" in text


def test_staging_version():
    assert staging_version("v1.34.4") == "v0.34.4"
    assert staging_version("v1.9.10") == "v0.9.10"


def test_ldflags_set_version_for_server_and_client():
    flags = gomod.kubernetes_ldflags("v1.34.4", build_date="2026-02-10T12:53:36Z")
    assert "-X k8s.io/component-base/version.gitVersion=v1.34.4" in flags
    assert "-X k8s.io/client-go/pkg/version.gitVersion=v1.34.4" in flags
    assert "-X k8s.io/component-base/version.gitMinor=34" in flags
    assert "buildDate=2026-02-10T12:53:36Z" in flags
    # An empty commit is left out rather than set to "".
    assert "gitCommit" not in flags


def test_etcd_wrapper_module():
    assert "require go.etcd.io/etcd/server/v3 v3.5.35" in gomod.etcd_go_mod("v3.5.35")
    assert "etcdmain.Main(os.Args)" in gomod.ETCD_MAIN_GO
