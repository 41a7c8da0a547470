"""ElasticDL's preprocessing feature columns (`feature_column.concatenated_categorical_column`)."""
