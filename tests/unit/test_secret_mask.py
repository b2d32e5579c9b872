"""secret_mask's names: backup and editor variants of every known secret name, the word
globs (``*credentials*``, ``*deploy*key*``), the per-tool token files and folders of a home,
and what stays readable (perfscout's own tree, ordinary project files, installed packages'
code). Real files, the real walk (:func:`vet_tree`)."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from perfscout.tools import secret_mask
from perfscout.tools.secret_mask import SECRET_FILES, is_secret_dir, is_secret_file, name_stems, vet_tree

#: The exact names among SECRET_FILES (no wildcard): each must stay a secret under every variant.
_EXACT = [g for g in SECRET_FILES if not any(c in g for c in "*?[")]
_VARIANTS = ["{}.bak", "{}~", "{}.old", "{}.orig", "{}.save", "{}.swp", "{}.dpkg-old", "{}.~1~", "{} (1)",
             "{}-copy", "{}.1", "{}_bak2", "{}.bak.old", "{}.20231201", ".{}.swp", "#{}#", "{}.rpmsave"]


@pytest.mark.parametrize("variant", _VARIANTS)
def test_every_known_secret_name_under_every_backup_variant(variant: str) -> None:
    for name in [*_EXACT, "id_rsa", "server.pem", "kubeconfig", "terraform.tfstate", "x.token", "github_rsa"]:
        assert is_secret_file(variant.format(name)), variant.format(name)


def test_the_names_round_4_found_readable() -> None:
    for name in [".git-credentials.bak", "deploy_key", "credentials.csv", "deploy_key.pub", "github-deploy-key.pem",
                 "DeployKey", "aws_credentials", "credentials", "credentials.txt", "credentials (1).csv",
                 "my_private_key.txt", "ssh_host_ed25519_key", "client_secret_123.apps.googleusercontent.com.json"]:
        assert is_secret_file(name), name


def test_backup_copies_of_secret_folders() -> None:
    for name in [".ssh.bak", ".aws.old", ".gnupg~", "secrets_old", ".git.orig"]:
        assert is_secret_dir(name, name), name
    assert is_secret_dir("gh.bak", "/home/u/.config/gh.bak")


def test_ordinary_project_files_stay_readable() -> None:
    for name in ["settings.py", "tokenizer.py", "secrets.py", "secret_mask.py", "keys.py", "key_figures.csv",
                 "deploy.sh", "backup.sh", "old.txt", "main.c.orig", "bench.py.bak", "data_0001.f32", "hub.py",
                 "config.yml", "README.md", "monkey.py", "threshold.bold", "results (1).csv", "notes.txt~"]:
        assert not is_secret_file(name, f"/home/u/proj/{name}"), name
    assert not is_secret_file("hub", "/home/u/proj/src/hub")  # a file named hub, not hub's token file


def test_credentials_py_is_masked_in_a_project_but_not_as_an_installed_packages_code() -> None:
    """The choice (see SECRET_FILES): a project's credentials.py is masked; botocore's or
    google-auth's, under site-packages, is published code and stays importable; a data file
    of that name there is still masked."""
    assert is_secret_file("credentials.py", "/home/u/site/app/credentials.py")
    assert is_secret_file("credentials.py")
    for code in ["/opt/lib/python3.11/site-packages/botocore/credentials.py",
                 "/usr/lib/python3/dist-packages/google/auth/credentials.py",
                 "/opt/lib/python3.11/site-packages/oauthlib/oauth2/rfc6749/grant_types/client_credentials.pyc"]:
        assert not is_secret_file(Path(code).name, code), code
    assert is_secret_file("credentials.json", "/opt/lib/python3.11/site-packages/pkg/credentials.json")
    assert is_secret_file(".netrc", "/opt/lib/python3.11/site-packages/pkg/.netrc")


_TOOL_FILES = [".config/hub", ".config/gh/hosts.yml", ".config/glab-cli/config.yml", ".config/doctl/config.yaml",
               ".config/heroku/config.json", ".config/gcloud/configurations/config_default", ".azure/msal_token_cache.json",
               ".cargo/credentials.toml", ".cargo/credentials", ".pypirc", ".npmrc", ".docker/config.json",
               ".m2/settings.xml", ".gradle/gradle.properties", ".cache/huggingface/token", ".kaggle/kaggle.json",
               ".config/containers/auth.json", ".config/git/credentials", ".netrc", ".bundle/config",
               ".config/configstore/firebase-tools.json", ".fly/config.yml", ".databrickscfg"]


def test_per_tool_token_files_of_a_home_are_masked_by_the_walk(tmp_path: Path) -> None:
    home = tmp_path / "home" / "u"
    for rel in _TOOL_FILES:  # an opaque token: only the name or the path gives it away
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text("token = 5f0c1d2e3a4b\n")
    (home / "proj").mkdir()
    (home / "proj" / "bench.py").write_text("print(1)\n")
    (home / ".cargo" / "bin").mkdir(parents=True)
    (home / ".cargo" / "bin" / "tool").write_text("#!/bin/sh\n")
    v = vet_tree(home)
    masked = {*v.files, *v.dirs}
    for rel in _TOOL_FILES:
        p = home / rel
        assert p in masked or any(p.is_relative_to(d) for d in v.dirs), rel
    assert home / "proj" / "bench.py" not in masked and home / ".cargo" / "bin" / "tool" not in masked
    # rooted lower down, or at the file itself: the same verdict as from the home
    assert home / ".config" / "hub" in vet_tree(home / ".config").files
    assert home / ".config" / "gh" in vet_tree(home / ".config").dirs
    assert vet_tree(home / ".config" / "hub").files == [home / ".config" / "hub"]
    assert vet_tree(home / ".kaggle" / "kaggle.json").files == [home / ".kaggle" / "kaggle.json"]
    assert vet_tree(home / ".config" / "gh").dirs == [home / ".config" / "gh"]


def test_a_django_project_walk(tmp_path: Path) -> None:
    proj = tmp_path / "site"
    files = {"manage.py": "", "app/settings.py": "DEBUG = True\n", "app/credentials.py": "DB_PASSWORD = 'hunter2'\n",
             "app/models.py": "", "app/credentials_test.csv": "a,b\n", "deploy/deploy_key": "opaque\n",
             "deploy/deploy.sh": "echo\n", "app/tokenizer.py": "", ".env.local.bak": "X=1\n"}
    for rel, body in files.items():
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(body)
    v = vet_tree(proj)
    assert {p.relative_to(proj).as_posix() for p in v.files} == {
        "app/credentials.py", "app/credentials_test.csv", "deploy/deploy_key", ".env.local.bak"}, v.files


def test_perfscouts_own_tree_masks_nothing_by_name() -> None:
    import perfscout

    v = vet_tree(Path(perfscout.__file__).parent)
    assert not v.too_large and not v.files and not v.dirs, (v.files, v.dirs)


def test_the_shape_sorted_globs_match_as_fnmatch_does() -> None:
    names = [*_EXACT, "a.env", ".env.prod", "x_credentials.md", "deploykey", "keydeploy", "private.key", "privatekey",
             ".zsh_history", "_history", "client_secret.json", "client_secret.yaml", "service-account-x.json",
             "ssh_host_rsa_key.pub", "id_rsa.pub", "krb5cc_1000", "a.keytab", "bench.py", "x.pem", "x.pemx"]
    for n in names:
        want = any(fnmatch.fnmatchcase(n.lower(), g.lower()) for g in SECRET_FILES) or \
            n.lower().endswith(secret_mask.SECRET_SUFFIXES)
        assert bool(secret_mask._SECRET_NAMES.match(n.lower())) == want, n


def test_ordinary_names_never_run_the_backup_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk's cost: the backup-tail pattern (tried at every position of a name) runs only
    on names that end like a backup; ``bench.py`` or ``data.f32`` cost an ``endswith``."""
    calls: list[str] = []
    real = secret_mask.BACKUP_TAIL

    class Counting:
        def sub(self, repl: str, s: str) -> str:
            calls.append(s)
            return real.sub(repl, s)

    monkeypatch.setattr(secret_mask, "BACKUP_TAIL", Counting())
    for n in ["bench.py", "data.f32", "results_2023.csv", "main.c", "README.md", "x.h5", "model.onnx"]:
        assert name_stems(n) == (n.lower(),)
    assert calls == []
    assert name_stems(".netrc.bak") == (".netrc.bak", ".netrc", "netrc") and calls == [".netrc.bak"]
