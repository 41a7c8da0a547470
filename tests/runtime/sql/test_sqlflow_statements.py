"""SQLFlow's statement language, as its tutorials and end-to-end tests write it, parsed.

The statements below follow the shapes of SQLFlow's doc/tutorial/iris-dnn.md, doc/run/cli.md,
doc/language_guide.md and its e2e cases (sql-machine-learning/sqlflow), on tables named as
there (`iris.train`, `housing.train`): schema-qualified, one of them called `train`.
"""

import pytest

from elasticdl.runtime.column_spec import (
    Bucket,
    CategoryHash,
    CategoryId,
    ColumnGroup,
    DataColumn,
    Embedding,
    Field,
    Indicator,
    Numeric,
    ResolvedFeatures,
    parse_groups,
    resolve,
    to_text,
)
from elasticdl.runtime.sql.statements import (
    EvaluateStatement,
    ModelRef,
    PredictStatement,
    StatementError,
    TrainStatement,
    parse_statement,
)

IRIS = ("sepal_length", "sepal_width", "petal_length", "petal_width")
DIALECTS = [None, "sqlite", "postgresql+psycopg", "mysql+pymysql", "mariadb"]

TUTORIAL_TRAIN = """SELECT * FROM iris.train TO TRAIN DNNClassifier WITH
  model.n_classes = 3,
  model.hidden_units = [10, 10],
  train.epoch = 10
COLUMN sepal_length, sepal_width, petal_length, petal_width
LABEL class
INTO sqlflow_models.my_dnn_model;"""

TUNED_TRAIN = TUTORIAL_TRAIN.replace(
    "train.epoch = 10", "optimizer.learning_rate=0.1,\n  train.epoch = 10"
)

CLI_TRAIN = """SELECT * FROM iris.train
TO TRAIN DNNClassifier
WITH model.n_classes=3, model.hidden_units=[128,64],
    validation.select="SELECT * FROM iris.test"
LABEL class
INTO sqlflow_models.my_dnn_model;"""

BINARY_TRAIN = """SELECT * FROM iris.train WHERE class<>2
TO TRAIN DNNClassifier
WITH
\tmodel.n_classes = 2,
\tmodel.hidden_units = [10, 10],
\ttrain.batch_size = 4,
\tvalidation.select = "SELECT * FROM iris.test WHERE class<>2",
\tvalidation.metrics = "Accuracy,AUC",
\tmodel.optimizer=RMSprop, optimizer.learning_rate=0.1
LABEL class
INTO sqlflow_models.mytest_model;"""

REGRESSION_TRAIN = """SELECT * FROM housing.train
TO TRAIN DNNRegressor
WITH
\tmodel.hidden_units = [10, 10],
\ttrain.batch_size = 4,
\tvalidation.select = "SELECT * FROM housing.test",
\tvalidation.metrics = "MeanAbsoluteError,MeanAbsolutePercentageError,MeanSquaredError"
LABEL target
INTO sqlflow_models.myreg_model;"""

WIDE_AND_DEEP_TRAIN = """SELECT * FROM iris.train
TO TRAIN DNNLinearCombinedClassifier
WITH model.n_classes = 3, model.dnn_hidden_units = [10, 20], train.batch_size = 10,
train.epoch = 2, model.dnn_optimizer=RMSprop, dnn_optimizer.learning_rate=0.01
COLUMN sepal_length, sepal_width FOR linear_feature_columns
COLUMN petal_length, petal_width FOR dnn_feature_columns
LABEL class
INTO sqlflow_models.my_dnn_linear_model;"""

ZOO_TRAIN = """SELECT * FROM iris.train
TO TRAIN sqlflow_models.DNNClassifier
WITH model.n_classes = 3, model.hidden_units = [10, 20],
\t validation.select="select * from iris.test", validation.steps=2,
\t train.batch_size = 10, train.epoch=2
COLUMN sepal_length, sepal_width, petal_length, petal_width
LABEL class
INTO sqlflow_models.my_dnn_model;"""

PREDICT = """SELECT * FROM iris.test
TO PREDICT iris.predict.class
USING sqlflow_models.my_dnn_model;"""

