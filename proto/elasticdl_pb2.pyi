from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DataType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DT_INVALID: _ClassVar[DataType]
    DT_FLOAT32: _ClassVar[DataType]
    DT_FLOAT64: _ClassVar[DataType]
    DT_INT32: _ClassVar[DataType]
    DT_INT64: _ClassVar[DataType]
    DT_BOOL: _ClassVar[DataType]
    DT_STRING: _ClassVar[DataType]
    DT_FLOAT16: _ClassVar[DataType]
    DT_BFLOAT16: _ClassVar[DataType]
    DT_INT8: _ClassVar[DataType]
    DT_UINT8: _ClassVar[DataType]
    DT_INT16: _ClassVar[DataType]

class TaskType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_TYPE_UNSPECIFIED: _ClassVar[TaskType]
    TRAINING: _ClassVar[TaskType]
    EVALUATION: _ClassVar[TaskType]
    PREDICTION: _ClassVar[TaskType]
    WAIT: _ClassVar[TaskType]
    SAVE_MODEL: _ClassVar[TaskType]
    TRAIN_END_CALLBACK: _ClassVar[TaskType]
DT_INVALID: DataType
DT_FLOAT32: DataType
DT_FLOAT64: DataType
DT_INT32: DataType
DT_INT64: DataType
DT_BOOL: DataType
DT_STRING: DataType
DT_FLOAT16: DataType
DT_BFLOAT16: DataType
DT_INT8: DataType
DT_UINT8: DataType
DT_INT16: DataType
TASK_TYPE_UNSPECIFIED: TaskType
TRAINING: TaskType
EVALUATION: TaskType
PREDICTION: TaskType
WAIT: TaskType
SAVE_MODEL: TaskType
TRAIN_END_CALLBACK: TaskType

class Tensor(_message.Message):
    __slots__ = ("name", "dtype", "dims", "content", "indices")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    DIMS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: DataType
    dims: _containers.RepeatedScalarFieldContainer[int]
    content: bytes
    indices: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[_Union[DataType, str]] = ..., dims: _Optional[_Iterable[int]] = ..., content: _Optional[bytes] = ..., indices: _Optional[_Iterable[int]] = ...) -> None: ...

class EmbeddingTableInfo(_message.Message):
    __slots__ = ("name", "dim", "initializer", "dtype", "seed")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIM_FIELD_NUMBER: _ClassVar[int]
    INITIALIZER_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    name: str
    dim: int
    initializer: str
    dtype: DataType
    seed: int
    def __init__(self, name: _Optional[str] = ..., dim: _Optional[int] = ..., initializer: _Optional[str] = ..., dtype: _Optional[_Union[DataType, str]] = ..., seed: _Optional[int] = ...) -> None: ...

