import dataclasses

import pytest

from elasticdl.runtime.sql.statements import (
    ENGINE_KEYS,
    TRAIN_KEYS,
    ModelRef,
    PredictStatement,
    SelectColumn,
    StatementError,
    TrainStatement,
    parse_statement,
    quote_identifier,
    split_identifier,
    split_with,
)

# The design document's statements, verbatim (the first line ends with a space).
SEED_TRAIN = """SELECT name, role, salary FROM employee 
TRAIN regressor.DNN
WITH hidden_units=[10, 100, 20, 5], learning_rate=0.01
INTO my_trained_model;"""  # noqa: W291
SEED_PREDICT = """SELECT name, role FROM testdata
PREDICT testdata.predicted_salary
USING my_trained_model;"""
ISSUE_TRAIN = (
    "SELECT name, role, salary FROM employee TRAIN regressor.DNN "
    "WITH hidden_units=[10, 100, 20, 5], learning_rate=0.01 INTO my_trained_model;"
)


def error(text: str) -> StatementError:
    with pytest.raises(StatementError) as info:
        parse_statement(text)
    return info.value


def assert_error(text: str, pos: int, expected: str) -> StatementError:
    """The error points at `pos`: message, line/column, and the caret under the offending line."""
    e = error(text)
    assert expected in e.message
    assert e.pos == pos, (e.pos, pos, str(e))
    line_start = text.rfind("\n", 0, pos) + 1
    assert (e.line, e.column) == (text.count("\n", 0, pos) + 1, pos - line_start + 1)
    first, shown, caret = str(e).split("\n")
    assert first == f"{e.message} (line {e.line}, column {e.column}):"
    assert shown == "  " + text[line_start:].split("\n")[0]
    assert caret.index("^") == 2 + pos - line_start and caret.strip() == "^"
    return e


def test_seed_train_statement():
    stmt = parse_statement(SEED_TRAIN)
    assert stmt == TrainStatement(
        select="SELECT name, role, salary FROM employee",
        columns=(
            SelectColumn("name", "name"),
            SelectColumn("role", "role"),
            SelectColumn("salary", "salary"),
        ),
        tables=("employee",),
        model_def="regressor.DNN",
        attributes={"hidden_units": [10, 100, 20, 5], "learning_rate": 0.01},
        label=None,
        into=ModelRef("my_trained_model", has_scheme=False),
    )
    assert parse_statement(ISSUE_TRAIN) == stmt
    assert stmt.split_with().model == {"hidden_units": [10, 100, 20, 5], "learning_rate": 0.01}
    assert stmt.split_with().job_options == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        stmt.label = "salary"


def test_seed_predict_statement():
    assert parse_statement(SEED_PREDICT) == PredictStatement(
        select="SELECT name, role FROM testdata",
        columns=(SelectColumn("name", "name"), SelectColumn("role", "role")),
        tables=("testdata",),
        result_table="testdata",
        result_column="predicted_salary",
        using=ModelRef("my_trained_model", has_scheme=False),
    )


def test_keywords_are_case_insensitive_and_to_is_accepted():
    upper = parse_statement("SELECT a, b FROM t TO TRAIN m.M WITH x=1 LABEL b INTO out")
    lower = parse_statement("select a, b from t to train m.M with x=1 label b into out")
    mixed = parse_statement("SeLeCt a, b FrOm t Train m.M With x=1 Label b Into out;")
    assert upper.select == "SELECT a, b FROM t"
    assert lower.select == "select a, b from t"
    assert (upper.model_def, upper.attributes, upper.label, upper.into.name) == (
        "m.M",
        {"x": 1},
        "b",
        "out",
    )
    assert dataclasses.replace(lower, select="") == dataclasses.replace(mixed, select="")
    assert dataclasses.replace(upper, select="") == dataclasses.replace(mixed, select="")
    predict = parse_statement("select a from db.t to predict db.t.score using M")
    assert (predict.select, predict.tables) == ("select a from db.t", ("db.t",))
    assert (predict.result_table, predict.result_column, predict.using.name) == (
        "db.t",
        "score",
        "M",
    )