EVALUATE = """SELECT * FROM housing.train
TO EVALUATE sqlflow_models.my_regression_model
WITH validation.metrics="mean_absolute_error,mean_squared_error"
LABEL target
INTO sqlflow_models.my_regression_model_eval_result;"""


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_tutorial_statement_on_iris_train(dialect):
    stmt = parse_statement(TUTORIAL_TRAIN, dialect)
    assert isinstance(stmt, TrainStatement)
    assert (stmt.select, stmt.tables, stmt.star) == (
        "SELECT * FROM iris.train",
        ("iris.train",),
        True,
    )
    assert stmt.model_def == "DNNClassifier"
    assert stmt.feature_columns == (ColumnGroup(tuple(Field(n) for n in IRIS)),)
    assert (stmt.label, stmt.into) == ("class", ModelRef("sqlflow_models.my_dnn_model", False))
    keys = stmt.split_with()
    assert keys.model == {"n_classes": 3, "hidden_units": [10, 10]}
    assert keys.train == {"num_epochs": 10}
    tuned = parse_statement(TUNED_TRAIN, dialect).split_with()
    assert tuned.model == {"n_classes": 3, "hidden_units": [10, 10], "optimizer.learning_rate": 0.1}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_validation_select_metrics_steps_and_optimizer_keys(dialect):
    cli = parse_statement(CLI_TRAIN, dialect).split_with()
    assert cli.validation == {"validation_select": "SELECT * FROM iris.test"}
    binary = parse_statement(BINARY_TRAIN, dialect)
    assert binary.select == "SELECT * FROM iris.train WHERE class<>2"
    keys = binary.split_with()
    assert keys.model == {
        "n_classes": 2,
        "hidden_units": [10, 10],
        "optimizer": "RMSprop",
        "optimizer.learning_rate": 0.1,
    }
    assert keys.train == {"minibatch_size": 4}
    assert keys.validation == {
        "validation_select": "SELECT * FROM iris.test WHERE class<>2",
        "eval_metrics": "Accuracy,AUC",
    }
    regression = parse_statement(REGRESSION_TRAIN, dialect)
    assert (regression.model_def, regression.label) == ("DNNRegressor", "target")
    assert regression.split_with().validation["eval_metrics"].startswith("MeanAbsoluteError,")
    zoo = parse_statement(ZOO_TRAIN, dialect)
    assert zoo.model_def == "sqlflow_models.DNNClassifier"
    zoo_keys = zoo.split_with()
    assert zoo_keys.ignored == ["validation.steps"]  # as SQLFlow on TensorFlow 2: no effect
    assert zoo_keys.train == {"minibatch_size": 10, "num_epochs": 2}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_column_for_groups_and_several_optimizers(dialect):
    stmt = parse_statement(WIDE_AND_DEEP_TRAIN, dialect)
    assert stmt.feature_columns == (
        ColumnGroup((Field("sepal_length"), Field("sepal_width")), "linear_feature_columns"),
        ColumnGroup((Field("petal_length"), Field("petal_width")), "dnn_feature_columns"),
    )
    assert stmt.split_with().model == {
        "n_classes": 3,
        "dnn_hidden_units": [10, 20],
        "dnn_optimizer": "RMSprop",
        "dnn_optimizer.learning_rate": 0.01,
    }


@pytest.mark.parametrize("dialect", DIALECTS)
def test_predict_and_evaluate(dialect):
    predict = parse_statement(PREDICT, dialect)
    assert isinstance(predict, PredictStatement)
    assert (predict.result_table, predict.result_column) == ("iris.predict", "class")
    assert (predict.tables, predict.star) == (("iris.test",), True)
    with_keys = parse_statement(
        "SELECT * FROM iris.test TO PREDICT iris.predict.class WITH predict.batch_size=8 "
        "USING sqlflow_models.my_dnn_model",
        dialect,
    )
    assert with_keys.split_with().predict == {"minibatch_size": 8}
    evaluate = parse_statement(EVALUATE, dialect)
    assert isinstance(evaluate, EvaluateStatement)
    assert evaluate.model == ModelRef("sqlflow_models.my_regression_model", False)
    assert (evaluate.label, evaluate.into) == (
        "target",
        "sqlflow_models.my_regression_model_eval_result",
    )
    assert evaluate.split_with().validation == {
        "eval_metrics": "mean_absolute_error,mean_squared_error"
    }


def test_sql_the_database_accepts():
    stmt = parse_statement(
        "WITH recent AS (SELECT * FROM hr.emp WHERE year > 2020) "
        'SELECT e.age, d."Dept Name" AS dept, e.salary FROM recent e JOIN hr.dept d '
        "ON e.dept_id = d.id WHERE e.salary IN (SELECT salary FROM hr.emp) "
        "TO TRAIN DNNRegressor LABEL salary INTO m",
        "postgresql",
    )
    assert [c.name for c in stmt.columns] == ["age", "dept", "salary"]
    assert stmt.tables is None  # a CTE: its rows are not one table's
    mysql = parse_statement(
        "SELECT `class`, a FROM `my db`.`train` WHERE note = 'it\\'s' TO TRAIN m.M LABEL `class` "
        "INTO x",
        "mysql",
    )
    assert mysql.tables == ('"my db"."train"',)
    assert mysql.label == "`class`"
    legacy = parse_statement("SELECT * FROM iris.train TRAIN DNNClassifier LABEL class INTO m")
    assert legacy.model_def == "DNNClassifier"


def error(text, dialect=None):
    with pytest.raises(StatementError) as info:
        parse_statement(text, dialect)
    return info.value


