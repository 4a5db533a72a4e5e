"""ONNX deployment (`harness export onnx`): a fine-tuned checkpoint to a checked bundle."""
