"""MNIST models: 28x28 grey images (feature `image`, 784 floats in 0-255; `label`, int64).

One model in each of the styles the model-zoo loader understands:

* `mnist.mnist_functional_api.custom_model` — functional Keras model plus module functions;
* `mnist.mnist_subclass.CustomModel` — a `keras.Model` subclass plus module functions;
* `mnist.mnist_spec.MnistSpec` — an `ElasticDLSpec` subclass;
* `mnist.mnist_v02.custom_model` — a model file written exactly as for ElasticDL v0.2.
"""
