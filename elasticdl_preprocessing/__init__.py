"""ElasticDL's preprocessing package, `elasticdl_preprocessing`, for model files that import it.

Why a second top-level package: ElasticDL's develop-branch model zoo (the CTR models of
`model_zoo/dac_ctr`, the census wide-and-deep models) imports `elasticdl_preprocessing.layers`
and `elasticdl_preprocessing.feature_column` under exactly these names, and ElasticDL's own
distribution of them (`elasticdl_preprocessing` on PyPI, 2020) does not install on current
TensorFlow. So this distribution ships the same import paths, written anew for TensorFlow 2.21:

* `layers`: Hashing, Discretization, Normalizer, IndexLookup, LogRound, RoundIdentity,
  ToNumber, ToRagged, ToSparse, ConcatenateWithOffset, SparseEmbedding (one module each, under
  ElasticDL's module names), layers of this process's Keras: Keras 3, or tf_keras for Keras 2
  model files (`elasticdl.runtime.keras_mode`). SparseEmbedding keeps a large table on the
  parameter servers (`elasticdl.layers.Embedding`).
* `feature_column.feature_column.concatenated_categorical_column` (a Keras 2 feature column).
* `utils.decorators.declare_model_inputs`, `utils.analyzer_utils` (statistics from the
  environment) and `constants.AnalysisEnvTemplate`.

Behaviour follows each layer's docstring in ElasticDL and its tests; where the two disagree the
layer's docstring here says which it follows.
"""
