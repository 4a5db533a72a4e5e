"""Deployment: a fine-tuned checkpoint to a checked ONNX bundle (`harness export onnx`), and the bundle run
without torch (`harness predict`, `harness serve`)."""