class EmbeddingSlices(_message.Message):
    __slots__ = ("name", "ids", "values")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    name: str
    ids: Tensor
    values: Tensor
    def __init__(self, name: _Optional[str] = ..., ids: _Optional[_Union[Tensor, _Mapping]] = ..., values: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ("version", "dense_parameters", "embedding_table_infos", "non_trainable")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DENSE_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_TABLE_INFOS_FIELD_NUMBER: _ClassVar[int]
    NON_TRAINABLE_FIELD_NUMBER: _ClassVar[int]
    version: int
    dense_parameters: _containers.RepeatedCompositeFieldContainer[Tensor]
    embedding_table_infos: _containers.RepeatedCompositeFieldContainer[EmbeddingTableInfo]
    non_trainable: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, version: _Optional[int] = ..., dense_parameters: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ..., embedding_table_infos: _Optional[_Iterable[_Union[EmbeddingTableInfo, _Mapping]]] = ..., non_trainable: _Optional[_Iterable[str]] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Task(_message.Message):
    __slots__ = ("task_id", "shard_name", "start", "end", "type", "model_version", "epoch", "extended_config", "skip", "shuffle_seed", "progress_every_s", "wait_s")
    class ExtendedConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    SHARD_NAME_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    EXTENDED_CONFIG_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_SEED_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_EVERY_S_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    task_id: int
    shard_name: str
    start: int
    end: int
    type: TaskType
    model_version: int
    epoch: int
    extended_config: _containers.ScalarMap[str, str]
    skip: int
    shuffle_seed: int
    progress_every_s: float
    wait_s: float
    def __init__(self, task_id: _Optional[int] = ..., shard_name: _Optional[str] = ..., start: _Optional[int] = ..., end: _Optional[int] = ..., type: _Optional[_Union[TaskType, str]] = ..., model_version: _Optional[int] = ..., epoch: _Optional[int] = ..., extended_config: _Optional[_Mapping[str, str]] = ..., skip: _Optional[int] = ..., shuffle_seed: _Optional[int] = ..., progress_every_s: _Optional[float] = ..., wait_s: _Optional[float] = ...) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ("worker_id", "task_type", "ahead")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    AHEAD_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    task_type: TaskType
    ahead: bool
    def __init__(self, worker_id: _Optional[int] = ..., task_type: _Optional[_Union[TaskType, str]] = ..., ahead: _Optional[bool] = ...) -> None: ...

class ReportProgressRequest(_message.Message):
    __slots__ = ("worker_id", "task_id", "records_done", "loss", "model_version")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_DONE_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    task_id: int
    records_done: int
    loss: float
    model_version: int
    def __init__(self, worker_id: _Optional[int] = ..., task_id: _Optional[int] = ..., records_done: _Optional[int] = ..., loss: _Optional[float] = ..., model_version: _Optional[int] = ...) -> None: ...

class ReportTaskResultRequest(_message.Message):
    __slots__ = ("worker_id", "task_id", "err_message", "exec_counters", "ahead_task_id", "loss", "model_version")
    class ExecCountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ERR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    EXEC_COUNTERS_FIELD_NUMBER: _ClassVar[int]
    AHEAD_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    task_id: int
    err_message: str
    exec_counters: _containers.ScalarMap[str, int]
    ahead_task_id: int
    loss: float
    model_version: int
    def __init__(self, worker_id: _Optional[int] = ..., task_id: _Optional[int] = ..., err_message: _Optional[str] = ..., exec_counters: _Optional[_Mapping[str, int]] = ..., ahead_task_id: _Optional[int] = ..., loss: _Optional[float] = ..., model_version: _Optional[int] = ...) -> None: ...

class ReportEvaluationMetricsRequest(_message.Message):
    __slots__ = ("worker_id", "task_id", "model_version", "metric_states")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    METRIC_STATES_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    task_id: int
    model_version: int
    metric_states: _containers.RepeatedCompositeFieldContainer[Tensor]
    def __init__(self, worker_id: _Optional[int] = ..., task_id: _Optional[int] = ..., model_version: _Optional[int] = ..., metric_states: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ...) -> None: ...

class ReportVersionRequest(_message.Message):
    __slots__ = ("worker_id", "model_version")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    model_version: int
    def __init__(self, worker_id: _Optional[int] = ..., model_version: _Optional[int] = ...) -> None: ...

class ScaleWorkersRequest(_message.Message):
    __slots__ = ("num_workers",)
    NUM_WORKERS_FIELD_NUMBER: _ClassVar[int]
    num_workers: int
    def __init__(self, num_workers: _Optional[int] = ...) -> None: ...

class ScaleWorkersResponse(_message.Message):
    __slots__ = ("accepted", "message", "pending")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    message: str
    pending: bool
    def __init__(self, accepted: _Optional[bool] = ..., message: _Optional[str] = ..., pending: _Optional[bool] = ...) -> None: ...

class PSAddressesRequest(_message.Message):
    __slots__ = ("worker_id",)
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    def __init__(self, worker_id: _Optional[int] = ...) -> None: ...

class PSAddresses(_message.Message):
    __slots__ = ("addresses",)
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    addresses: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, addresses: _Optional[_Iterable[str]] = ...) -> None: ...