@pytest.mark.parametrize(
    "text, at, expected",
    [
        ("SELECT * FROM iris.test LIMIT 10 TO EXPLAIN sqlflow_models.m;", "EXPLAIN", "TO EXPLAIN"),
        ("SELECT * FROM t TO RUN sqlflow/runnable:v0.0.1 CMD 'a.py' INTO r;", "RUN", "TO RUN is"),
        ("SELECT * FROM w TO MAXIMIZE SUM(x * c) CONSTRAINT x <= 3 INTO r", "MAXIMIZE", "TO MAX"),
        ("SELECT * FROM t TO TRAIN m COLUMN a, CROSS([a, b], 10) LABEL c INTO x", "CROSS", "CROSS"),
        ("SELECT * FROM t TO TRAIN m COLUMN DENSE(a, 3) LABEL c INTO x", "DENSE", "SQLFlow call"),
        ("SELECT * FROM t TO TRAIN m COLUMN a FOR x COLUMN b LABEL c INTO m", "COLUMN b", "FOR"),
        ("SELECT * FROM t TO TRAIN m COLUMN a FOR x COLUMN b FOR x INTO m", "x INTO", "two COLUMN"),
        ("SELECT * FROM t TO TRAIN m COLUMN BUCKET(a, [3, 1]) INTO m", "[3", "increasing"),
        ("SELECT * FROM t TO TRAIN m COLUMN CATEGORY_ID(a, 0) INTO m", "0)", "positive"),
        ("SELECT * FROM t TO TRAIN m COLUMN EMBEDDING(a, 4, max) INTO m", "max", "combiner"),
        ("SELECT * FROM t TO TRAIN m COLUMN NUMERIC(a INTO m", "INTO", "',' or ')'"),
        (
            "SELECT * FROM t TO TRAIN m WITH validation.metrics='Accurate' INTO m",
            "'Accurate'",
            "unknown",
        ),
        ("SELECT * FROM t TO TRAIN m WITH model.optimizer=Fast INTO m", "Fast", "Keras optim"),
        ("SELECT * FROM t TO TRAIN m WITH train.verbose=5 INTO m", "5", "0, 1 or 2"),
        ("SELECT * FROM t TO TRAIN m WITH validation.stepz=1 INTO m", "validation.", "steps"),
        ("SELECT * FROM t TO PREDICT t.c WITH x=1 INTO m", "INTO", "USING <model> after the WITH"),
        ("SELECT * FROM t TO EVALUATE m LABEL c", "", "INTO <result table>"),
        ("SELECT * FROM t TO EVALUATE m INTO 'x'", "'x'", "a result table"),
    ],
)
def test_refused_and_bad_clauses_point_at_their_words(text, at, expected):
    e = error(text)
    assert expected in e.message
    assert e.pos == (text.index(at) if at else len(text)), str(e)


def test_column_calls_and_their_text_form():
    text = (
        "COLUMN NUMERIC(x, 3), CATEGORY_ID(c, 10), INDICATOR(CATEGORY_HASH(s, 50)), "
        "EMBEDDING(CATEGORY_HASH(city, 1000), 8, 'sum'), BUCKET(age, [18, 30.5, 65]), plain "
        "FOR dnn_feature_columns COLUMN EMBEDDING(zip, 4) FOR linear_feature_columns"
    )
    groups = parse_groups(text)
    assert groups[0].columns == (
        Numeric("x", (3,)),
        CategoryId("c", 10),
        Indicator(CategoryHash("s", 50)),
        Embedding(CategoryHash("city", 1000), 8, "sum"),
        Bucket("age", (18.0, 30.5, 65.0)),
        Field("plain"),
    )
    assert groups[1] == ColumnGroup((Embedding(Field("zip"), 4),), "linear_feature_columns")
    assert parse_groups(to_text(groups)) == groups
    assert parse_groups("a, b") == (ColumnGroup((Field("a"), Field("b"))),)
    assert parse_groups("") == ()


def test_resolving_columns_against_the_data():
    data = {
        "age": DataColumn("float", 1, {"mean": 40.0, "std": 10.0}),
        "city": DataColumn("bytes", 1, {"distinct_estimate": 900}),
        "dept": DataColumn("int64", 1, {"min": 0, "max": 6}),
        "vec": DataColumn("float", 3),
        "id": DataColumn("int64"),
        "label": DataColumn("float"),
    }
    everything = resolve((), data, "label")
    assert everything.groups[0].columns == (
        Numeric("age"),
        Embedding(CategoryHash("city", 1800), 8),
        Numeric("dept"),
        Numeric("vec", (3,)),
    )  # id and the label are no features
    chosen = resolve(parse_groups("EMBEDDING(dept, 2), BUCKET(age, [30, 50])"), data, "label")
    assert chosen.groups[0].columns == (
        Embedding(CategoryId("dept", 7), 2),
        Bucket("age", (30.0, 50.0)),
    )
    assert list(chosen.inputs) == ["dept", "age"]
    again = ResolvedFeatures.from_json(chosen.to_json())
    assert again.groups == chosen.groups and again.inputs == chosen.inputs
    for text, message in [
        ("nope", "has no column 'nope'"),
        ("label", "is the label"),
        ("NUMERIC(city)", "holds text"),
        ("CATEGORY_ID(age, 3)", "not integer ids"),
        ("NUMERIC(vec, 2)", r"holds 3 value\(s\)"),
    ]:
        with pytest.raises(ValueError, match=message):
            resolve(parse_groups(text), data, "label")
