"""ElasticDL: elastic, fault-tolerant training and prediction for TensorFlow/Keras models.

Public API: `Mode`, `ElasticDLSpec`. Training and prediction entry points arrive with the
elastic runtime.
"""

from elasticdl.mode import Mode
from elasticdl.spec import ElasticDLSpec

__all__ = ["ElasticDLSpec", "Mode"]
__version__ = "0.3.0.dev0"
