"""ElasticDL v0.2's `elasticdl.python.common.constants`: the names model files import.

`Mode` is this project's own (a string enum, so `mode == "training"` still works). The other
classes hold the string constants v0.2 model files and data readers read: the MaxCompute
(ODPS) environment variable names, job types, reader types and metric dict keys. ODPS itself
is not supported (see `elasticdl.python.data.odps_io`).
"""

from elasticdl.mode import Mode


class MaxComputeConfig:
    """Environment variables that name a MaxCompute (ODPS) project and its credentials."""

    PROJECT_NAME = "MAXCOMPUTE_PROJECT"
    ACCESS_ID = "MAXCOMPUTE_AK"
    ACCESS_KEY = "MAXCOMPUTE_SK"
    ENDPOINT = "MAXCOMPUTE_ENDPOINT"
    TUNNEL_ENDPOINT = "MAXCOMPUTE_TUNNEL_ENDPOINT"


class ODPSConfig:
    """The older (v0.1) names of the same environment variables."""

    PROJECT_NAME = "ODPS_PROJECT_NAME"
    ACCESS_ID = "ODPS_ACCESS_ID"
    ACCESS_KEY = "ODPS_ACCESS_KEY"
    ENDPOINT = "ODPS_ENDPOINT"


class JobType:
    TRAINING_ONLY = "training_only"
    EVALUATION_ONLY = "evaluation_only"
    PREDICTION_ONLY = "prediction_only"
    TRAINING_WITH_EVALUATION = "training_with_evaluation"


class MetricsDictKey:
    MODEL_OUTPUT = "output"
    LABEL = "label"


class ReaderType:
    CSV_READER = "CSV"
    ODPS_READER = "ODPS"
    RECORDIO_READER = "RecordIO"


class DistributionStrategy:
    LOCAL = "Local"
    PARAMETER_SERVER = "ParameterServerStrategy"
    ALLREDUCE = "AllreduceStrategy"


class SaveModelConfig:
    SAVED_MODEL_PATH = "saved_model_path"


class GRPC:
    """Message size limits of the job's gRPC channels (this project's, see job_config.py)."""

    MAX_SEND_MESSAGE_LENGTH = 1 << 30
    MAX_RECEIVE_MESSAGE_LENGTH = 1 << 30


__all__ = [
    "GRPC",
    "DistributionStrategy",
    "JobType",
    "MaxComputeConfig",
    "MetricsDictKey",
    "Mode",
    "ODPSConfig",
    "ReaderType",
    "SaveModelConfig",
]
