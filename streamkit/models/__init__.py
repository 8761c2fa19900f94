"""Trained models (PyTorch), their feature front-ends and weight files.

Models are kept apart from the blocks that stream them (``shared/design.md``). Among them:

* :mod:`streamkit.models.sad_dnn`: the HF paper's CNN-GRU speech activity detector (model,
  features, streaming inference engine, weight files; shipped weights in ``weights/``);
  :mod:`streamkit.models.sad_dnn_block` is its block ``models.sad_dnn``, and
  :mod:`streamkit.models.train_sad_dnn` its training recipe (``streamkit train sad-dnn``).
"""
