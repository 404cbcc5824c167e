"""What a run shares (:mod:`evaltui.runview.snapshot`) and ``evaltui export`` to trackers:
one module per tracker (W&B, MLflow, TensorBoard), each imported only when asked for."""
