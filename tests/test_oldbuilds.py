"""Compiler options for old nginx bases (nginx_eval/mining/oldbuilds.py)."""

import subprocess

import pytest
from nginx_mirrors import mirror, needs_mirrors

from nginx_eval.mining.oldbuilds import legacy_cc_opt, with_legacy_options


def git_mirror(name):
    """The local mirror of github.com/nginx/<name>, or None. (Not named test*: pytest would
    collect it as a test.)"""
    return mirror(f"nginx/{name}")


needs_mirror = needs_mirrors("nginx/nginx")


def test_a_history_that_is_not_nginx_gets_no_options(tmp_path):
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "one",
        ],
        check=True,
    )
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    git_dir = repo / ".git"
    assert legacy_cc_opt(git_dir, head, ["--with-http_ssl_module"]) == []
    assert with_legacy_options(git_dir, head, ["--with-mail"]) == ["--with-mail"]


@needs_mirror
@pytest.mark.parametrize(
    "base, flags, expected",
    [
        # 2024: builds as it is
        ("788e462c5", ["--with-http_ssl_module"], ["--with-http_ssl_module"]),
        # 2019 with SSL: only OpenSSL 3's deprecations
        (
            "16ebfa999",
            ["--with-http_ssl_module"],
            ["--with-http_ssl_module", "--with-cc-opt=-Wno-deprecated-declarations"],
        ),
        # 2017-09 without SSL: gcc 8's warning and libxcrypt; an existing --with-cc-opt is merged
        (
            "316a34951",
            ["--with-stream", "--with-cc-opt=-O0"],
            ["--with-stream", "--with-cc-opt=-O0 -Wno-cast-function-type -DNGX_HAVE_GNU_CRYPT_R=0"],
        ),
        # 2015-06: also gcc 7's fall-through warning and OpenSSL's MD5 in the core
        (
            "f81ae4e39",
            [],
            [
                "--with-cc-opt=-Wno-implicit-fallthrough -Wno-cast-function-type "
                "-DNGX_HAVE_GNU_CRYPT_R=0 -Wno-deprecated-declarations"
            ],
        ),
        # 2015-06 with SSL: before OpenSSL 1.1 support, nothing makes it build
        ("f81ae4e39", ["--with-http_ssl_module"], None),
        # 2014-05: the same options; measured to build
        (
            "68336e1ed",
            [],
            [
                "--with-cc-opt=-Wno-implicit-fallthrough -Wno-cast-function-type "
                "-DNGX_HAVE_GNU_CRYPT_R=0 -Wno-deprecated-declarations"
            ],
        ),
        # 2013-05: <sys/sysctl.h>, included on Linux until 2013-06-26
        ("a80cb8160", [], None),
    ],
)
def test_options_follow_the_base(base, flags, expected):
    assert with_legacy_options(git_mirror("nginx"), base, flags) == expected


@needs_mirrors("nginx/nginx-tests")
@pytest.mark.parametrize(
    "commit, fixed",
    [
        ("17933389", True),  # 2015-09: not_modified_proxy.t binds 127.0.0.1:8080 itself
        ("d66bb70c", False),  # 2016-06-21: "parallel tests support", port()
        ("76bb761c", False),
    ],
)
def test_fixed_port_trees_are_told_apart_in_the_real_history(tmp_path, commit, fixed):
    from nginx_eval.prove.network import uses_fixed_ports

    library = subprocess.run(
        ["git", "--git-dir", str(git_mirror("nginx-tests")), "show", f"{commit}:lib/Test/Nginx.pm"],
        capture_output=True,
        check=True,
    ).stdout
    (tmp_path / "lib" / "Test").mkdir(parents=True)
    (tmp_path / "lib" / "Test" / "Nginx.pm").write_bytes(library)
    assert uses_fixed_ports(tmp_path) is fixed