def test_with_literal_types():
    stmt = parse_statement(
        "SELECT a FROM t TRAIN m WITH i=10, neg=-3, plus=+4, f=0.01, e=1e-3, big=-1.5E2, "
        "dot=.5, s1='it''s', s2=\"a, b\", nested=[[1, 2], (3, 'x')], empty=[], tup=(1, 2), "
        "one=(1,), paren=(7), unit=(), trail=[1, 2,], t=True, f2=false, T3=TRUE, n=None, "
        "n2=null, opt=tf.keras.optimizers.Adam, act=relu INTO m1"
    )
    assert stmt.attributes == {
        "i": 10,
        "neg": -3,
        "plus": 4,
        "f": 0.01,
        "e": 0.001,
        "big": -150.0,
        "dot": 0.5,
        "s1": "it's",
        "s2": "a, b",
        "nested": [[1, 2], (3, "x")],
        "empty": [],
        "tup": (1, 2),
        "one": (1,),
        "paren": 7,
        "unit": (),
        "trail": [1, 2],
        "t": True,
        "f2": False,
        "T3": True,
        "n": None,
        "n2": None,
        "opt": "tf.keras.optimizers.Adam",
        "act": "relu",
    }
    assert [type(v) for v in stmt.attributes.values()][:7] == [int, int, int] + [float] * 4


def test_dotted_keys_and_a_validation_select_string():
    stmt = parse_statement(
        "SELECT a, y FROM t TRAIN m WITH train.epoch=3, engine.num_workers=2, model.lr=0.1, "
        "train.validation.select='SELECT a, y FROM t WHERE role = ''dev''' LABEL y INTO m"
    )
    keys = stmt.split_with()
    assert (keys.model, keys.train, keys.engine) == (
        {"lr": 0.1},
        {"num_epochs": 3},
        {"num_workers": 2},
    )
    assert keys.validation == {"validation_select": "SELECT a, y FROM t WHERE role = 'dev'"}


@pytest.mark.parametrize(
    "model, expected",
    [
        ("'gs://bucket/models/m1'", ModelRef("gs://bucket/models/m1", True)),
        ('"file:///tmp/models/m1"', ModelRef("file:///tmp/models/m1", True)),
        ("'memory://m'", ModelRef("memory://m", True)),
        ("'team/m1'", ModelRef("team/m1", False)),
        ("'C:/models'", ModelRef("C:/models", False)),
        ("team.m1", ModelRef("team.m1", False)),
    ],
)
def test_model_names_and_urls(model, expected):
    assert parse_statement(f"SELECT a FROM t TRAIN m INTO {model}").into == expected
    assert parse_statement(f"SELECT a FROM t PREDICT t.p USING {model};").using == expected
    assert str(expected) == expected.name


def test_keywords_in_strings_comments_and_parentheses_are_not_clauses():
    text = (
        "SELECT 'TRAIN' AS x, (SELECT 1) AS one, \"predict\", `train` -- TRAIN in a comment\n"
        "FROM t /* PREDICT x.y USING z */ WHERE a IN (SELECT train FROM u) "
        "TRAIN m INTO out"
    )
    stmt = parse_statement(text, "mysql")  # backquoted names are MySQL's
    assert stmt.select == text[: text.index(" TRAIN m")]
    assert [c.name for c in stmt.columns] == ["x", "one", None, "train"]  # "predict": a string
    assert stmt.columns[1].text == "(SELECT 1) AS one"
    assert stmt.tables == ("t",)
    assert (stmt.model_def, stmt.into.name) == ("m", "out")


def test_selected_columns_and_tables():
    stmt = parse_statement(
        'SELECT DISTINCT t.a, b AS bee, c cee, COUNT(*), a + 1, *, t.*, "My Col", CAST(x AS int) '
        'FROM db.t AS x JOIN u ON x.id = u.id LEFT OUTER JOIN "V w" v USING (id), w '
        "WHERE a > 1 ORDER BY b PREDICT out.p USING m"
    )
    assert [c.name for c in stmt.columns] == [
        "a",
        "bee",
        "cee",
        None,
        None,
        None,
        None,
        "My Col",
        None,
    ]
    assert stmt.columns[4] == SelectColumn("a + 1", None)
    assert stmt.star
    assert stmt.tables == ("db.t", "u", '"V w"', "w")
    sub = "SELECT a FROM (SELECT a FROM t) s TRAIN m INTO x"
    assert parse_statement(sub).tables is None
    union = "SELECT a FROM t UNION SELECT a FROM u TRAIN m INTO x"
    assert parse_statement(union).tables is None
    assert parse_statement("SELECT 1 AS a TRAIN m INTO x").tables == ()


