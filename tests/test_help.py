"""`elasticdl ... --help`: every flag has a line and shows its default; the Argo and Kubernetes
flags of `train` / `predict` wait behind `--help-all` and still parse."""

from __future__ import annotations

import argparse
import copy
import re

import pytest

from elasticdl.cli import build_parser, main


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))
        else:
            yield path, parser, action


def _flags(text: str) -> set[str]:
    """The flags a help text lists (at the start of a line)."""
    return set(re.findall(r"^\s+(--\w[\w-]*)", text, re.MULTILINE))


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_every_flag_of_every_command_has_a_help_line_with_its_default():
    for path, parser, action in _walk(build_parser(), ("elasticdl",)):
        hidden = next((a for a in parser._actions if a.dest == "help_all"), None)
        text = hidden.hidden.get(action, action.help) if hidden else action.help
        name = f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}"
        assert text and text is not argparse.SUPPRESS and text.strip(), f"{name}: no help"
        default = action.default
        if default is None or default is False or default in ("", argparse.SUPPRESS):
            continue
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        shown_action = copy.copy(action)
        shown_action.help = text
        line = parser.formatter_class(parser.prog)._expand_help(shown_action).lower()
        assert "default" in line, f"{name}: default {default!r} not shown: {line!r}"
        if "(default: " in line:
            assert f"(default: {str(default).lower()})" in line, f"{name}: {line!r}"


def test_train_help_is_for_a_local_user_and_help_all_shows_the_argo_flags(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    short = _help(["train", "--help"], capsys)
    assert len(short.splitlines()) < 130  # 269 when every Argo and Kubernetes flag showed
    for core in ("--num_workers NUM_WORKERS", "--num_epochs NUM_EPOCHS", "--params PARAMS"):
        assert core in short
    assert re.search(r"--num_workers NUM_WORKERS\s+Number of workers \(default: 2\)", short)
    assert re.search(r"Passes over the training data \(default: 1\)", short)
    assert re.search(r"Records per minibatch \(default: 64, fewer on a small data set", short)
    assert "--model_def MODEL_DEF" in short and "(required)" in short
    for argo in ("--argo_server", "--worker_resource_request", "--kaniko_image", "--db_secret"):
        assert argo not in _flags(short), argo
    assert "elasticdl train --help-all" in short.splitlines()[-1]
    assert short.splitlines()[0].startswith("usage: elasticdl train --model_def MODEL_DEF")

    everything = _help(["train", "--help-all"], capsys)
    for argo in ("--argo_server", "--worker_resource_request", "--kaniko_image", "--db_secret"):
        assert argo in _flags(everything), argo
    assert len(everything.splitlines()) > len(short.splitlines()) + 80

    args = build_parser().parse_args(
        ["train", "--model_def", "m.f", "--output", "o", "--argo_server", "https://a:2746"]
    )
    assert args.argo_server == "https://a:2746"  # hidden from --help, parsed all the same


def test_predict_help_hides_the_argo_flags_too(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    short = _help(["predict", "--help"], capsys)
    assert "--trained_model" in _flags(short) and "--argo_server" not in _flags(short)
    assert "Records per minibatch (default: 256)" in " ".join(short.split())
    assert "--argo_server" in _flags(_help(["predict", "--help_all"], capsys))


def test_a_local_command_parses_without_the_argo_flags_and_their_imports(tmp_path):
    """Only the command's own parser is built, without Argo flags, unless the arguments ask
    for help or for Argo: the rest costs ~0.6 s of imports (hera) on every command. And data
    that is not there is refused before TensorFlow is imported (or any process started)."""
    import subprocess
    import sys

    local = ["train", "--model_def", "m.f", "--output", str(tmp_path), "--data", "/nonexistent"]
    code = (
        "import sys; from elasticdl.cli import main; "
        f"code = main({local!r}); "
        "heavy = {'hera', 'kubernetes', 'tensorflow'}; "
        "print(code, sorted({m.split('.')[0] for m in sys.modules} & heavy))"
    )
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True)
    assert done.stdout.split("\n")[-2] == "2 []", done.stdout + done.stderr
    assert "no data file matches '/nonexistent'" in done.stderr


def test_an_argo_flag_with_the_local_engine_is_refused_by_the_whole_parser(tmp_path, capsys):
    base = ["train", "--model_def", "m.f", "--output", str(tmp_path), "--data", "/nonexistent"]
    assert main([*base, "--wait"]) == 2
    assert capsys.readouterr().err.strip() == "elasticdl: error: --wait: only with --engine argo"
    with pytest.raises(SystemExit) as stop:
        main([*base, "--no_such_flag"])
    assert stop.value.code == 2
    assert "unrecognized arguments: --no_such_flag" in capsys.readouterr().err
