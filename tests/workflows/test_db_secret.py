"""--db_secret: the database password reaches the steps that connect from a Kubernetes Secret
(secretKeyRef), and no rendered YAML ever holds a password (issue 13, section 4)."""

from __future__ import annotations

import pytest
import yaml

from elasticdl.runtime.job_options import split_db_secret
from elasticdl.runtime.sql.credentials import PASSWORD_ENV, database_url, has_password
from elasticdl.workflows.render import render_objects, to_yaml

SQL_TRAIN = {
    "model_def": "regressor.DNN",
    "sql": "SELECT a, b FROM t",
    "label": "b",
    "work_dir": "gs://b/w",
    "output": "gs://b/m",
    "image": "reg.io/job:1",
}
SQL_PREDICT = {
    "sql": "SELECT a FROM t",
    "work_dir": "gs://b/w",
    "trained_model": "gs://b/m",
    "output_table": "t2",
}
CONNECTING = {
    "train": {"sql-to-recordio", "sql-to-recordio-validation"},
    "predict": {"sql-to-recordio", "write-back"},
}


def _templates(doc: dict) -> dict[str, dict]:
    spec = doc["spec"].get("workflowSpec", doc["spec"])
    return {t["name"]: t for t in spec["templates"]}


@pytest.mark.parametrize("kind", ["workflow", "template", "cron"])
@pytest.mark.parametrize("job", ["train", "predict"])
def test_a_password_in_db_is_refused_on_every_kind(job, kind):
    values = {**(SQL_TRAIN if job == "train" else SQL_PREDICT)}
    values["db"] = "postgresql+psycopg://alice:s3cret@host/db"
    schedule = None
    if kind == "cron":
        from elasticdl.workflows.argo import Schedule

        schedule = Schedule(("0 3 * * *",))
    with pytest.raises(ValueError) as err:
        render_objects(job, values, kind=kind, schedule=schedule)
    message = str(err.value)
    assert "--db_secret NAME:KEY" in message and "s3cret" not in message and "\n" not in message


@pytest.mark.parametrize("job", ["train", "predict"])
def test_the_connecting_steps_get_the_secret_key_as_an_environment_variable(job):
    values = {**(SQL_TRAIN if job == "train" else SQL_PREDICT)}
    values.update(db="postgresql+psycopg://alice@host/db", db_secret="hr-db:pass.word")
    (doc,) = render_objects(job, values, kind="workflow")
    params = {p["name"]: p.get("value") for p in doc["spec"]["arguments"]["parameters"]}
    assert params["db_secret"] == "hr-db:pass.word"
    for name, template in _templates(doc).items():
        container = template.get("container")
        if container is None:
            continue
        env = {e["name"]: e for e in container.get("env", [])}
        if name in CONNECTING[job]:
            ref = env[PASSWORD_ENV]["valueFrom"]["secretKeyRef"]
            assert "sprig.splitList(':', workflow.parameters.db_secret)[0]" in ref["name"]
            assert "sprig.splitList(':', workflow.parameters.db_secret)[1]" in ref["key"]
            assert ref["optional"] is True
            assert "--db_secret={{workflow.parameters.db_secret}}" in container["args"]
        else:
            assert PASSWORD_ENV not in env, name
    assert "alice@" in to_yaml([doc])


@pytest.mark.parametrize(
    "text, problem",
    [
        ("hr-db:password", None),
        ("a.b-c:x_y.z-1", None),
        ("hr-db", "give NAME:KEY"),
        ("HR:password", "is not a Secret name"),
        ("-hr:password", "is not a Secret name"),
        ("hr:", "is not a Secret key"),
        ("hr:pass/word", "is not a Secret key"),
        ("hr:..", "is not a Secret key"),
        ("{{workflow.name}}:k", "is not a Secret name|contains .{{"),
        ("x" * 254 + ":k", "is not a Secret name"),
    ],
)
def test_db_secret_names_a_secret_and_a_key(text, problem):
    if problem is None:
        assert split_db_secret(text) == tuple(text.split(":"))
        return
    with pytest.raises(ValueError, match=problem):
        split_db_secret(text)
    with pytest.raises(ValueError, match=problem):
        render_objects("train", {**SQL_TRAIN, "db": "sqlite:///x.db", "db_secret": text})


def test_db_secret_needs_sql_input():
    values = {**SQL_TRAIN, "sql": "", "label": "", "data": "gs://b/d", "db_secret": "a:b"}
    with pytest.raises(ValueError, match="--db_secret applies to --sql"):
        render_objects("train", values)


@pytest.mark.parametrize(
    "url, secret, environ, expected",
    [
        ("sqlite:///x.db", "", {PASSWORD_ENV: "p"}, "sqlite:///x.db"),
        ("postgresql://u@h/d", "s:k", {PASSWORD_ENV: "p@ss:w"}, "postgresql://u:p%40ss%3Aw@h/d"),
        ("mysql+pymysql://u@h:3306/d", "s:k", {PASSWORD_ENV: "x"}, "mysql+pymysql://u:x@h:3306/d"),
        ("postgresql://u@h/d", "s:k", {}, "kubectl create secret generic s --from-literal=k="),
        ("postgresql://u:p@h/d", "s:k", {PASSWORD_ENV: "x"}, "either in --db or with"),
    ],
)
def test_the_step_builds_its_url_at_run_time(url, secret, environ, expected):
    if expected.startswith(("sqlite", "postgresql", "mysql")):
        assert database_url(url, secret, environ) == expected
        return
    with pytest.raises(ValueError, match=expected):
        database_url(url, secret, environ)


def test_has_password():
    assert has_password("postgresql://u:p@h/d") and not has_password("postgresql://u@h/d")
    assert not has_password("sqlite:///x.db") and has_password("weird://u:p@h")


def test_sql_to_recordio_step_reads_the_secret_from_its_environment(tmp_path, monkeypatch, capsys):
    from elasticdl.steps import sql_to_recordio

    argv = ["--db=postgresql+psycopg://alice@127.0.0.1:1/db", "--sql=SELECT 1"]
    argv += [f"--output={tmp_path / 'out'}", "--db_secret=hr-db:password"]
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    assert sql_to_recordio.main(argv) == 2
    err = capsys.readouterr().err
    assert f"${PASSWORD_ENV} is empty" in err and err.count("\n") == 1


def test_rendered_yaml_lints_with_the_secret():
    from elasticdl.workflows.lint import lint_documents

    values = {**SQL_PREDICT, "db": "postgresql://u@h/d", "db_secret": "hr-db:password"}
    docs = render_objects("predict", values, kind="template")
    assert lint_documents(docs, source="t") == []
    assert yaml.safe_load(to_yaml(docs))["kind"] == "WorkflowTemplate"


def test_the_local_engine_refuses_db_secret(tmp_path):
    import elasticdl

    with pytest.raises(ValueError, match="--db_secret names a Kubernetes Secret, for --engine"):
        elasticdl.train(
            model_def="regressor.DNN",
            sql="SELECT a, b FROM t",
            db=f"sqlite:///{tmp_path / 'x.db'}",
            db_secret="hr-db:password",
            output=str(tmp_path / "m"),
        )
    assert not (tmp_path / "x.db").exists()