def test_label_clause():
    assert parse_statement("SELECT a, y FROM t TRAIN m LABEL y INTO x").label == "y"
    assert parse_statement('SELECT a, "Y" FROM t TRAIN m LABEL "Y" INTO x').label == '"Y"'
    assert parse_statement("SELECT a, y FROM t TRAIN m WITH k=1 INTO x").label is None


def test_errors_point_at_the_position():
    t = "SELECT a FROM t TRAIN m"
    assert_error(t, len(t), "expected WITH, COLUMN, LABEL or INTO <model> after the TRAIN clause")
    t = "SELECT a FROM t TRAIN m WITH x=1 INT0 out"
    assert_error(t, t.index("INT0"), "expected ',', COLUMN, LABEL or INTO <model> after the WITH")
    t = "SELECT a FROM t TRAIN m WITH x=1 LABEL a out"
    assert_error(t, t.index("out"), "expected USING or INTO <model> after the LABEL clause, got")
    t = "SELECT a FROM t TRAIN m WITH a=1; INTO m"
    assert_error(t, t.index(";"), "expected ',', COLUMN, LABEL or INTO <model>")
    t = "SELECT a FROM t TRAIN m INTO x y"
    assert_error(t, t.index("y"), "unexpected 'y' here: expected the end")
    t = "SELECT a FROM t TRAIN m INTO ;"
    assert_error(t, t.index(";"), "expected a model name or a quoted URL after INTO")
    t = "SELECT a FROM t TRAIN WITH a=1 INTO m"
    assert_error(t, t.index("WITH"), "expected a model definition after TRAIN")
    t = "SELECT a FROM t TRAIN 'regressor.DNN' INTO m"
    assert_error(t, t.index("'"), "expected a model definition after TRAIN")
    t = "SELECT a FROM t TRAIN m WITH a 1 INTO m"
    assert_error(t, t.index("1"), "expected '=' after the WITH key 'a'")
    t = "SELECT a FROM t TRAIN m WITH INTO m"
    assert_error(t, t.index("INTO"), "expected a WITH key (name=value)")
    t = "SELECT a FROM t TRAIN m WITH a=) INTO m"
    assert_error(t, t.index(")"), "expected a value")
    t = "SELECT a FROM t TRAIN m WITH a=-x INTO m"
    assert_error(t, t.index("-"), "expected a value")
    t = "SELECT a FROM t TRAIN m WITH a=1.2.3 INTO m"
    assert_error(t, t.index("1.2"), "invalid number '1.2.3'")
    t = "SELECT a FROM t TRAIN m WITH a=(1 2) INTO m"
    assert_error(t, t.index("2)"), "expected ',' or ')' in the tuple, got '2'")
    t = "SELECT a FROM t TRAIN m LABEL INTO x"
    assert_error(t, t.index("INTO"), "expected a column name after LABEL")
    t = "SELECT a FROM t PREDICT t USING m"
    assert_error(t, t.index("USING"), "expected '.' and a column: PREDICT <table>.<column>")
    t = "SELECT a FROM t PREDICT t.c INTO m"
    assert_error(t, t.index("INTO"), "expected USING <model> after PREDICT t.c, got 'INTO'")
    t = "SELECT a FROM t PREDICT t.c USING"
    assert_error(t, len(t), "expected a model name or a quoted URL after USING, got the end")


