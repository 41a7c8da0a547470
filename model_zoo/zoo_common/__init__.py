"""Helpers shared by the built-in zoo models (imported as `zoo_common`, the zoo root on sys.path).

* `images` — parsing of image records for the MNIST and CIFAR-10 models;
* `classification` — sparse softmax loss and per-example accuracy for models that output logits;
* `tabular` — parsing of any table of tf.Example records, driven by `DatasetMetadata`, and the
  DNN base class behind `regressor.DNN` and `classifier.DNN`.
"""