class PullDenseParametersRequest(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class PullDenseParametersResponse(_message.Message):
    __slots__ = ("initialized", "version", "dense_parameters")
    INITIALIZED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DENSE_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    initialized: bool
    version: int
    dense_parameters: _containers.RepeatedCompositeFieldContainer[Tensor]
    def __init__(self, initialized: _Optional[bool] = ..., version: _Optional[int] = ..., dense_parameters: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ...) -> None: ...

class PushGradientsRequest(_message.Message):
    __slots__ = ("worker_id", "version", "gradients", "learning_rate_scale", "task_id", "records_end", "non_trainable", "embedding_gradients", "return_parameters")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    GRADIENTS_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_SCALE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_END_FIELD_NUMBER: _ClassVar[int]
    NON_TRAINABLE_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_GRADIENTS_FIELD_NUMBER: _ClassVar[int]
    RETURN_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    version: int
    gradients: _containers.RepeatedCompositeFieldContainer[Tensor]
    learning_rate_scale: float
    task_id: int
    records_end: int
    non_trainable: _containers.RepeatedCompositeFieldContainer[Tensor]
    embedding_gradients: _containers.RepeatedCompositeFieldContainer[EmbeddingSlices]
    return_parameters: bool
    def __init__(self, worker_id: _Optional[int] = ..., version: _Optional[int] = ..., gradients: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ..., learning_rate_scale: _Optional[float] = ..., task_id: _Optional[int] = ..., records_end: _Optional[int] = ..., non_trainable: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ..., embedding_gradients: _Optional[_Iterable[_Union[EmbeddingSlices, _Mapping]]] = ..., return_parameters: _Optional[bool] = ...) -> None: ...

class PushGradientsResponse(_message.Message):
    __slots__ = ("accepted", "version", "dense_parameters", "staleness", "applied_lr_scale")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DENSE_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    STALENESS_FIELD_NUMBER: _ClassVar[int]
    APPLIED_LR_SCALE_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    version: int
    dense_parameters: _containers.RepeatedCompositeFieldContainer[Tensor]
    staleness: int
    applied_lr_scale: float
    def __init__(self, accepted: _Optional[bool] = ..., version: _Optional[int] = ..., dense_parameters: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ..., staleness: _Optional[int] = ..., applied_lr_scale: _Optional[float] = ...) -> None: ...

class AppliedProgressRequest(_message.Message):
    __slots__ = ("task_ids", "flush_checkpoints_s")
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    FLUSH_CHECKPOINTS_S_FIELD_NUMBER: _ClassVar[int]
    task_ids: _containers.RepeatedScalarFieldContainer[int]
    flush_checkpoints_s: float
    def __init__(self, task_ids: _Optional[_Iterable[int]] = ..., flush_checkpoints_s: _Optional[float] = ...) -> None: ...

class CheckpointHealth(_message.Message):
    __slots__ = ("enabled", "written", "failed", "failed_in_a_row", "last_error", "last_failed_version")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    FAILED_IN_A_ROW_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILED_VERSION_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    written: int
    failed: int
    failed_in_a_row: int
    last_error: str
    last_failed_version: int
    def __init__(self, enabled: _Optional[bool] = ..., written: _Optional[int] = ..., failed: _Optional[int] = ..., failed_in_a_row: _Optional[int] = ..., last_error: _Optional[str] = ..., last_failed_version: _Optional[int] = ...) -> None: ...

class AppliedProgressResponse(_message.Message):
    __slots__ = ("records_end", "checkpoints")
    class RecordsEndEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    RECORDS_END_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    records_end: _containers.ScalarMap[int, int]
    checkpoints: CheckpointHealth
    def __init__(self, records_end: _Optional[_Mapping[int, int]] = ..., checkpoints: _Optional[_Union[CheckpointHealth, _Mapping]] = ...) -> None: ...

class PullEmbeddingVectorsRequest(_message.Message):
    __slots__ = ("name", "ids", "id_tensor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    ID_TENSOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    ids: _containers.RepeatedScalarFieldContainer[int]
    id_tensor: Tensor
    def __init__(self, name: _Optional[str] = ..., ids: _Optional[_Iterable[int]] = ..., id_tensor: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class PullEmbeddingTablesRequest(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedCompositeFieldContainer[Tensor]
    def __init__(self, ids: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ...) -> None: ...

class PullEmbeddingTablesResponse(_message.Message):
    __slots__ = ("vectors",)
    VECTORS_FIELD_NUMBER: _ClassVar[int]
    vectors: _containers.RepeatedCompositeFieldContainer[Tensor]
    def __init__(self, vectors: _Optional[_Iterable[_Union[Tensor, _Mapping]]] = ...) -> None: ...

class EmbeddingTablesDescription(_message.Message):
    __slots__ = ("infos", "rows", "restored_version", "restored_rows")
    class RestoredRowsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    INFOS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    RESTORED_VERSION_FIELD_NUMBER: _ClassVar[int]
    RESTORED_ROWS_FIELD_NUMBER: _ClassVar[int]
    infos: _containers.RepeatedCompositeFieldContainer[EmbeddingTableInfo]
    rows: _containers.RepeatedScalarFieldContainer[int]
    restored_version: int
    restored_rows: _containers.ScalarMap[str, int]
    def __init__(self, infos: _Optional[_Iterable[_Union[EmbeddingTableInfo, _Mapping]]] = ..., rows: _Optional[_Iterable[int]] = ..., restored_version: _Optional[int] = ..., restored_rows: _Optional[_Mapping[str, int]] = ...) -> None: ...

class ReadEmbeddingRowsRequest(_message.Message):
    __slots__ = ("name", "start", "limit")
    NAME_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    name: str
    start: int
    limit: int
    def __init__(self, name: _Optional[str] = ..., start: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ReadEmbeddingRowsResponse(_message.Message):
    __slots__ = ("rows", "total")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    rows: EmbeddingSlices
    total: int
    def __init__(self, rows: _Optional[_Union[EmbeddingSlices, _Mapping]] = ..., total: _Optional[int] = ...) -> None: ...

class TrainedModel(_message.Message):
    __slots__ = ("docker_commit_id", "model_def", "model_def_params", "params_filename", "input_function", "loss", "optimizer", "model_zoo", "saved_model_path", "data", "sql", "db_url", "schema_json", "metrics", "created_time", "model_version", "eval_metrics_fn", "elasticdl_version", "model_zoo_commit", "label_column", "input_signature", "embedding_tables", "feature_columns")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    DOCKER_COMMIT_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_DEF_FIELD_NUMBER: _ClassVar[int]
    MODEL_DEF_PARAMS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FILENAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_FUNCTION_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    OPTIMIZER_FIELD_NUMBER: _ClassVar[int]
    MODEL_ZOO_FIELD_NUMBER: _ClassVar[int]
    SAVED_MODEL_PATH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    DB_URL_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    CREATED_TIME_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    EVAL_METRICS_FN_FIELD_NUMBER: _ClassVar[int]
    ELASTICDL_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_ZOO_COMMIT_FIELD_NUMBER: _ClassVar[int]
    LABEL_COLUMN_FIELD_NUMBER: _ClassVar[int]
    INPUT_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_TABLES_FIELD_NUMBER: _ClassVar[int]
    FEATURE_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    docker_commit_id: str
    model_def: str
    model_def_params: str
    params_filename: str
    input_function: str
    loss: str
    optimizer: str
    model_zoo: str
    saved_model_path: str
    data: str
    sql: str
    db_url: str
    schema_json: str
    metrics: _containers.ScalarMap[str, float]
    created_time: str
    model_version: int
    eval_metrics_fn: str
    elasticdl_version: str
    model_zoo_commit: str
    label_column: str
    input_signature: str
    embedding_tables: _containers.RepeatedCompositeFieldContainer[TrainedTable]
    feature_columns: str
    def __init__(self, docker_commit_id: _Optional[str] = ..., model_def: _Optional[str] = ..., model_def_params: _Optional[str] = ..., params_filename: _Optional[str] = ..., input_function: _Optional[str] = ..., loss: _Optional[str] = ..., optimizer: _Optional[str] = ..., model_zoo: _Optional[str] = ..., saved_model_path: _Optional[str] = ..., data: _Optional[str] = ..., sql: _Optional[str] = ..., db_url: _Optional[str] = ..., schema_json: _Optional[str] = ..., metrics: _Optional[_Mapping[str, float]] = ..., created_time: _Optional[str] = ..., model_version: _Optional[int] = ..., eval_metrics_fn: _Optional[str] = ..., elasticdl_version: _Optional[str] = ..., model_zoo_commit: _Optional[str] = ..., label_column: _Optional[str] = ..., input_signature: _Optional[str] = ..., embedding_tables: _Optional[_Iterable[_Union[TrainedTable, _Mapping]]] = ..., feature_columns: _Optional[str] = ...) -> None: ...

class TrainedTable(_message.Message):
    __slots__ = ("name", "dim", "rows", "initializer")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIM_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    INITIALIZER_FIELD_NUMBER: _ClassVar[int]
    name: str
    dim: int
    rows: int
    initializer: str
    def __init__(self, name: _Optional[str] = ..., dim: _Optional[int] = ..., rows: _Optional[int] = ..., initializer: _Optional[str] = ...) -> None: ...