def test_select_part_errors():
    t = "SELECT a FROM t"
    e = assert_error(t, len(t), "expected a TO TRAIN, TO PREDICT or TO EVALUATE clause")
    assert "SELECT ... TO TRAIN <model> [WITH k=v, ...] [COLUMN ...] [LABEL col] INTO" in e.message
    assert "SELECT ... TO PREDICT <table>.<column> USING <model>" in e.message
    assert "SELECT ... TO EVALUATE <model> [WITH ...] LABEL col INTO <table>" in e.message
    t = "SELECT a FROM t;"
    assert_error(t, t.index(";"), "unexpected ';', expected a TO TRAIN, TO PREDICT or TO")
    t = "SELECT a FROM t; DROP TABLE t; SELECT a FROM t TRAIN m INTO x"
    assert_error(t, t.index(";"), "unexpected ';': one statement at a time")
    assert_error("TRAIN m INTO x", 0, "expected SELECT at the start of the statement")
    assert_error("  -- nothing\n", len("  -- nothing"), "expected a TO TRAIN")
    t = "DELETE FROM t TO TRAIN m INTO x"
    assert_error(t, 0, "expected SELECT at the start of the statement, got DELETE")
    t = "SELECT a) FROM t TRAIN m INTO x"
    assert_error(t, t.index(")"), "the SELECT does not parse")
    t = "SELECT (a FROM t TRAIN m INTO x"
    assert_error(t, t.index("("), "'(' is never closed")
    t = "SELECT 'abc FROM t TRAIN m INTO x"
    assert_error(t, t.index("'"), "unterminated string starting here")
    t = "SELECT a /* FROM t TRAIN m INTO x"
    assert_error(t, t.index("/*"), "unterminated /* comment")
    t = "SELECT train FROM t TRAIN m INTO x"  # a column named train, unquoted: SQL allows it
    assert parse_statement(t).columns == (SelectColumn("train", "train"),)


def test_multi_line_errors_show_the_offending_line():
    t = "SELECT a, y\nFROM t\nTRAIN m\nWITH hidden=[1, 2\nINTO x"
    e = assert_error(t, t.index("INTO"), "expected ',' or ']' in the list, got 'INTO'")
    assert (e.line, e.column) == (5, 1)
    assert str(e).splitlines()[1:] == ["  INTO x", "  ^"]
    t = "SELECT a\n\tFROM t\n\tTRAIN m\n\tWITH k=1\n\tINTO"
    e = assert_error(t, len(t), "expected a model name")
    assert (e.line, e.column) == (5, 6)
    assert str(e).splitlines()[2] == "  \t    ^"  # a tab under the tab keeps the caret aligned


def test_duplicate_and_unknown_with_keys():
    t = "SELECT a FROM t TRAIN m WITH lr=1, b=2, lr=3 INTO x"
    assert_error(t, t.rindex("lr"), "duplicate WITH key 'lr'")
    t = "SELECT a FROM t TRAIN m WITH train.epoch=1, train.epochs=2 INTO x"
    assert_error(
        t, t.index("train.epochs"), "WITH train.epoch and train.epochs both set num_epochs"
    )
    t = "SELECT a FROM t TRAIN m WITH lr=1, model.lr=2 INTO x"
    assert_error(t, t.index("model.lr"), "WITH lr and model.lr both set lr")
    t = "SELECT a FROM t TRAIN m WITH k=1, train.epoc=3 INTO x"
    e = assert_error(t, t.index("train.epoc"), "unknown WITH key 'train.epoc': did you mean")
    assert "did you mean 'train.epoch'?" in e.message
    assert "valid train.* keys: train.epoch, train.epochs" in e.message
    t = "SELECT a FROM t TRAIN m WITH engine.num_worker=3 INTO x"
    e = assert_error(t, t.index("engine"), "did you mean 'engine.num_workers'?")
    assert all(f"engine.{k}" in e.message for k in ENGINE_KEYS)
    t = "SELECT a FROM t TRAIN m WITH foo.bar=3 INTO x"
    assert_error(t, t.index("foo"), "unknown WITH key 'foo.bar': a key is a model argument")


