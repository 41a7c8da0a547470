"""CIFAR-10 models: 32x32 RGB images (feature `image`, 3072 floats in 0-255, row-major
height x width x channel; `label`, int64 0-9).

* `cifar10.cifar10_functional_api.custom_model` — functional Keras model plus module functions;
* `cifar10.cifar10_subclass.CustomModel` — a `keras.Model` subclass plus module functions.
"""
