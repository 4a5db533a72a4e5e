"""Publishing a run's result with its evidence: a Hugging Face model card beside each saved model
(`harness card`) and the upload of one model with its card to the Hub (`harness push`)."""