def test_with_option_values_are_checked():
    cases = [
        ("train.epoch=1.5", "must be an integer, got 1.5"),
        ("train.batch_size='64'", "must be an integer, got '64'"),
        ("engine.num_workers=True", "must be an integer, got True"),
        ("engine.task_timeout_floor='5'", "must be a number, got '5'"),
        ("train.shuffle=1", "must be True or False, got 1"),
        ("engine.engine=k8s", "must be one of local, argo, got 'k8s'"),
        ("train.validation.select='DELETE FROM t'", "must be a quoted SELECT statement"),
        ("train.validation.select='SELECT 1; DROP TABLE t'", "must be a quoted SELECT"),
        ("train.validation.select=3", "must be a quoted SELECT statement"),
    ]
    for attr, expected in cases:
        t = f"SELECT a FROM t TRAIN m WITH {attr} INTO x"
        assert_error(t, t.index("=") + 1, f"WITH {attr.split('=')[0]}: {expected}")
    ok = "SELECT a FROM t TRAIN m WITH engine.task_timeout_floor=2.5, engine.engine=argo INTO x"
    assert parse_statement(ok).split_with().engine == {"task_timeout_floor": 2.5, "engine": "argo"}


@pytest.mark.parametrize(
    "text, at, expected",
    [
        ("SELECT a FROM t PREDICT t.c; DROP TABLE t USING m", ";", "expected USING"),
        ('SELECT a FROM t PREDICT "t"";DROP TABLE x;--".c USING m', '"t"', "a quoted name must"),
        ("SELECT a FROM t PREDICT t--.c USING m", "--", "expected '.' and a column"),
        ("SELECT a FROM t PREDICT t.`c`` x` USING m", "`c", "a quoted name must not"),
        ("SELECT a FROM t PREDICT 't'.c USING m", "'t'", "expected <table>.<column>"),
        ("SELECT a FROM t TRAIN m INTO x; DROP TABLE y", "DROP", "after ';'"),
        ("SELECT a FROM t TRAIN m INTO x/**/y", "y", "unexpected 'y'"),
        ("SELECT a FROM t TRAIN m INTO ../x", "..", "expected a model name"),
        ("SELECT a FROM t TRAIN m LABEL a-b INTO x", "-b", "expected USING or INTO <model>"),
        ("SELECT a FROM t TRAIN m LABEL 'y' INTO x", "'y'", "expected a column name after LABEL"),
        ('SELECT a FROM t TRAIN m LABEL "y\nz" INTO x', '"y', "a quoted name must not"),
        ("SELECT a FROM t TRAIN m;x INTO y", ";", "expected WITH, COLUMN, LABEL or INTO"),
        ("SELECT a FROM t TRAIN m.x;y INTO z", ";", "expected WITH, COLUMN, LABEL or INTO"),
    ],
)
def test_injection_in_identifiers_is_rejected(text, at, expected):
    pos = text.index(at)
    if at == "--":  # the comment swallows the rest: the error is right after `t`
        pos = text.index("t--") + 1
    assert_error(text, pos, expected)


def test_quote_identifier_for_each_dialect():
    assert quote_identifier("employee", "sqlite") == '"employee"'
    assert quote_identifier("db.employee", "postgresql") == '"db"."employee"'
    assert quote_identifier("db.employee", "postgresql+psycopg") == '"db"."employee"'
    assert quote_identifier("employee", "mysql") == "`employee`"
    assert quote_identifier('db."My Table"', "mariadb") == "`db`.`My Table`"
    assert quote_identifier("`My Col`", "PostgreSQL") == '"My Col"'
    assert split_identifier('db."My Table"') == ("db", "My Table")
    with pytest.raises(ValueError, match="unknown SQL dialect 'oracle'"):
        quote_identifier("t", "oracle")


@pytest.mark.parametrize(
    "name",
    ["x; DROP TABLE y", "t--", "t /* c */", 'a"b', "a'b", "'a'", "", "a.", ".a", " a", "a b"]
    + ['"a""b"', '"a\nb"', '"a\x00b"', '""', "`a`b`", "1a", "a-b", "a.*", "a..b", '"unclosed'],
)
def test_quote_identifier_rejects_bad_names(name):
    for dialect in ("sqlite", "postgresql", "mysql", "mariadb"):
        with pytest.raises(StatementError):
            quote_identifier(name, dialect)


