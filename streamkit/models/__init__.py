"""Trained models (PyTorch), their feature front-ends and weight files.

Models are kept apart from the blocks that stream them. Among them:

* :mod:`streamkit.models.sad_dnn`: the HF paper's CNN-GRU speech activity detector (model,
  features, streaming inference engine, weight files; shipped weights in ``weights/``);
  :mod:`streamkit.models.sad_dnn_block` is its block ``models.sad_dnn``, and
  :mod:`streamkit.models.train_sad_dnn` its training recipe (``streamkit train sad-dnn``).
"""

from pathlib import Path

#: the shipped CNN-GRU SAD weights (here, torch-free, so that callers can look for them cheaply);
#: the model card ``sad_dnn.json`` lies next to them
SAD_DNN_WEIGHTS = Path(__file__).resolve().parent / "weights" / "sad_dnn.pt"
#: the shipped multilingual RNN-T weights (multi-softmax + LID head, ``streamkit train rnnt --variant lid``);
#: model card ``rnnt_lid.json`` next to them. May be absent in a development tree until trained.
RNNT_WEIGHTS = Path(__file__).resolve().parent / "weights" / "rnnt_lid.pt"
#: the shipped SED CRNN weights (the best method of benchmarks/sed_table1.py); model card ``sed_crnn.json`` beside them
SED_WEIGHTS = Path(__file__).resolve().parent / "weights" / "sed_crnn.pt"
