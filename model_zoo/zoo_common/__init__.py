"""Helpers shared by the built-in zoo models (imported as `zoo_common`, the zoo root on sys.path).

* `chunks` — records parsed a chunk at a time and handed on one by one (every parser here);
* `images` — parsing of image records for the MNIST and CIFAR-10 models;
* `ctr` — parsing of Criteo-layout records and the CTR models (`deepfm`, `wide_and_deep`);
* `classification` — sparse softmax loss and per-example accuracy for models that output logits;
* `tabular` — parsing of any table of tf.Example records, driven by `DatasetMetadata`, and the
  DNN base class behind `regressor.DNN` and `classifier.DNN`.

Their record parsers, mapped over `tf.data` datasets, are plain tensor code (Python `for` and
`if` over the columns only, never over tensor values), so they are marked
`tf.autograph.experimental.do_not_convert`: AutoGraph's conversion of `tabular`'s parser and the
helpers it calls cost 0.16 s of every process that builds the model (0.28 -> 0.12 s to build
`regressor.DNN`), on a worker's way to its first minibatch.
"""