def test_split_with_maps_keys_to_options():
    keys = split_with(
        {
            "hidden_units": [10, 5],
            "model.learning_rate": 0.01,
            "train.epochs": 3,
            "train.batch_size": 32,
            "train.records_per_task": 100,
            "train.evaluation_steps": 10,
            "train.checkpoint_steps": 5,
            "train.shuffle": False,
            "train.seed": 7,
            "train.use_async": False,
            "train.grads_to_wait": 2,
            "engine.num_workers": 2,
            "engine.num_ps": 1,
            "engine.max_worker_relaunches": 4,
            "engine.intra_op_threads": 1,
        }
    )
    assert keys.model == {"hidden_units": [10, 5], "learning_rate": 0.01}
    assert keys.train == {
        "num_epochs": 3,
        "minibatch_size": 32,
        "records_per_task": 100,
        "evaluation_steps": 10,
        "checkpoint_steps": 5,
        "shuffle": False,
        "seed": 7,
        "use_async": False,
        "grads_to_wait": 2,
    }
    assert keys.engine == {
        "num_workers": 2,
        "num_ps": 1,
        "max_worker_relaunches": 4,
        "intra_op_threads": 1,
    }
    assert TRAIN_KEYS["epoch"] == TRAIN_KEYS["epochs"] == "num_epochs"
    assert TRAIN_KEYS["minibatch_size"] == TRAIN_KEYS["batch_size"] == "minibatch_size"
    assert TRAIN_KEYS["validation.select"] == "validation_select"
    assert set(ENGINE_KEYS) == {
        "num_workers",
        "num_ps",
        "max_worker_relaunches",
        "task_timeout_floor",
        "intra_op_threads",
        "engine",
    }


def test_split_with_errors_and_suggestions():
    with pytest.raises(StatementError, match=r"did you mean 'train\.minibatch_size'\?") as info:
        split_with({"train.minibatch": 3})
    assert "valid train.* keys: " in str(info.value) and info.value.pos is None
    with pytest.raises(StatementError) as info:
        split_with({"train.zzzz": 3})
    assert "did you mean" not in str(info.value)
    assert ", ".join(f"train.{k}" for k in TRAIN_KEYS) in str(info.value)
    with pytest.raises(StatementError, match="did you mean 'engine.num_ps'"):
        split_with({"engine.num_pss": 1})
    with pytest.raises(StatementError, match="unknown WITH key 'model.a.b'"):
        split_with({"model.a.b": 1})
    with pytest.raises(StatementError, match="WITH train.batch_size and train.minibatch_size both"):
        split_with({"train.batch_size": 1, "train.minibatch_size": 2})
    with pytest.raises(StatementError, match="WITH engine.engine: must be one of local, argo"):
        split_with({"engine.engine": "k8s"})


def test_select_with_columns_appends_before_from():
    from elasticdl.runtime.sql.statements import select_with_columns

    add = ['"id" AS "__c0"']
    assert (
        select_with_columns("SELECT name, (SELECT 1 FROM x) AS y FROM t WHERE a = 'FROM'", add)
        == 'SELECT name, (SELECT 1 FROM x) AS y, "id" AS "__c0" FROM t WHERE a = \'FROM\''
    )
    assert select_with_columns("SELECT * FROM t", add) == 'SELECT *, "id" AS "__c0" FROM t'
    for select, word in [
        ("SELECT DISTINCT name FROM t", "DISTINCT"),
        ("SELECT role, COUNT(*) FROM t GROUP BY role", "GROUP"),
        ("SELECT a FROM t UNION SELECT a FROM u", "UNION"),
    ]:
        with pytest.raises(StatementError, match=f"with {word}"):
            select_with_columns(select, add)
    with pytest.raises(StatementError, match="no FROM"):
        select_with_columns("SELECT 1", add)


def test_on_null_is_a_train_with_key():
    stmt = parse_statement(
        "SELECT a, b FROM t TRAIN regressor.DNN WITH train.on_null='fill:0' INTO m"
    )
    assert stmt.split_with().train == {"on_null": "fill:0"}
    with pytest.raises(StatementError, match="expected error, skip or fill:VALUE"):
        parse_statement("SELECT a, b FROM t TRAIN regressor.DNN WITH train.on_null=drop INTO m")
